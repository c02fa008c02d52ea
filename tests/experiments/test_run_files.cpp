// A run leaves only its outputs: no *.tmp.*, learning_curve.png.dat or .gp,
// after a complete run and after a resumable stop; and metrics.jsonl write
// errors (a full disk, a removed out dir) are errors naming the file.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "experiments/common/metrics.h"
#include "runtime/error.h"
#include "tests/experiments/omniglot_fixture.h"

namespace {

using namespace mn_test_exp;

const std::vector<std::string> kSmall = {"--iters", "2", "--batch", "4", "--val-triplets", "12", "--val-tasks", "6",
                                         "--lr", "1e-3", "--seed", "4"};

// Names of files in `dir` that are temporaries.
std::vector<std::string> leftovers(const fs::path& dir) {
  std::vector<std::string> bad;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.find(".tmp") != std::string::npos ||
        (n.size() > 4 && (n.substr(n.size() - 4) == ".dat" || n.substr(n.size() - 3) == ".gp")))
      bad.push_back(n);
  }
  return bad;
}

TEST(RunFiles, NoTemporariesAfterARunOrAStop) {
  TempDir out("files"), stopped("filesstop"), cache("filescache");
  ASSERT_EQ(run_study(StudyKind::Triplet, base_args(out.str(), cache.str()) + kSmall +
                                              std::vector<std::string>{"--epochs", "2"}).rc, 0);
  EXPECT_TRUE(fs::exists(out / "summary.json"));
  EXPECT_TRUE(leftovers(out.path).empty()) << leftovers(out.path)[0];
  // Stopped after the first epoch's validation and plot, in the second epoch.
  RunResult r = run_study(StudyKind::Siamese, base_args(stopped.str(), cache.str()) + kSmall +
                                                  std::vector<std::string>{"--epochs", "3", "--stop-after", "3"});
  ASSERT_EQ(r.rc, 3);
  EXPECT_TRUE(fs::exists(stopped / "last.safetensors"));
  EXPECT_TRUE(leftovers(stopped.path).empty()) << leftovers(stopped.path)[0];
}

TEST(RunFiles, MetricsWriteErrorsNameTheFile) {
  TempDir d("metricserr");
  const std::string path = (d.path / "run" / "metrics.jsonl").string();
  fs::create_directories(d / "run");
  {
    mn::exp::MetricsLog log(path, -1);
    log.write(mn::exp::Json{{"epoch", 1}});
    fs::remove_all(d / "run");  // the out dir removed during the run
    try {
      log.write(mn::exp::Json{{"epoch", 2}});
      FAIL() << "no error for a removed folder";
    } catch (const mn::Error& e) {
      EXPECT_NE(e.message().find(path), std::string::npos) << e.message();
    }
  }
  if (fs::exists("/dev/full")) {  // a full disk: every write fails with ENOSPC
    fs::create_directories(d / "full");
    const std::string p = (d.path / "full" / "metrics.jsonl").string();
    mn::exp::MetricsLog log(p, -1);
    fs::remove(p);
    fs::create_symlink("/dev/full", p);
    try {
      log.write(mn::exp::Json{{"epoch", 1}});
      FAIL() << "no error for a full disk";
    } catch (const mn::Error& e) {
      EXPECT_NE(e.message().find(p), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("space"), std::string::npos) << e.message();
    }
  }
}

}  // namespace
