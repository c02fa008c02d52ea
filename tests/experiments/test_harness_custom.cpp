// The harness with a study that is not epoch-shaped (Study::run): a toy
// "k-fold" study with no model. It still gets flags with ranges, config.txt,
// metrics.jsonl, --stop-after (exit status 3), summary.json and report.md.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "experiments/common/harness.h"
#include "nn/checkpoint.h"
#include "tests/experiments/omniglot_fixture.h"

namespace {

using mn_test_exp::read_lines;
using mn_test_exp::read_text;
using mn_test_exp::TempDir;

class FoldStudy : public mn::exp::Study {
 public:
  std::string name() const override { return "toy_folds"; }
  std::string description() const override { return "k folds of nothing (a harness test)."; }
  bool epoch_shaped() const override { return false; }
  void declare_flags(mn::exp::Flags& f) override { f.add_int("folds", 4, "number of folds", 1, 100); }
  void setup(mn::exp::RunContext& ctx) override { seed_ = ctx.seed(); }
  int run(mn::exp::RunContext& ctx) override {
    const int64_t folds = ctx.flags().i64("folds");
    double sum = 0;
    for (int64_t k = 1; k <= folds; ++k) {
      if (ctx.stop_requested(0.0)) {
        ctx.save_progress(nullptr, nullptr, {{"fold", std::to_string(k - 1)}});
        return mn::exp::kExitResumable;
      }
      const double acc = 50.0 + static_cast<double>(k) + static_cast<double>(seed_);
      mn::exp::Json line;
      line["fold"] = k;
      line["accuracy_percent"] = acc;
      ctx.log_metrics(line);
      ctx.count_step();
      ctx.progress("fold", k, folds, {{"accuracy_percent", acc}});
      sum += acc;
    }
    ctx.summary()["mean_accuracy_percent"] = sum / static_cast<double>(folds);
    ctx.report("# toy_folds\n\nmean accuracy " + std::to_string(sum / static_cast<double>(folds)) + "\n");
    return mn::exp::kExitOk;
  }

 private:
  uint64_t seed_ = 0;
};

int run_folds(std::vector<std::string> args) {
  args.insert(args.begin(), "toy_folds");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return mn::exp::run_study(std::make_unique<FoldStudy>(), static_cast<int>(args.size()), argv.data());
}

TEST(StudyHarness, CustomShapedStudyGetsOutputsAndStops) {
  TempDir out("folds");
  ASSERT_EQ(run_folds({"--out-dir", out.str(), "--device", "cpu", "--folds", "3", "--seed", "2"}), 0);
  auto lines = read_lines(out / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(mn::exp::Json::parse(lines[2]).at("accuracy_percent"), 55.0);
  const auto summary = mn::exp::Json::parse(read_text(out / "summary.json"));
  EXPECT_EQ(summary.at("study"), "toy_folds");
  EXPECT_EQ(summary.at("mean_accuracy_percent"), 54.0);  // (53 + 54 + 55) / 3
  EXPECT_EQ(summary.at("config").at("folds"), 3);
  EXPECT_NE(read_text(out / "report.md").find("mean accuracy"), std::string::npos);
  EXPECT_NE(read_text(out / "config.txt").find("folds = 3\n"), std::string::npos);

  // --stop-after: a resumable stop after two folds, no summary.
  TempDir out2("folds_stop");
  EXPECT_EQ(run_folds({"--out-dir", out2.str(), "--device", "cpu", "--stop-after", "2"}), 3);
  EXPECT_EQ(read_lines(out2 / "metrics.jsonl").size(), 2u);
  EXPECT_FALSE(std::filesystem::exists(out2 / "summary.json"));
  const mn::nn::Metadata md = mn::nn::read_safetensors_metadata(out2 / "last.safetensors");
  EXPECT_EQ(md.at("fold"), "2");
  EXPECT_EQ(md.at("study"), "toy_folds");
  // --resume applies the contract to it: a changed flag is refused.
  testing::internal::CaptureStderr();
  EXPECT_EQ(run_folds({"--out-dir", out2.str(), "--device", "cpu", "--resume", "--folds", "5"}), 2);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("--folds"), std::string::npos);

  // The study's flag ranges are checked like the harness's.
  testing::internal::CaptureStderr();
  EXPECT_EQ(run_folds({"--out-dir", out.str(), "--folds", "0"}), 2);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("--folds"), std::string::npos);
}

}  // namespace
