// End-to-end parity of the Omniglot study's training step on the GPU and the CPU:
// the Koch triplet net at 105 x 105 (four convolutions, the 9216 -> 4096 dense
// layer, sigmoid), the global loss, the study's Adam with per-layer weight decay,
// three steps from the same seed and the same images, FP32 with TF32 off. Unit
// parity tests check each kernel; this one checks what they miss together: the
// tape's order on the device, the optimizer's state, parameters moved with to().
//
// What is compared, and why (numbers measured on the CPU and on an H200):
//  - float64 on both devices, three steps: losses to 1e-10 and every parameter's
//    gradient at every step to 1e-8, relative. This is the check of the GPU's math:
//    in float64 the step's sensitivity (below) stays far under these bounds.
//  - float32: the loss at every step to 1e-4, relative (float32 and float64 runs agree
//    to 3e-6 over three steps), and every parameter's step-1 gradient held to the
//    float64 truth: the GPU's error may not exceed the larger of our two CPU float32
//    implementations' errors on the same step (the blocked GEMM convolutions, x3, and
//    the textbook loops, Conv2dAlgo::Direct). Why not a fixed tolerance: the step is
//    badly conditioned (the global loss's variance terms subtract distances near each
//    other; max-pooling routes gradients by comparisons that rounding can flip), so
//    float32 errors depend on the summation order: against the truth, the CPU's GEMM
//    path is 0.02-0.06 % off, the same step with the textbook loops 0.17-0.9 %
//    (conv1 0.9 %), the H200 0.59 % (conv1) and 0.58 % (conv2). Rounding the input
//    images differently by one ulp moves the CPU's conv1 gradient by 0.18 %. (The first
//    form of this test held the GPU to 3x the GEMM path's error and failed on the H200
//    for conv1 and conv2: bench/results/2026-11-26-NVIDIA-H200-gpu-check.md.)
//  - not the float32 gradients or weights after step 1: Adam's first update is nearly
//    lr * sign(g) for every element, so rounding-level differences in small
//    gradients move weights by 2 lr; float32 and float64 CPU runs then differ by 9 %
//    in the step-2 gradients and 29 % in step 3. Those comparisons would measure chaos.
// The CPU-only build runs the same comparisons CPU against CPU (SelfCheckOnCpu), so the
// test code itself is exercised without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "tests/common/test_util.h"
#include "kernels/conv2d.h"
#include "kernels/gemm_config.h"
#include "nn/losses/losses.h"
#include "nn/models/koch.h"
#include "nn/optim/optimizer.h"
#include "runtime/rng.h"

using namespace mn;

namespace {

struct StepLog {
  std::vector<double> losses;
  std::vector<std::vector<Tensor>> grads;  // per step, per parameter (CPU copies)
  std::vector<Tensor> final;               // parameters after the last step (CPU copies)
  std::vector<std::string> names;
};

StepLog run_steps(Device dev, int steps, DType dt = DType::F32) {
  kernels::Tf32Scope fp32(false);
  nn::KochBranchOptions o;  // the study's branch: 105 x 105, 64/128/128/256, 4096, sigmoid
  Generator g(7);
  nn::TripletNet net(o, nn::TripletShare::Full, g);
  net.to(dt);
  net.to(dev);
  nn::Adam opt(net.param_groups(1e-4, 2e-4, 1e-3));  // the study's lr and decays
  nn::TripletLossOptions lo;
  lo.kind = nn::TripletKind::Global;  // the study's final model
  StepLog log;
  for (auto& [name, p] : net.named_parameters()) log.names.push_back(name);
  const int64_t B = 4;  // triplets: 12 images through the branch
  Generator gx(11);
  for (int s = 0; s < steps; ++s) {
    Tensor a = Tensor::empty({B, 1, 105, 105}), p = Tensor::empty({B, 1, 105, 105}),
           n = Tensor::empty({B, 1, 105, 105});
    for (Tensor* t : {&a, &p, &n}) uniform_(*t, 0.0, 255.0, gx);  // raw 0..255, as the study
    auto e = net.embed_triplets(ag::Variable(a.to(dt).to(dev)), ag::Variable(p.to(dt).to(dev)),
                                ag::Variable(n.to(dt).to(dev)));
    nn::LossOutput out = nn::triplet_loss(e[0], e[1], e[2], lo);
    out.loss.backward();
    log.losses.push_back(out.host_stats().loss);
    std::vector<Tensor> gs;
    for (const ag::Variable& v : net.parameters()) gs.push_back(v.grad().to(Device::cpu()).clone());
    log.grads.push_back(gs);
    opt.step();
    opt.zero_grad();
  }
  for (const ag::Variable& v : net.parameters()) log.final.push_back(v.data().to(Device::cpu()).clone());
  return log;
}

std::vector<double> minus(const Tensor& a, const Tensor& b) {
  std::vector<double> x = a.to_double_vector();
  const std::vector<double> y = b.to_double_vector();
  EXPECT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) x[i] -= y[i];
  return x;
}
double norm(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += v * v;
  return std::sqrt(s);
}
double norm(const Tensor& a) { return norm(a.to_double_vector()); }
double norm_diff(const Tensor& a, const Tensor& b) { return norm(minus(a, b)); }

// float32: c = the CPU's GEMM path, d = the CPU's textbook loops (step 1 only), g = the
// device under test, truth = float64 (step 1).
void compare(const StepLog& c, const StepLog& d, const StepLog& g, const StepLog& truth) {
  ASSERT_EQ(c.losses.size(), g.losses.size());
  ASSERT_EQ(c.names, g.names);
  ASSERT_EQ(c.names, truth.names);
  ASSERT_EQ(c.names, d.names);
  for (size_t s = 0; s < c.losses.size(); ++s) {
    EXPECT_GT(c.losses[s], 0.0) << "a zero loss would make the comparison vacuous";
    EXPECT_NEAR(g.losses[s], c.losses[s], 1e-4 * std::abs(c.losses[s])) << "step " << s + 1;
  }
  for (size_t i = 0; i < c.names.size(); ++i) {
    const double ref = norm(truth.grads[0][i]);
    ASSERT_GT(ref, 0.0) << c.names[i] << ": no gradient";
    const double gemm_err = norm_diff(c.grads[0][i], truth.grads[0][i]);
    const double loops_err = norm_diff(d.grads[0][i], truth.grads[0][i]);
    const double err = norm_diff(g.grads[0][i], truth.grads[0][i]);
    std::printf("%-22s step-1 gradient, relative error against float64: %.2e (CPU GEMM path %.2e, "
                "CPU textbook loops %.2e)\n", c.names[i].c_str(), err / ref, gemm_err / ref, loops_err / ref);
    EXPECT_LE(err, std::max(3 * gemm_err, loops_err) + 1e-7 * ref)
        << c.names[i] << " step-1 gradient: relative error " << err / ref << " against the float64 truth; "
        << "the CPU's GEMM path " << gemm_err / ref << ", its textbook loops " << loops_err / ref;
  }
}

// float64 on two devices (or two runs): losses and every gradient of every step.
void compare_f64(const StepLog& a, const StepLog& b) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  ASSERT_EQ(a.names, b.names);
  for (size_t s = 0; s < a.losses.size(); ++s) {
    EXPECT_GT(a.losses[s], 0.0);
    EXPECT_NEAR(b.losses[s], a.losses[s], 1e-10 * std::abs(a.losses[s])) << "step " << s + 1;
    for (size_t i = 0; i < a.names.size(); ++i) {
      const double ref = norm(a.grads[s][i]);
      ASSERT_GT(ref, 0.0) << a.names[i] << ": no gradient at step " << s + 1;
      const double err = norm_diff(b.grads[s][i], a.grads[s][i]);
      EXPECT_LE(err, 1e-8 * ref) << a.names[i] << ", step " << s + 1 << ": relative error " << err / ref;
    }
  }
}

// The CPU's float32 step with the textbook convolution loops.
StepLog run_cpu_textbook_loops() {
  const kernels::Conv2dAlgo saved = kernels::default_conv2d_algo();
  kernels::set_default_conv2d_algo(kernels::Conv2dAlgo::Direct);
  StepLog d = run_steps(Device::cpu(), 1);
  kernels::set_default_conv2d_algo(saved);
  return d;
}

}  // namespace

TEST(TrainStepParityCuda, KochTripletGlobalAdamThreeStepsFloat32) {
  MN_SKIP_IF_NO_CUDA();
  const StepLog truth = run_steps(Device::cpu(), 1, DType::F64);
  const StepLog c = run_steps(Device::cpu(), 3);
  const StepLog d = run_cpu_textbook_loops();
  const StepLog g = run_steps(Device::cuda(), 3);
  compare(c, d, g, truth);
}

TEST(TrainStepParityCuda, KochTripletGlobalAdamThreeStepsFloat64) {
  MN_SKIP_IF_NO_CUDA();
  compare_f64(run_steps(Device::cpu(), 3, DType::F64), run_steps(Device::cuda(), 3, DType::F64));
}

// Without a GPU: the same comparisons, CPU against CPU (the textbook loops are left out
// here: they take 40 s of a 2-core CI machine; the GPU test runs them).
TEST(TrainStepParity, SelfCheckOnCpu) {
  const StepLog truth = run_steps(Device::cpu(), 1, DType::F64);
  const StepLog a = run_steps(Device::cpu(), 1);
  const StepLog b = run_steps(Device::cpu(), 1);
  compare(a, a, b, truth);
  compare_f64(truth, run_steps(Device::cpu(), 1, DType::F64));
}

// Determinism of the study's step on the GPU: the Koch convolutions (implicit GEMM,
// split-K summed in order), the dense GEMM, the fused (non-indexed) triplet loss and
// Adam use no float atomics, so two runs from the same seed must agree bit for bit.
TEST(TrainStepParityCuda, TwoGpuRunsAreBitIdentical) {
  MN_SKIP_IF_NO_CUDA();
  const StepLog a = run_steps(Device::cuda(), 2);
  const StepLog b = run_steps(Device::cuda(), 2);
  ASSERT_EQ(a.final.size(), b.final.size());
  for (size_t i = 0; i < a.final.size(); ++i)
    EXPECT_TRUE(test::all_close(a.final[i], b.final[i], 0, 0)) << a.names[i];
  EXPECT_EQ(a.losses, b.losses);
}
