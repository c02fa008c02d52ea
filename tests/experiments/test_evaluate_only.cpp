// --evaluate needs only what it evaluates: without images_background/ it still
// scores --test-dir, and it loads neither the training nor the validation
// split; with nothing to evaluate it is a usage error saying what to pass.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "experiments/common/json.h"
#include "tests/experiments/omniglot_fixture.h"

namespace {

using namespace mn_test_exp;

TEST(EvaluateOnly, ScoresTestDirWithoutTheBackgroundSet) {
  TempDir out("evonly"), cache("evonlycache"), bare("evonlybare"), ev("evonlyout");
  ASSERT_EQ(run_study(StudyKind::Triplet, base_args(out.str(), cache.str()) +
                                              std::vector<std::string>{"--iters", "2", "--batch", "4", "--epochs", "1",
                                                                       "--val-triplets", "12", "--val-tasks", "6"}).rc,
            0);
  // A data dir with no images_background/ (and no all_runs/).
  testing::internal::CaptureStdout();
  RunResult r = run_study(StudyKind::Triplet,
                          {"--evaluate", out / "best.safetensors", "--data-dir", bare.str(), "--out-dir", ev.str(),
                           "--cache-dir", cache.str(), "--device", "cpu", "--test-dir",
                           omniglot_root() + "/images_evaluation", "--test-way", "5", "--test-tasks", "10"},
                          true);
  const std::string so = testing::internal::GetCapturedStdout();
  ASSERT_EQ(r.rc, 0) << r.err;
  // The splits were not loaded (StudyData prints "data: ..." when it loads them).
  EXPECT_EQ(so.find("data: "), std::string::npos) << so;
  const std::string evaluation = read_text(ev / "evaluation.json");
  // (Parsed: the per-alphabet entries have "trials" of their own.)
  const mn::exp::Json ej = mn::exp::Json::parse(evaluation);
  EXPECT_EQ(ej["test_dir"]["trials"].get<double>(), 50.0) << evaluation;
  // Nothing to evaluate: no all_runs/ and no --test-dir.
  RunResult none = run_study(StudyKind::Triplet, {"--evaluate", out / "best.safetensors", "--data-dir", bare.str(),
                                                  "--out-dir", ev.str(), "--device", "cpu"},
                             true);
  EXPECT_EQ(none.rc, 2);
  EXPECT_NE(none.err.find("--test-dir"), std::string::npos) << none.err;
  EXPECT_NE(none.err.find("all_runs"), std::string::npos) << none.err;
}

}  // namespace
