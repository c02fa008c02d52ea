// Ensembles of the Omniglot studies: --ensemble scores the final test with the
// mean of several networks' scores (an ensemble of a network with itself is
// that network; the mean does not depend on the members' order; a training
// run's own validation score is unchanged, so the model is restored after the
// members are swapped in), members are checked before any training (file,
// study, architecture), and --members N trains N single runs (--seed,
// --seed + 1000, ...) then scores their ensemble, resumably.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "experiments/common/json.h"
#include "tests/experiments/omniglot_fixture.h"

namespace {

using namespace mn_test_exp;
using mn::exp::Json;

const std::vector<std::string> kSmall = {"--iters", "3", "--batch", "4", "--val-triplets", "12", "--val-tasks", "20",
                                         "--lr", "1e-3", "--epochs", "2"};

std::vector<std::string> test_tasks() {
  return {"--test-dir", omniglot_root() + "/images_evaluation", "--test-way", "5", "--test-tasks", "12"};
}

// Trains a tiny triplet run with `seed` into `out` (extra flags appended).
void train(const TempDir& out, const TempDir& cache, int seed, std::vector<std::string> extra = {}) {
  RunResult r = run_study(StudyKind::Triplet, base_args(out.str(), cache.str()) + kSmall +
                                                  std::vector<std::string>{"--seed", std::to_string(seed)} + extra,
                          true);
  ASSERT_EQ(r.rc, 0) << r.err;
}

Json evaluate(const TempDir& cache, const std::string& ckpt, const std::string& ensemble, const TempDir& out) {
  std::vector<std::string> a = {"--evaluate", ckpt, "--data-dir", omniglot_root(), "--cache-dir", cache.str(),
                                "--device", "cpu", "--eval-batch", "64", "--out-dir", out.str()};
  if (!ensemble.empty()) a = a + std::vector<std::string>{"--ensemble", ensemble};
  RunResult r = run_study(StudyKind::Triplet, a + test_tasks(), true);
  EXPECT_EQ(r.rc, 0) << r.err;
  return Json::parse(read_text(out / "evaluation.json"));
}

class Ensemble : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    a_ = new TempDir("ensa");
    b_ = new TempDir("ensb");
    cache_ = new TempDir("enscache");
    train(*a_, *cache_, 7);
    train(*b_, *cache_, 8);
  }
  static void TearDownTestSuite() {
    delete a_;
    delete b_;
    delete cache_;
  }
  static TempDir *a_, *b_, *cache_;
};
TempDir *Ensemble::a_, *Ensemble::b_, *Ensemble::cache_;

TEST_F(Ensemble, WithItselfIsTheNetworkAndTheOrderDoesNotMatter) {
  const std::string a = *a_ / "best.safetensors", b = *b_ / "best.safetensors";
  TempDir e1("ens1"), e2("ens2"), e3("ens3"), e4("ens4");
  const Json alone = evaluate(*cache_, a, "", e1), self = evaluate(*cache_, a, a, e2);
  const Json ab = evaluate(*cache_, a, b, e3), ba = evaluate(*cache_, b, a, e4);
  // Mean of two equal score matrices: the same scores, so the same answers.
  EXPECT_EQ(self["test_dir"]["per_alphabet"].dump(), alone["test_dir"]["per_alphabet"].dump());
  EXPECT_FALSE(alone.contains("ensemble"));
  ASSERT_TRUE(ab.contains("ensemble"));
  EXPECT_EQ(ab["ensemble"][0].get<std::string>(), b);
  // (x + y) / 2 == (y + x) / 2 exactly.
  EXPECT_EQ(ab["test_dir"]["per_alphabet"].dump(), ba["test_dir"]["per_alphabet"].dump());
  EXPECT_EQ(ab["test_dir"]["ties"].get<int64_t>(), ba["test_dir"]["ties"].get<int64_t>());
}

TEST_F(Ensemble, TrainingRunReportsItselfAloneAndTheEnsemble) {
  TempDir out("ensrun");
  train(out, *cache_, 9, {"--ensemble", *a_ / "best.safetensors"});
  const Json sum = Json::parse(read_text(out / "summary.json"));
  ASSERT_TRUE(sum.contains("val_one_shot_ensemble_percent")) << sum.dump();
  // The network alone, scored after its best checkpoint was loaded, is its best epoch.
  EXPECT_NEAR(sum["val_one_shot_single_percent"].get<double>(), sum["best_val_one_shot_percent"].get<double>(), 1e-9);
  EXPECT_NE(read_text(out / "report.md").find("mean over 2 networks"), std::string::npos);
}

TEST_F(Ensemble, BadMembersAreUsageErrorsBeforeTraining) {
  TempDir out("ensbad"), cache("ensbadcache");
  auto run = [&](const std::vector<std::string>& extra) {
    return run_study(StudyKind::Triplet, base_args(out.str(), cache.str()) + kSmall + extra, true);
  };
  RunResult missing = run({"--ensemble", out / "nope.safetensors"});
  EXPECT_EQ(missing.rc, 2);
  EXPECT_NE(missing.err.find("--ensemble: '" + out / "nope.safetensors" + "'"), std::string::npos) << missing.err;
  EXPECT_FALSE(std::ifstream(out / "metrics.jsonl").good()) << "trained before failing";
  RunResult empty = run({"--ensemble", (*a_ / "best.safetensors") + ","});
  EXPECT_EQ(empty.rc, 2);
  EXPECT_NE(empty.err.find("empty checkpoint path"), std::string::npos) << empty.err;
  RunResult other_arch = run({"--embedding", "16", "--ensemble", *a_ / "best.safetensors"});
  EXPECT_EQ(other_arch.rc, 2);
  EXPECT_NE(other_arch.err.find("--embedding"), std::string::npos) << other_arch.err;
  RunResult both = run({"--members", "2", "--ensemble", *a_ / "best.safetensors"});
  EXPECT_EQ(both.rc, 2);
  EXPECT_NE(both.err.find("--members 2 with --ensemble"), std::string::npos) << both.err;
  // A siamese checkpoint is another network.
  TempDir s("enssiam");
  RunResult sr = run_study(StudyKind::Siamese, base_args(s.str(), cache.str()) + kSmall, true);
  ASSERT_EQ(sr.rc, 0) << sr.err;
  RunResult siam = run({"--ensemble", s / "best.safetensors"});
  EXPECT_EQ(siam.rc, 2);
  EXPECT_NE(siam.err.find("omniglot_siamese"), std::string::npos) << siam.err;
  const std::vector<std::string> ev_args = {"--evaluate", *a_ / "best.safetensors", "--members", "2",
                                            "--device", "cpu", "--out-dir", out.str()};
  RunResult ev = run_study(StudyKind::Triplet, ev_args + test_tasks(), true);
  EXPECT_EQ(ev.rc, 2);
  EXPECT_NE(ev.err.find("--ensemble"), std::string::npos) << ev.err;
}

TEST(Members, TrainsSingleRunsThenScoresTheirEnsembleAndResumes) {
  TempDir out("members"), cache("memberscache"), single("memberssingle");
  const std::vector<std::string> args =
      base_args(out.str(), cache.str()) + kSmall + test_tasks() + std::vector<std::string>{"--members", "2", "--seed", "7"};
  RunResult r = run_study(StudyKind::Triplet, args, true);
  ASSERT_EQ(r.rc, 0) << r.err;
  // Member 2 is exactly the single run with --seed 1007.
  RunResult s = run_study(StudyKind::Triplet, base_args(single.str(), cache.str()) + kSmall + test_tasks() +
                                                  std::vector<std::string>{"--seed", "1007"}, true);
  ASSERT_EQ(s.rc, 0) << s.err;
  expect_same_run(out.path / "member-2", single.path);
  const Json plan = Json::parse(read_text(out / "members.json"));
  EXPECT_EQ(plan["finished"].dump(), "[1,2]");
  ASSERT_EQ(plan["commands"].size(), 1u);
  EXPECT_NE(plan["commands"][0].get<std::string>().find("--members 2"), std::string::npos) << plan.dump();
  const Json ev = Json::parse(read_text(out / "evaluation.json"));
  ASSERT_TRUE(ev.contains("ensemble"));
  EXPECT_EQ(ev["ensemble"][0].get<std::string>(), out / "member-2/best.safetensors");
  const std::string report = read_text(out / "report.md");
  EXPECT_NE(report.find("member-2 | 1007"), std::string::npos) << report;
  EXPECT_NE(report.find("**ensemble**"), std::string::npos) << report;

  // A new ensemble over it is refused; nothing is lost.
  RunResult again = run_study(StudyKind::Triplet, args, true);
  EXPECT_EQ(again.rc, 2);
  EXPECT_NE(again.err.find("--resume"), std::string::npos) << again.err;

  // Member 2 unfinished: --resume trains it again (the same run) and rescores.
  const std::string before = read_text(out / "evaluation.json");
  std::filesystem::remove_all(out.path / "member-2");
  std::ofstream(out / "members.json") << "{\"members\":2,\"seed\":7,\"seed_stride\":1000,\"finished\":[1],"
                                      << "\"eval_flags\":" << plan["eval_flags"].dump() << "}";
  // (--data-dir may be given again, as for a single run's --resume.)
  RunResult res = run_study(StudyKind::Triplet, {"--resume", "--out-dir", out.str(), "--device", "cpu", "--data-dir",
                                                 omniglot_root()}, true);
  ASSERT_EQ(res.rc, 0) << res.err;
  expect_same_run(out.path / "member-2", single.path);
  const Json plan2 = Json::parse(read_text(out / "members.json"));
  EXPECT_EQ(plan2["finished"].dump(), "[1,2]");
  ASSERT_EQ(plan2["commands"].size(), 1u);
  EXPECT_NE(plan2["commands"][0].get<std::string>().find("--resume"), std::string::npos) << plan2.dump();
  const Json after = Json::parse(read_text(out / "evaluation.json"));
  EXPECT_EQ(after["test_dir"].dump(), Json::parse(before)["test_dir"].dump());

  // --resume with another --members is refused naming both sizes (it was once ignored
  // silently); the same size is accepted.
  RunResult more = run_study(StudyKind::Triplet, {"--resume", "--members", "3", "--out-dir", out.str(), "--device",
                                                  "cpu", "--data-dir", omniglot_root()}, true);
  EXPECT_EQ(more.rc, 2);
  EXPECT_NE(more.err.find("--resume --members 3"), std::string::npos) << more.err;
  EXPECT_NE(more.err.find("has 2 members"), std::string::npos) << more.err;
  RunResult same = run_study(StudyKind::Triplet, {"--resume", "--members=2", "--out-dir", out.str(), "--device",
                                                  "cpu", "--data-dir", omniglot_root()}, true);
  EXPECT_EQ(same.rc, 0) << same.err;
}

}  // namespace

namespace {

// The driver announces the ensemble once; each member announces its preset (the
// driver resolving the configuration prints no banner of its own).
TEST(Members, AnnouncesTheEnsembleOnceAndEachMembersPreset) {
  TempDir out("membersbanner"), cache("membersbannercache");
  // conv4 on 28x28, small; the synthetic alphabets have 6 characters of 6 drawings.
  const std::vector<std::string> args =
      std::vector<std::string>{"--data-dir", omniglot_root(), "--out-dir", out.str(), "--cache-dir", cache.str(),
                               "--device", "cpu", "--preset", "cpu-demo", "--channels", "8", "--embedding", "16",
                               "--val-way", "5", "--eval-batch", "64", "--per-class", "3", "--members", "2"} + kSmall;
  testing::internal::CaptureStdout();
  RunResult r = run_study(StudyKind::Triplet, args, true);
  const std::string text = testing::internal::GetCapturedStdout();
  ASSERT_EQ(r.rc, 0) << r.err;
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("An ensemble of 2 runs (--members 2)"), 1u) << text;
  EXPECT_EQ(count("cpu-demo preset: the conv4 trunk"), 2u) << text;
  EXPECT_EQ(count("== member "), 2u) << text;
}

// cpu-hour is cpu-demo's recipe ten times over: every other flag the same.
TEST(Members, CpuHourPresetIsTenCpuDemoRuns) {
  using mn::exp::study_config;
  auto config = [](const char* preset) {
    return study_config(*mn::exp::make_omniglot_triplet_study(), {"--preset", preset}, mn::Device::cpu());
  };
  auto hour = config("cpu-hour"), demo = config("cpu-demo");
  EXPECT_EQ(hour.at("members"), "10");
  EXPECT_EQ(demo.at("members"), "1");
  for (const auto& [k, v] : demo)
    if (k != "preset" && k != "members") {
      EXPECT_EQ(hour.at(k), v) << k;
    }
}

// cpu-4h: the demo recipe but 70 x 250 steps with augmentation, 8 members,
// each member and the ensemble scored with 8 views of every image.
TEST(Members, Cpu4hPresetIsAnEnsembleOfAugmentedLongRuns) {
  using mn::exp::study_config;
  auto config = [](const char* preset) {
    return study_config(*mn::exp::make_omniglot_triplet_study(), {"--preset", preset}, mn::Device::cpu());
  };
  auto four = config("cpu-4h"), demo = config("cpu-demo");
  const std::map<std::string, std::string> changed = {{"members", "8"}, {"epochs", "70"}, {"iters", "250"},
                                                      {"augment", "true"}, {"tta", "8"}, {"tta-scale", "0.5"}};
  for (const auto& [k, v] : changed) EXPECT_EQ(four.at(k), v) << k;
  EXPECT_EQ(demo.at("augment"), "false");
  EXPECT_EQ(demo.at("tta"), "1");
  for (const auto& [k, v] : demo)
    if (k != "preset" && !changed.count(k)) {
      EXPECT_EQ(four.at(k), v) << k;
    }
}

}  // namespace
