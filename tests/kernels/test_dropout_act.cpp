// Dropout (statistics, exact kept values, mask convention, generator advance,
// gradcheck with a re-seeded generator, CPU/GPU bit-identical masks) and the
// activations (forward against the formulas written here, gradchecks, parity).
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/gradcheck.h"
#include "autograd/ops_layers.h"
#include "kernels/activation.h"
#include "kernels/dropout.h"
#include "runtime/philox.h"
#include "runtime/rng.h"
#include "tests/common/test_util.h"

namespace mn {
namespace {

using ag::Variable;
using kernels::Act;

TEST(DropoutTest, RateWithinConfidenceAndKeptValuesExact) {
  const int64_t n = 200003;  // odd, not a multiple of 4
  for (double p : {0.1, 0.5, 0.8}) {
    Tensor x = test::rand({n}, 0.5, 2.0, DType::F32, Device::cpu(), 3);
    auto r = kernels::dropout_forward(x, p, 1234, 77);
    auto xv = x.to_vector<float>();
    auto yv = r.y.to_vector<float>();
    auto mv = r.mask.to_vector<uint8_t>();
    int64_t dropped = 0;
    const float keep = static_cast<float>(1.0 - p);
    for (int64_t i = 0; i < n; ++i) {
      if (mv[i]) {
        ASSERT_EQ(yv[i], xv[i] / keep) << i;  // exactly x / (1 - p), one rounding
      } else {
        ASSERT_EQ(yv[i], 0.0f) << i;
        ++dropped;
      }
    }
    // Binomial(n, p): one draw's rate is within 4 sigma essentially always.
    const double sigma = std::sqrt(p * (1 - p) / n);
    EXPECT_LE(std::abs(double(dropped) / n - p), 4 * sigma) << "p " << p;
    // Over 40 independent (seed, offset) draws, |rate - p| <= 1.96 sigma should hold
    // for ~95% of them: require at least 34 of 40 (P[fewer] < 1e-2 for a correct
    // sampler; a biased compare, e.g. > instead of >=, or a wrong lane fails).
    const int64_t m = 20000;
    const double sm = std::sqrt(p * (1 - p) / m);
    int within = 0;
    for (uint64_t s = 0; s < 40; ++s) {
      Tensor mask = kernels::dropout_mask({m}, p, 1000 + s, s * 7919, Device::cpu());
      int64_t d = 0;
      for (uint8_t k : mask.to_vector<uint8_t>()) d += k == 0;
      within += std::abs(double(d) / m - p) <= 1.96 * sm;
    }
    EXPECT_GE(within, 34) << "p " << p;
  }
}

TEST(DropoutTest, MaskFollowsPhiloxConventionAndGeneratorAdvances) {
  const int64_t n = 37;
  const double p = 0.3;
  Generator g(99, 5);
  Tensor x = Tensor::ones({n}, DType::F64);
  auto r = kernels::dropout_forward(x, p, g);
  EXPECT_EQ(r.seed, 99u);
  EXPECT_EQ(r.offset, 5u);
  EXPECT_EQ(g.offset(), 5u + (n + 3) / 4);  // ceil(n / 4) blocks consumed
  auto mv = r.mask.to_vector<uint8_t>();
  for (int64_t i = 0; i < n; ++i) {
    const Philox4 b = philox4x32_10(99, 5 + i / 4);
    const bool keep = philox_uniform_float(b.v[i % 4]) >= static_cast<float>(p);
    EXPECT_EQ(mv[i], keep ? 1 : 0) << i;
  }
  // Complement of bernoulli_(p) for the same (seed, offset).
  Tensor bern = Tensor::empty({n}, DType::F32);
  Generator g2(99, 5);
  bernoulli_(bern, p, g2);
  auto bv = bern.to_vector<float>();
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(mv[i], bv[i] == 0.0f ? 1 : 0) << i;
}

TEST(DropoutTest, EvalIsIdentityAndEdgeRates) {
  Tensor x = test::randn({4, 5});
  Variable v(x);
  EXPECT_TRUE(ag::dropout(v, 0.5, false).is_same(v));
  auto r0 = kernels::dropout_forward(x, 0.0, 1, 0);
  EXPECT_TRUE(test::all_close(x, r0.y, 0, 0));
  auto r1 = kernels::dropout_forward(x, 1.0, 1, 0);
  EXPECT_TRUE(test::all_close(Tensor::zeros({4, 5}, DType::F64), r1.y, 0, 0));
}

TEST(DropoutTest, Gradcheck) {
  Generator gen(42, 0);
  Tensor x = test::randn({3, 7}, DType::F64, Device::cpu(), 5);
  ag::GradcheckOptions opts;
  opts.before_forward = [&] { gen.set_state(42, 0); };  // same mask every forward
  auto res = ag::gradcheck(
      [&](const std::vector<Variable>& v) { return ag::dropout(v[0], 0.4, true, gen); }, {x},
      opts);
  EXPECT_TRUE(res.ok) << res.message;
}

TEST(DropoutCudaTest, MaskBitIdenticalAcrossDevices) {
  MN_SKIP_IF_NO_CUDA();
  for (auto shape : test::sized({{150, 4096}, {150, 64, 48, 48}, {1, 1, 7, 5}, {13}})) {
    for (DType dt : {DType::F32, DType::F64}) {
      Tensor x = test::randn(shape, dt, Device::cpu(), 8);
      auto c = kernels::dropout_forward(x, 0.5, 2024, 12345);
      auto d = kernels::dropout_forward(x.cuda(), 0.5, 2024, 12345);
      EXPECT_EQ(c.mask.to_vector<uint8_t>(), d.mask.to_vector<uint8_t>()) << shape_str(shape);
      // Same division on both devices: bit-identical outputs and gradients.
      EXPECT_TRUE(test::all_close(c.y, d.y, 0, 0));
      Tensor gy = test::randn(shape, dt, Device::cpu(), 9);
      EXPECT_TRUE(test::all_close(kernels::dropout_backward(gy, c.mask, 0.5),
                                  kernels::dropout_backward(gy.cuda(), d.mask, 0.5), 0, 0));
    }
  }
}

// ---- activations -------------------------------------------------------------
double act_ref(Act a, double x) {
  const double lam = 1.0507009873554804934193349852946, al = 1.6732632423543772848170429916717;
  switch (a) {
    case Act::ReLU: return x > 0 ? x : 0;
    case Act::ELU: return x > 0 ? x : 0.7 * (std::exp(x) - 1);  // alpha 0.7 below
    case Act::SELU: return x > 0 ? lam * x : lam * al * (std::exp(x) - 1);
    case Act::Softplus: return 2 * x > 20 ? x : std::log(1 + std::exp(2 * x)) / 2;  // beta 2
    case Act::Sigmoid: return 1 / (1 + std::exp(-x));
    case Act::Tanh: return std::tanh(x);
  }
  return 0;
}
kernels::ActParams test_params() {
  kernels::ActParams p;
  p.alpha = 0.7;
  p.beta = 2.0;
  p.threshold = 20.0;
  return p;
}
const Act kAll[] = {Act::ReLU, Act::ELU, Act::SELU, Act::Softplus, Act::Sigmoid, Act::Tanh};

TEST(ActivationTest, ForwardMatchesFormulas) {
  // Include values past the softplus threshold (beta x > 20 at x > 10).
  Tensor x = test::rand({1001}, -12, 12, DType::F64);
  auto xv = x.to_double_vector();
  for (Act a : kAll) {
    std::vector<double> ref(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) ref[i] = act_ref(a, xv[i]);
    Tensor y = kernels::activation_forward(a, x, test_params());
    // float64: expm1/log1p vs exp-1/log(1+.) differ by a few ulps of the result.
    EXPECT_TRUE(test::all_close(ref, y.to_double_vector(), 1e-12, 1e-12)) << kernels::act_name(a);
    Tensor yf = kernels::activation_forward(a, x.to(DType::F32), test_params());
    EXPECT_TRUE(test::all_close(ref, yf.to_double_vector(), 1e-6, 1e-6)) << kernels::act_name(a);
  }
}

TEST(ActivationTest, Gradcheck) {
  // Spread over both sides of 0 (ReLU's kink is skipped by gradcheck if hit).
  Tensor x = test::rand({4, 9}, -3, 3, DType::F64, Device::cpu(), 17);
  for (Act a : kAll) {
    auto res = ag::gradcheck(
        [&](const std::vector<Variable>& v) { return ag::activation(v[0], a, test_params()); },
        {x});
    EXPECT_TRUE(res.ok) << kernels::act_name(a) << ": " << res.message;
  }
  // Softplus in its linear region too.
  Tensor big = test::rand({5}, 11, 14, DType::F64);
  auto res = ag::gradcheck(
      [&](const std::vector<Variable>& v) { return ag::softplus(v[0], 2.0, 20.0); }, {big});
  EXPECT_TRUE(res.ok) << res.message;
}

TEST(ActivationCudaTest, Parity) {
  MN_SKIP_IF_NO_CUDA();
  for (auto shape : test::sized({{150, 64, 48, 48}, {150, 4096}, {1, 1, 7, 5}})) {
    for (DType dt : {DType::F32, DType::F64}) {
      Tensor x = test::rand(shape, -12, 12, dt, Device::cpu(), 3);
      Tensor gy = test::randn(shape, dt, Device::cpu(), 4);
      for (Act a : kAll) {
        Tensor yc = kernels::activation_forward(a, x, test_params());
        Tensor yd = kernels::activation_forward(a, x.cuda(), test_params());
        // exp/expm1/log1p/tanh: CUDA's and libm's differ by up to ~2 ulps.
        const double tol = dt == DType::F32 ? 1e-6 : 1e-14;
        EXPECT_TRUE(test::all_close(yc, yd, tol, tol)) << kernels::act_name(a);
        Tensor s = kernels::act_backward_uses_output(a) ? yc : x;
        Tensor gc = kernels::activation_backward(a, s, gy, test_params());
        Tensor gd = kernels::activation_backward(a, s.cuda(), gy.cuda(), test_params());
        EXPECT_TRUE(test::all_close(gc, gd, tol, tol)) << kernels::act_name(a);
      }
    }
  }
}

}  // namespace
}  // namespace mn
