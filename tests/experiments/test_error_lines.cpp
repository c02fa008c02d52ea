// The error lines users see (runtime/error.h, harness main): a refused run
// prints one line in the user's words, naming the flag or file at fault and
// the fix, without the failed check or a source path; MN_DEBUG_ERRORS=1 adds
// them back for developers.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "tests/experiments/omniglot_fixture.h"

namespace {

using namespace mn_test_exp;

// The error is the last line of stderr (progress lines may precede it when the
// refusal comes after training started) and has no developer text; a refusal
// before the run is the only line.
std::string error_line(const std::string& err, bool only_line, const std::string& what) {
  EXPECT_FALSE(err.empty()) << what;
  if (err.empty()) return "";
  EXPECT_EQ(err.back(), '\n') << what << ": " << err;
  const size_t start = err.rfind('\n', err.size() - 2);
  const std::string line = start == std::string::npos ? err : err.substr(start + 1);
  if (only_line) {
    EXPECT_EQ(line, err) << what << ": not one line: " << err;
  }
  EXPECT_EQ(line.find("check `"), std::string::npos) << what << ": " << line;
  EXPECT_EQ(line.find("check '"), std::string::npos) << what << ": " << line;
  for (const char* src : {".cpp:", ".h:", ".cu:", "experiments/", "runtime/"})
    EXPECT_EQ(line.find(src), std::string::npos) << what << ": source path in: " << line;
  return line;
}

TEST(ErrorLines, ErrorKeepsMessageCheckAndLocationApart) {
  try {
    const int n = 3;
    MN_CHECK(n == 4, "myop: n is ", n, "; give 4");
    FAIL() << "no throw";
  } catch (const mn::Error& e) {
    EXPECT_EQ(e.message(), "myop: n is 3; give 4");
    EXPECT_EQ(e.check(), "n == 4");
    EXPECT_NE(e.file().find("test_error_lines.cpp"), std::string::npos);
    EXPECT_GT(e.line(), 0);
    const std::string w = e.what();  // developers' full text
    EXPECT_NE(w.find("check `n == 4` failed"), std::string::npos) << w;
    EXPECT_NE(w.find("test_error_lines.cpp:"), std::string::npos) << w;
    ::unsetenv("MN_DEBUG_ERRORS");
    EXPECT_EQ(mn::user_message(e), "myop: n is 3; give 4");
    ::setenv("MN_DEBUG_ERRORS", "1", 1);
    const std::string dbg = mn::user_message(e);
    ::unsetenv("MN_DEBUG_ERRORS");
    EXPECT_NE(dbg.find("check `n == 4` failed at "), std::string::npos) << dbg;
    EXPECT_NE(dbg.find("test_error_lines.cpp:"), std::string::npos) << dbg;
  }
}

TEST(ErrorLines, RefusedRunsPrintOneCleanLineNamingTheFlag) {
  TempDir out("errlines"), cache("errcache");
  struct Case {
    StudyKind kind;
    std::vector<std::string> args;
    std::vector<std::string> must_mention;
    bool before_run = true;  // refused before any data is loaded
  };
  const auto base = base_args(out / "o", cache.str());
  const Case cases[] = {
      // --preset full: the flag check alone, whatever preset this machine would pick.
      {StudyKind::Triplet, {"--loss", "multi-similarity", "--preset", "full"}, {"--loss", "--sampling online-balanced"}},
      {StudyKind::Triplet, {"--iters", "-3"}, {"--iters", "-3"}},
      {StudyKind::Triplet, {"--val-way", "1"}, {"--val-way"}},
      {StudyKind::Siamese, {"--test-way", "0"}, {"--test-way"}},
      {StudyKind::Triplet, {"--eval-batch", "0"}, {"--eval-batch"}},
      {StudyKind::Siamese, {"--embedding", "-1"}, {"--embedding"}},
      {StudyKind::Triplet, {"--embedding", "big"}, {"--embedding"}},
      {StudyKind::Triplet, {"--data-dir", out / "nowhere"}, {"--data-dir", "nowhere"}},
      {StudyKind::Triplet, {"--evaluate", out / "missing.safetensors"}, {"--evaluate", "missing.safetensors"}},
      {StudyKind::Triplet,
       base + std::vector<std::string>{"--val-way", "500", "--iters", "1", "--batch", "4", "--val-triplets", "12"},
       {"--val-way"},
       false},
      {StudyKind::Siamese,
       base + std::vector<std::string>{"--test-way", "500", "--iters", "1", "--batch", "4", "--val-triplets", "12",
                                       "--val-tasks", "4", "--test-dir", omniglot_root() + "/images_evaluation"},
       {"--test-way", "images_evaluation"},
       false},
  };
  for (const auto& c : cases) {
    std::string label;
    for (const auto& a : c.args) label += a + " ";
    RunResult r = run_study(c.kind, c.args, /*capture_stderr=*/true);
    EXPECT_EQ(r.rc, c.before_run ? 2 : 1) << label;
    const std::string line = error_line(r.err, c.before_run, label);
    EXPECT_EQ(line.rfind(c.kind == StudyKind::Triplet ? "omniglot_triplet: " : "omniglot_siamese: ", 0), 0u) << line;
    for (const auto& m : c.must_mention) EXPECT_NE(line.find(m), std::string::npos) << label << ": " << line;
  }
}

TEST(ErrorLines, DebugEnvironmentShowsTheCheckAndLocation) {
  ::setenv("MN_DEBUG_ERRORS", "1", 1);
  RunResult r = run_study(StudyKind::Triplet, {"--loss", "multi-similarity", "--preset", "full"}, true);
  ::unsetenv("MN_DEBUG_ERRORS");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("check `"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("triplet_study.cpp:"), std::string::npos) << r.err;
}

}  // namespace
