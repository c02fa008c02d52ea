// Test-time augmentation of the Omniglot studies' final test (--tta N): the
// summary gives the validation one-shot accuracy of the best model plain (equal
// to the best epoch's validation, the same model scored the same way) and with
// the N views; the views are fixed, so two evaluations of one checkpoint agree
// exactly (--test-dir: the synthetic tree has no Lake runs); --tta may change when a checkpoint is evaluated; out-of-range
// values are usage errors naming the flag.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "experiments/common/json.h"
#include "tests/experiments/omniglot_fixture.h"

namespace {

using namespace mn_test_exp;
using mn::exp::Json;

const std::vector<std::string> kSmall = {"--iters", "3", "--batch", "4", "--val-triplets", "12", "--val-tasks", "20",
                                         "--lr", "1e-3", "--seed", "7", "--epochs", "2"};

double test_dir_accuracy(const Json& j) { return j["test_dir"]["accuracy_percent"].get<double>(); }

TEST(TestTimeAugmentation, ValidationPlainAndWithViewsBesideTheBestEpoch) {
  TempDir out("tta"), cache("ttacache");
  for (StudyKind kind : {StudyKind::Triplet, StudyKind::Siamese}) {
    RunResult r = run_study(kind, base_args(out.str(), cache.str()) + kSmall + std::vector<std::string>{"--tta", "4"},
                            true);
    ASSERT_EQ(r.rc, 0) << r.err;
    const Json sum = Json::parse(read_text(out / "summary.json"));
    ASSERT_TRUE(sum.contains("val_one_shot_tta_percent")) << sum.dump();
    EXPECT_EQ(sum["tta_views"].get<int64_t>(), 4);
    // The plain score of the best model is its best epoch's validation score.
    EXPECT_NEAR(sum["val_one_shot_plain_percent"].get<double>(), sum["best_val_one_shot_percent"].get<double>(), 1e-9);
    const double tta = sum["val_one_shot_tta_percent"].get<double>();
    EXPECT_TRUE(tta >= 0 && tta <= 100) << tta;
    const std::string report = read_text(out / "report.md");
    EXPECT_NE(report.find("4 views of every image"), std::string::npos) << report;
    // How the views are combined, named per study (score_views).
    EXPECT_NE(report.find(kind == StudyKind::Triplet ? "distance of their mean embeddings" : "mean of their scores"),
              std::string::npos) << report;
    if (kind == StudyKind::Triplet) {
      // Fixed views: evaluating the checkpoint twice gives the same scores.
      TempDir e1("ttaev1"), e2("ttaev2");
      const std::vector<std::string> ev = {"--evaluate", out / "best.safetensors", "--data-dir", omniglot_root(),
                                           "--cache-dir", cache.str(), "--device", "cpu", "--tta", "3",
                                           "--test-dir", omniglot_root() + "/images_evaluation", "--test-way", "5",
                                           "--test-tasks", "10"};
      for (const TempDir* e : {&e1, &e2}) {
        RunResult er = run_study(kind, ev + std::vector<std::string>{"--out-dir", e->str()}, true);
        ASSERT_EQ(er.rc, 0) << er.err;
      }
      const Json a = Json::parse(read_text(e1 / "evaluation.json")), b = Json::parse(read_text(e2 / "evaluation.json"));
      EXPECT_EQ(a["tta_views"].get<int64_t>(), 3);
      EXPECT_EQ(test_dir_accuracy(a), test_dir_accuracy(b));
      EXPECT_EQ(a["test_dir"]["per_alphabet"].dump(), b["test_dir"]["per_alphabet"].dump());
    }
    std::filesystem::remove_all(out.path);
    std::filesystem::create_directories(out.path);
  }
}

TEST(TestTimeAugmentation, OutOfRangeViewCountIsAUsageError) {
  TempDir out("ttabad"), cache("ttabadcache");
  for (const char* n : {"0", "65"}) {
    RunResult r = run_study(StudyKind::Triplet, base_args(out.str(), cache.str()) + kSmall +
                                                    std::vector<std::string>{"--tta", n}, true);
    EXPECT_EQ(r.rc, 2) << n;
    EXPECT_NE(r.err.find("--tta"), std::string::npos) << r.err;
  }
}

}  // namespace
