// The triplet study's scoring distance (--eval-distance): auto follows the
// loss (cosine for multi-similarity, which trains on cosine similarities;
// Euclidean for the triplet losses), the summary and evaluation.json say which
// was used, --evaluate restores it (and the loss) from the checkpoint unless
// given again, the two distances score a checkpoint differently, a resumed run
// keeps its distance, and a bad value is a usage error naming the flag.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "experiments/common/json.h"
#include "tests/experiments/omniglot_fixture.h"

namespace {

using namespace mn_test_exp;
using mn::exp::Json;

std::vector<std::string> conv4_run(const std::string& out, const std::string& cache) {
  return {"--data-dir", omniglot_root(), "--out-dir", out, "--cache-dir", cache, "--device", "cpu",
          "--preset", "full", "--val-way", "5", "--eval-batch", "64", "--epochs", "2", "--iters", "3",
          "--val-triplets", "12", "--val-tasks", "4", "--trunk", "conv4", "--channels", "8", "--image-size", "28",
          "--embedding", "16", "--input-norm", "--lr", "1e-3", "--seed", "5",
          "--test-dir", omniglot_root() + "/images_evaluation", "--test-way", "5", "--test-tasks", "40"};
}
const std::vector<std::string> kMultiSimilarity = {"--loss", "multi-similarity", "--sampling", "online-balanced",
                                                   "--batch", "4", "--per-class", "3"};

Json evaluate(const TempDir& run, const TempDir& cache, const std::vector<std::string>& extra) {
  TempDir ev("evdist_ev");
  std::vector<std::string> args = {"--evaluate", run / "last.safetensors", "--data-dir", omniglot_root(),
                                   "--cache-dir", cache.str(), "--device", "cpu", "--eval-batch", "64",
                                   "--test-dir", omniglot_root() + "/images_evaluation", "--test-way", "5",
                                   "--test-tasks", "40", "--out-dir", ev.str()};
  RunResult r = run_study(StudyKind::Triplet, args + extra, true);
  EXPECT_EQ(r.rc, 0) << r.err;
  return Json::parse(read_text(ev / "evaluation.json"));
}

TEST(EvalDistance, AutoFollowsTheLossAndEvaluateRestoresIt) {
  TempDir out("evdist"), cache("evdistcache");
  RunResult r = run_study(StudyKind::Triplet, conv4_run(out.str(), cache.str()) + kMultiSimilarity, true);
  ASSERT_EQ(r.rc, 0) << r.err;
  const Json sum = Json::parse(read_text(out / "summary.json"));
  EXPECT_EQ(sum.value("eval_distance", ""), "cosine") << sum.dump();
  EXPECT_NE(read_text(out / "report.md").find("cosine distance of the embeddings"), std::string::npos);

  // --evaluate without the flag scores as the run did (its loss and distance
  // come from the checkpoint, not from this invocation's defaults).
  const Json plain = evaluate(out, cache, {});
  const Json cosine = evaluate(out, cache, {"--eval-distance", "cosine"});
  const Json l2 = evaluate(out, cache, {"--eval-distance", "euclidean"});
  EXPECT_EQ(plain["eval_distance"].get<std::string>(), "cosine");
  EXPECT_EQ(cosine["eval_distance"].get<std::string>(), "cosine");
  EXPECT_EQ(l2["eval_distance"].get<std::string>(), "l2");
  EXPECT_EQ(plain["test_dir"]["per_group_accuracy_percent"].dump(),
            cosine["test_dir"]["per_group_accuracy_percent"].dump());
  // The embeddings' norms vary, so the two distances rank some candidates differently.
  EXPECT_NE(l2["test_dir"]["per_group_accuracy_percent"].dump(),
            cosine["test_dir"]["per_group_accuracy_percent"].dump());

  // A resumed run keeps its scoring distance.
  RunResult again = run_study(StudyKind::Triplet, conv4_run(out.str(), cache.str()) + kMultiSimilarity +
                                                      std::vector<std::string>{"--resume", "--epochs", "3",
                                                                               "--eval-distance", "euclidean"},
                              true);
  EXPECT_EQ(again.rc, 2) << again.err;
  EXPECT_NE(again.err.find("--eval-distance"), std::string::npos) << again.err;
}

TEST(EvalDistance, TripletLossesScoreEuclideanAndBadValuesAreUsageErrors) {
  TempDir out("evdist2"), cache("evdist2cache");
  RunResult r = run_study(StudyKind::Triplet, conv4_run(out.str(), cache.str()) +
                                                  std::vector<std::string>{"--batch", "4"}, true);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(Json::parse(read_text(out / "summary.json")).value("eval_distance", ""), "l2");
  EXPECT_EQ(evaluate(out, cache, {})["eval_distance"].get<std::string>(), "l2");
  std::filesystem::remove_all(out.path);
  RunResult bad = run_study(StudyKind::Triplet, conv4_run(out.str(), cache.str()) +
                                                    std::vector<std::string>{"--eval-distance", "manhattan"}, true);
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("--eval-distance"), std::string::npos) << bad.err;
}

}  // namespace
