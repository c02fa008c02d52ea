// End-to-end parity of the Omniglot study's training step on the GPU and the CPU:
// the Koch triplet net at 105 x 105 (four convolutions, the 9216 -> 4096 dense
// layer, sigmoid), the global loss, the study's Adam with per-layer weight decay,
// three steps from the same seed and the same images, FP32 with TF32 off. Unit
// parity tests check each kernel; this one checks what they miss together: the
// tape's order on the device, the optimizer's state, parameters moved with to().
//
// Tolerances, stated and why:
//  - loss at every step: relative 1e-4 (a float32 sum over the batch in another order);
//  - every parameter's gradient at every step: ||g_gpu - g_cpu|| <= 1e-3 ||g_cpu||
//    (norm-wise: float32 convolutions sum up to 3,136 products per output and the
//    global loss's variance terms pass distance rounding to the gradient unscaled,
//    see test_cuda_edge_parity.cpp; a wrong kernel is off by order one);
//  - the weights' change after three steps: ||dw_gpu - dw_cpu|| <= 1e-2 ||dw_cpu||
//    (Adam divides by sqrt(v): a gradient element near zero, whose sign rounding can
//    flip, moves by up to lr either way, so the change is compared norm-wise).
// The CPU-only build runs the same steps twice on the CPU (SelfCheckOnCpu), so the
// test code itself is exercised without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "tests/common/test_util.h"
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
  std::vector<Tensor> initial, final;      // parameters (CPU copies)
  std::vector<std::string> names;
};

StepLog run_steps(Device dev, int steps) {
  kernels::Tf32Scope fp32(false);
  nn::KochBranchOptions o;  // the study's branch: 105 x 105, 64/128/128/256, 4096, sigmoid
  Generator g(7);
  nn::TripletNet net(o, nn::TripletShare::Full, g);
  net.to(dev);
  nn::Adam opt(net.param_groups(1e-4, 2e-4, 1e-3));  // the study's lr and decays
  nn::TripletLossOptions lo;
  lo.kind = nn::TripletKind::Global;  // the study's final model
  StepLog log;
  for (auto& [name, p] : net.named_parameters()) {
    log.names.push_back(name);
    log.initial.push_back(p.data().to(Device::cpu()).clone());
  }
  const int64_t B = 4;  // triplets: 12 images through the branch
  Generator gx(11);
  for (int s = 0; s < steps; ++s) {
    Tensor a = Tensor::empty({B, 1, 105, 105}), p = Tensor::empty({B, 1, 105, 105}),
           n = Tensor::empty({B, 1, 105, 105});
    for (Tensor* t : {&a, &p, &n}) uniform_(*t, 0.0, 255.0, gx);  // raw 0..255, as the study
    auto e = net.embed_triplets(ag::Variable(a.to(dev)), ag::Variable(p.to(dev)), ag::Variable(n.to(dev)));
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

void compare(const StepLog& c, const StepLog& g) {
  ASSERT_EQ(c.losses.size(), g.losses.size());
  ASSERT_EQ(c.names, g.names);
  for (size_t s = 0; s < c.losses.size(); ++s) {
    SCOPED_TRACE("step " + std::to_string(s + 1));
    EXPECT_GT(c.losses[s], 0.0) << "a zero loss would make the comparison vacuous";
    EXPECT_NEAR(g.losses[s], c.losses[s], 1e-4 * std::abs(c.losses[s]));
    for (size_t i = 0; i < c.names.size(); ++i) {
      const double ref = norm(c.grads[s][i]);
      EXPECT_GT(ref, 0.0) << c.names[i] << ": no gradient";
      EXPECT_LE(norm_diff(g.grads[s][i], c.grads[s][i]), 1e-3 * ref) << c.names[i] << " gradient";
    }
  }
  for (size_t i = 0; i < c.names.size(); ++i) {
    const std::vector<double> dc = minus(c.final[i], c.initial[i]), dg = minus(g.final[i], g.initial[i]);
    std::vector<double> d = dg;
    for (size_t k = 0; k < d.size(); ++k) d[k] -= dc[k];
    EXPECT_GT(norm(dc), 0.0) << c.names[i] << " did not move";
    EXPECT_LE(norm(d), 1e-2 * norm(dc)) << c.names[i] << " weight change";
  }
}

}  // namespace

TEST(TrainStepParityCuda, KochTripletGlobalAdamThreeStepsMatchCpu) {
  MN_SKIP_IF_NO_CUDA();
  const StepLog c = run_steps(Device::cpu(), 3);
  const StepLog g = run_steps(Device::cuda(), 3);
  compare(c, g);
}

TEST(TrainStepParity, SelfCheckOnCpu) {
  const StepLog a = run_steps(Device::cpu(), 2);
  const StepLog b = run_steps(Device::cpu(), 2);
  compare(a, b);
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
