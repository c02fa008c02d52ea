// The harness's step statistics left on the device (DeviceStats): summed where
// the step computed them and read to the host every --log-every steps, at the
// end of an epoch and before a stop. A toy epoch-shaped study with a one-weight
// model whose step returns known values checks the sums, when the host reads
// happen (Tensor reads counted by transfer_stats().host_reads), a NaN found in
// the middle of an interval, and a stop/resume between reads.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "experiments/common/harness.h"
#include "experiments/common/json.h"
#include "kernels/gemm_config.h"
#include "nn/layers/linear.h"
#include "runtime/allocator.h"
#include "tests/common/test_util.h"
#include "tests/experiments/omniglot_fixture.h"

namespace {

using mn_test_exp::read_lines;
using mn_test_exp::TempDir;

constexpr int64_t kSteps = 7;

struct Trace {
  std::vector<uint64_t> reads_before_step;  // transfer_stats().host_reads as each step starts
};

class ToyStudy : public mn::exp::Study {
 public:
  explicit ToyStudy(Trace* t) : trace_(t) {}
  std::string name() const override { return "toy_device_stats"; }
  std::string description() const override { return "known step values (a harness test)."; }
  int64_t default_epochs() const override { return 2; }
  void declare_flags(mn::exp::Flags& f) override {
    f.add_int("nan-at", 0, "the loss of this global step (1-based) is NaN (0: none)", 0);
  }
  void setup(mn::exp::RunContext& ctx) override {
    flags_ = &ctx.flags();
    model_ = std::make_unique<mn::nn::Linear>(1, 1);
  }
  int64_t steps_per_epoch() const override { return kSteps; }
  void begin_epoch(int64_t epoch) override { epoch_ = epoch; }
  // Step s of epoch e (global g = (e - 1) 7 + s): loss g, second value 2 g.
  mn::exp::DeviceStats train_step_on_device() override {
    if (trace_) trace_->reads_before_step.push_back(mn::transfer_stats().host_reads);
    const int64_t g = (epoch_ - 1) * kSteps + (step_in_epoch() + 1);
    ++done_;
    const double loss = g == flags_->i64("nan-at") ? NAN : static_cast<double>(g);
    return {{"train_loss", "twice"}, mn::Tensor::from_vector(std::vector<double>{loss, 2.0 * g}, {2})};
  }
  mn::exp::Stats validate() override { return {{"score", static_cast<double>(epoch_)}}; }
  std::string selection_metric() const override { return "score"; }
  mn::nn::Module& model() override { return *model_; }
  void save_state(mn::nn::Metadata& md) const override { md["toy_done"] = std::to_string(done_); }
  void load_state(const mn::nn::Metadata& md, const std::string&) override {
    done_ = std::stoll(md.at("toy_done"));
  }

 private:
  int64_t step_in_epoch() const { return done_ % kSteps; }
  Trace* trace_;
  const mn::exp::Flags* flags_ = nullptr;
  std::unique_ptr<mn::nn::Linear> model_;
  int64_t epoch_ = 1, done_ = 0;
};

int run_toy(std::vector<std::string> args, Trace* trace = nullptr) {
  args.insert(args.begin(), "toy_device_stats");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return mn::exp::run_study(std::make_unique<ToyStudy>(trace), static_cast<int>(args.size()), argv.data());
}

std::vector<mn::exp::Json> epoch_lines(const std::string& dir) {
  std::vector<mn::exp::Json> out;
  for (const auto& l : read_lines(dir + "/metrics.jsonl")) out.push_back(mn::exp::Json::parse(l));
  return out;
}

TEST(HarnessDeviceStats, SumsAreReadOncePerLogInterval) {
  TempDir out("devstats");
  Trace trace;
  ASSERT_EQ(run_toy({"--out-dir", out.str(), "--device", "cpu", "--log-every", "3"}, &trace), 0);
  const auto lines = epoch_lines(out.str());
  ASSERT_EQ(lines.size(), 2u);
  // Epoch means of g = 1..7 and 8..14, and of 2 g: the sums are complete.
  EXPECT_DOUBLE_EQ(lines[0].at("train_loss").get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(lines[1].at("train_loss").get<double>(), 11.0);
  EXPECT_DOUBLE_EQ(lines[1].at("twice").get<double>(), 22.0);
  // Within an epoch the host reads the sums after steps 3 and 6 (and 7, the
  // epoch's end, followed by validation): exactly one read before steps 4 and
  // 7, none before the others.
  ASSERT_EQ(trace.reads_before_step.size(), 2u * kSteps);
  for (int64_t e = 0; e < 2; ++e)
    for (int64_t s = 1; s < kSteps; ++s) {
      const uint64_t d = trace.reads_before_step[e * kSteps + s] - trace.reads_before_step[e * kSteps + s - 1];
      EXPECT_EQ(d, s % 3 == 0 ? 1u : 0u) << "epoch " << e + 1 << " before step " << s + 1;
    }
}

TEST(HarnessDeviceStats, CpuDefaultReadsEveryStep) {
  TempDir out("devstats_default");
  Trace trace;
  ASSERT_EQ(run_toy({"--out-dir", out.str(), "--device", "cpu", "--epochs", "1"}, &trace), 0);
  ASSERT_EQ(trace.reads_before_step.size(), static_cast<size_t>(kSteps));
  for (int64_t s = 1; s < kSteps; ++s)
    EXPECT_EQ(trace.reads_before_step[s] - trace.reads_before_step[s - 1], 1u) << "before step " << s + 1;
}

TEST(HarnessDeviceStats, NanInsideAnIntervalStopsAtItsReadNamingTheSteps) {
  TempDir out("devstats_nan");
  testing::internal::CaptureStderr();
  const int rc = run_toy({"--out-dir", out.str(), "--device", "cpu", "--log-every", "3", "--nan-at", "5"});
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 1);
  EXPECT_NE(err.find("train_loss became NaN at epoch 1 one of steps 4-6"), std::string::npos) << err;
}

TEST(HarnessDeviceStats, AStopBetweenReadsKeepsThePendingSums) {
  TempDir straight("devstats_straight"), stopped("devstats_stopped");
  ASSERT_EQ(run_toy({"--out-dir", straight.str(), "--device", "cpu", "--log-every", "3"}), 0);
  // Stopped after 5 steps: steps 4-5 are summed but not yet read when the stop comes.
  ASSERT_EQ(run_toy({"--out-dir", stopped.str(), "--device", "cpu", "--log-every", "3", "--stop-after", "5"}), 3);
  ASSERT_EQ(run_toy({"--out-dir", stopped.str(), "--device", "cpu", "--resume", "--log-every", "2"}), 0);
  const auto a = epoch_lines(straight.str()), b = epoch_lines(stopped.str());
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(a[e].at("train_loss").get<double>(), b[e].at("train_loss").get<double>()) << "epoch " << e + 1;
    EXPECT_EQ(a[e].at("twice").get<double>(), b[e].at("twice").get<double>()) << "epoch " << e + 1;
  }
}

// --precision: auto is FP32 on the CPU; TF32 / BF16 on the CPU are refused naming the
// flag; the older --tf32 is still read (configs, checkpoints) and validated, and the CPU
// computes in FP32 whatever it says; --precision and --tf32 together are refused.
// summary.json and report.md say what the layers computed in.
TEST(HarnessFlags, PrecisionOnTheCpuIsFp32AndTf32Bf16AreRefusedNamingTheFlag) {
  mn::kernels::PrecisionScope restore(mn::kernels::Precision::BF16);  // the harness must reset it
  for (const std::vector<std::string>& flag :
       std::vector<std::vector<std::string>>{{}, {"--precision", "fp32"}, {"--precision", "auto"}, {"--tf32", "all"},
                                             {"--tf32", "conv"}, {"--tf32", "off"}, {"--tf32", "true"}}) {
    mn::kernels::set_precision(mn::kernels::Precision::BF16);
    TempDir out("precision");
    std::vector<std::string> args{"--out-dir", out.str(), "--device", "cpu", "--epochs", "1"};
    args.insert(args.end(), flag.begin(), flag.end());
    ASSERT_EQ(run_toy(args), 0);
    const std::string what = flag.empty() ? "default" : flag[0] + " " + flag[1];
    EXPECT_EQ(mn::kernels::conv_precision(), mn::kernels::Precision::FP32) << what;
    EXPECT_EQ(mn::kernels::matmul_precision(), mn::kernels::Precision::FP32) << what;
    std::string text;
    for (const std::string& l : read_lines(out.str() + "/summary.json")) text += l + "\n";
    const mn::exp::Json sum = mn::exp::Json::parse(text);
    EXPECT_EQ(sum.at("precision").at("conv"), "fp32") << what;
    EXPECT_EQ(sum.at("precision").at("matmul"), "fp32") << what;
    std::string report;
    for (const std::string& l : read_lines(out.str() + "/report.md")) report += l + "\n";
    EXPECT_NE(report.find("- precision: fp32 convolutions, fp32 dense layers"), std::string::npos) << what;
  }
  struct Bad {
    std::vector<std::string> flag;
    std::string says;
  };
  for (const Bad& b : {Bad{{"--precision", "tf32"}, "--precision tf32: TF32 and BF16 are the GPU"},
                       Bad{{"--precision", "bf16"}, "--precision bf16: TF32 and BF16 are the GPU"},
                       Bad{{"--precision", "half"}, "--precision half: expected auto, fp32, tf32 or bf16"},
                       Bad{{"--tf32", "half"}, "--tf32 half: expected conv, all or off"},
                       Bad{{"--precision", "fp32", "--tf32", "all"}, "both given"}}) {
    TempDir out("precision_bad");
    std::vector<std::string> args{"--out-dir", out.str(), "--device", "cpu"};
    args.insert(args.end(), b.flag.begin(), b.flag.end());
    testing::internal::CaptureStderr();
    EXPECT_EQ(run_toy(args), 2) << b.flag[1];
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find(b.says), std::string::npos) << err;
  }
}

// On a GPU: auto is TF32 for both; --tf32 conv (the older default) keeps the dense
// layers in FP32; bf16 sets both.
TEST(HarnessFlags, PrecisionOnCudaSetsBothSettings) {
  MN_SKIP_IF_NO_CUDA();
  using mn::kernels::Precision;
  mn::kernels::PrecisionScope restore(Precision::FP32);
  struct Case {
    std::vector<std::string> flag;
    Precision conv, matmul;
  };
  for (const Case& c : {Case{{}, Precision::TF32, Precision::TF32}, Case{{"--precision", "bf16"}, Precision::BF16, Precision::BF16},
                        Case{{"--precision", "fp32"}, Precision::FP32, Precision::FP32},
                        Case{{"--tf32", "conv"}, Precision::TF32, Precision::FP32}}) {
    TempDir out("precision_cuda");
    std::vector<std::string> args{"--out-dir", out.str(), "--device", "cuda", "--epochs", "1"};
    args.insert(args.end(), c.flag.begin(), c.flag.end());
    ASSERT_EQ(run_toy(args), 0);
    EXPECT_EQ(mn::kernels::conv_precision(), c.conv);
    EXPECT_EQ(mn::kernels::matmul_precision(), c.matmul);
  }
}

}  // namespace
