// LRN and batch-norm: forward values against direct textbook loops written here,
// float64 gradient checks of every input, batch-norm running statistics after two
// steps against a hand computation, and CPU-vs-CUDA parity at the Koch network's
// shapes and at odd shapes.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/gradcheck.h"
#include "autograd/ops_layers.h"
#include "kernels/batchnorm.h"
#include "kernels/lrn.h"
#include "tests/common/test_util.h"

namespace mn {
namespace {

using ag::Variable;
using kernels::LrnOptions;

// b = a / (k + alpha' sum_{window} a^2)^beta, window [c - (n-1)/2, c + n/2] clipped.
std::vector<double> lrn_reference(const std::vector<double>& a, int64_t N, int64_t C, int64_t HW,
                                  const LrnOptions& o) {
  std::vector<double> b(a.size());
  const double al = o.alpha_over_n ? o.alpha / double(o.size) : o.alpha;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < HW; ++i) {
        double s = 0;
        for (int64_t j = c - (o.size - 1) / 2; j <= c + o.size / 2; ++j) {
          if (j < 0 || j >= C) continue;
          const double v = a[(n * C + j) * HW + i];
          s += v * v;
        }
        const int64_t idx = (n * C + c) * HW + i;
        b[idx] = a[idx] / std::pow(o.k + al * s, o.beta);
      }
  return b;
}

TEST(LrnTest, ForwardMatchesTextbookBothConventions) {
  // Large inputs and a large alpha so the normalisation is far from the identity.
  Tensor x = test::rand({2, 7, 3, 4}, -3, 3, DType::F64);
  for (bool over_n : {false, true}) {
    for (int64_t size : {5, 4, 1}) {
      LrnOptions o;
      o.size = size;
      o.alpha = 0.5;
      o.alpha_over_n = over_n;
      auto r = kernels::lrn_forward(x, o);
      auto ref = lrn_reference(x.to_double_vector(), 2, 7, 12, o);
      // float64 throughout: both sides differ only by summation order (1e-15 relative).
      EXPECT_TRUE(test::all_close(ref, r.y.to_double_vector(), 1e-13, 1e-12))
          << "size " << size << " alpha_over_n " << over_n;
      // float32 against the float64 textbook: ~10 float ulps of accumulated rounding.
      auto rf = kernels::lrn_forward(x.to(DType::F32), o);
      EXPECT_TRUE(test::all_close(ref, rf.y.to_double_vector(), 1e-6, 1e-5));
    }
  }
}

TEST(LrnTest, DefaultsAreKrizhevsky) {
  LrnOptions o;
  EXPECT_EQ(o.size, 5);
  EXPECT_DOUBLE_EQ(o.k, 2.0);
  EXPECT_DOUBLE_EQ(o.alpha, 1e-4);
  EXPECT_DOUBLE_EQ(o.beta, 0.75);
  EXPECT_FALSE(o.alpha_over_n);
  EXPECT_DOUBLE_EQ(o.effective_alpha(), 1e-4);
}

TEST(LrnTest, Gradcheck) {
  for (bool over_n : {false, true}) {
    for (int64_t size : {5, 2}) {
      LrnOptions o;
      o.size = size;
      o.alpha = 0.3;  // large enough that the cross-channel term matters
      o.alpha_over_n = over_n;
      Tensor x = test::rand({2, 6, 3, 2}, -2, 2, DType::F64, Device::cpu(), 7);
      auto res = ag::gradcheck([&](const std::vector<Variable>& v) { return ag::lrn(v[0], o); },
                               {x});
      EXPECT_TRUE(res.ok) << res.message;
    }
  }
}

// Batch-norm textbook: per channel over n and spatial positions.
struct BnRef {
  std::vector<double> y, mean, var;
};
BnRef bn_reference(const std::vector<double>& x, int64_t N, int64_t C, int64_t L,
                   const std::vector<double>& gamma, const std::vector<double>& beta,
                   double eps) {
  BnRef r;
  r.y.resize(x.size());
  r.mean.assign(C, 0);
  r.var.assign(C, 0);
  for (int64_t c = 0; c < C; ++c) {
    double s = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < L; ++i) s += x[(n * C + c) * L + i];
    const double m = s / double(N * L);
    double v = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < L; ++i) v += std::pow(x[(n * C + c) * L + i] - m, 2);
    v /= double(N * L);
    r.mean[c] = m;
    r.var[c] = v;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < L; ++i) {
        const int64_t idx = (n * C + c) * L + i;
        r.y[idx] = (x[idx] - m) / std::sqrt(v + eps) * gamma[c] + beta[c];
      }
  }
  return r;
}

TEST(BatchNormTest, TrainingForwardMatchesTextbook) {
  for (auto shape : std::vector<Shape>{{4, 3, 5, 2}, {6, 5}}) {
    Tensor x = test::rand(shape, -2, 5, DType::F64);
    const int64_t N = shape[0], C = shape[1], L = x.numel() / (N * C);
    Tensor gamma = test::rand({C}, 0.5, 2, DType::F64, Device::cpu(), 2);
    Tensor beta = test::rand({C}, -1, 1, DType::F64, Device::cpu(), 3);
    auto r = kernels::batchnorm_forward(x, gamma, beta, Tensor(), Tensor(), true, 0.1, 1e-5);
    auto ref = bn_reference(x.to_double_vector(), N, C, L, gamma.to_double_vector(),
                            beta.to_double_vector(), 1e-5);
    // float64 both sides, summation order only.
    EXPECT_TRUE(test::all_close(ref.y, r.y.to_double_vector(), 1e-12, 1e-12));
    EXPECT_TRUE(test::all_close(ref.mean, r.mean.to_double_vector(), 1e-13, 1e-13));
    std::vector<double> inv(C);
    for (int64_t c = 0; c < C; ++c) inv[c] = 1 / std::sqrt(ref.var[c] + 1e-5);
    EXPECT_TRUE(test::all_close(inv, r.invstd.to_double_vector(), 1e-12, 1e-12));
  }
}

TEST(BatchNormTest, EvalUsesRunningStats) {
  Tensor x = test::rand({3, 4, 2, 2}, -2, 2, DType::F64);
  Tensor rm = test::rand({4}, -1, 1, DType::F64, Device::cpu(), 5);
  Tensor rv = test::rand({4}, 0.5, 2, DType::F64, Device::cpu(), 6);
  Tensor gamma = test::rand({4}, 0.5, 2, DType::F64, Device::cpu(), 2);
  Tensor beta = test::rand({4}, -1, 1, DType::F64, Device::cpu(), 3);
  Tensor rm0 = rm.clone(), rv0 = rv.clone();
  auto r = kernels::batchnorm_forward(x, gamma, beta, rm, rv, false, 0.1, 1e-3);
  auto xv = x.to_double_vector(), m = rm.to_double_vector(), v = rv.to_double_vector(),
       g = gamma.to_double_vector(), b = beta.to_double_vector();
  std::vector<double> ref(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    const size_t c = (i / 4) % 4;
    ref[i] = (xv[i] - m[c]) / std::sqrt(v[c] + 1e-3) * g[c] + b[c];
  }
  EXPECT_TRUE(test::all_close(ref, r.y.to_double_vector(), 1e-13, 1e-13));
  // Evaluation must not touch the running statistics (exact).
  EXPECT_TRUE(test::all_close(rm0, rm, 0, 0));
  EXPECT_TRUE(test::all_close(rv0, rv, 0, 0));
}

TEST(BatchNormTest, RunningStatsUnbiasedAfterTwoSteps) {
  const int64_t N = 3, C = 2, L = 4;
  const double mom = 0.1;
  Tensor rm = Tensor::zeros({C}, DType::F64), rv = Tensor::ones({C}, DType::F64);
  std::vector<double> em(C, 0.0), ev(C, 1.0);
  for (uint64_t step = 0; step < 2; ++step) {
    Tensor x = test::rand({N, C, 2, 2}, -3, 4, DType::F64, Device::cpu(), 10 + step);
    kernels::batchnorm_forward(x, Tensor(), Tensor(), rm, rv, true, mom, 1e-5);
    auto xv = x.to_double_vector();
    for (int64_t c = 0; c < C; ++c) {
      double s = 0, ss = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < L; ++i) s += xv[(n * C + c) * L + i];
      const double m = s / (N * L);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < L; ++i) ss += std::pow(xv[(n * C + c) * L + i] - m, 2);
      em[c] = (1 - mom) * em[c] + mom * m;
      ev[c] = (1 - mom) * ev[c] + mom * ss / (N * L - 1);  // unbiased
    }
  }
  EXPECT_TRUE(test::all_close(em, rm.to_double_vector(), 1e-14, 1e-13));
  EXPECT_TRUE(test::all_close(ev, rv.to_double_vector(), 1e-14, 1e-13));
}

TEST(BatchNormTest, GradcheckTrainingAndEval) {
  for (auto shape : std::vector<Shape>{{3, 2, 2, 3}, {5, 3}}) {
    const int64_t C = shape[1];
    Tensor x = test::rand(shape, -2, 2, DType::F64, Device::cpu(), 11);
    Tensor g = test::rand({C}, 0.5, 2, DType::F64, Device::cpu(), 12);
    Tensor b = test::rand({C}, -1, 1, DType::F64, Device::cpu(), 13);
    for (bool training : {true, false}) {
      Tensor rm = test::rand({C}, -0.5, 0.5, DType::F64, Device::cpu(), 14);
      Tensor rv = test::rand({C}, 0.5, 1.5, DType::F64, Device::cpu(), 15);
      auto res = ag::gradcheck(
          [&](const std::vector<Variable>& v) {
            // Running stats are updated by each training forward but never read there.
            return ag::batch_norm(v[0], v[1], v[2], rm, rv, training, 0.1, 1e-5);
          },
          {x, g, b});
      EXPECT_TRUE(res.ok) << "training " << training << ": " << res.message;
    }
    // Without affine parameters.
    auto res = ag::gradcheck(
        [&](const std::vector<Variable>& v) {
          return ag::batch_norm(v[0], Variable(), Variable(), Tensor(), Tensor(), true);
        },
        {x});
    EXPECT_TRUE(res.ok) << res.message;
  }
}

// ---- CUDA parity -----------------------------------------------------------
void lrn_parity(const Shape& shape, DType dt, double atol, double rtol) {
  Tensor x = test::randn(shape, dt, Device::cpu(), 21);
  Tensor gy = test::randn(shape, dt, Device::cpu(), 22);
  LrnOptions o;
  o.alpha = 1e-2;
  auto c = kernels::lrn_forward(x, o);
  auto gc = kernels::lrn_backward(x, c.y, c.scale, gy, o);
  Tensor xd = x.cuda(), gyd = gy.cuda();
  auto d = kernels::lrn_forward(xd, o);
  auto gd = kernels::lrn_backward(xd, d.y, d.scale, gyd, o);
  EXPECT_TRUE(test::all_close(c.y, d.y, atol, rtol)) << shape_str(shape);
  EXPECT_TRUE(test::all_close(gc, gd, atol, rtol)) << shape_str(shape);
}

TEST(LrnCudaTest, ParityKochAndOddShapes) {
  MN_SKIP_IF_NO_CUDA();
  // float32: pow and the 5-term sums may round differently on the two devices (a
  // few ulps); float64: ~1e-15.
  for (auto s : test::sized({{150, 64, 48, 48}, {150, 128, 21, 21}, {1, 1, 7, 5},
                            {3, 5, 13, 1}, {2, 3, 1, 1}})) {
    lrn_parity(s, DType::F32, 1e-5, 1e-5);
    lrn_parity(s, DType::F64, 1e-12, 1e-12);
  }
}

void bn_parity(const Shape& shape, DType dt, bool training, double atol, double rtol) {
  const int64_t C = shape[1];
  Tensor x = test::rand(shape, -1, 3, dt, Device::cpu(), 31);
  Tensor gy = test::randn(shape, dt, Device::cpu(), 32);
  Tensor g = test::rand({C}, 0.5, 2, dt, Device::cpu(), 33);
  Tensor b = test::rand({C}, -1, 1, dt, Device::cpu(), 34);
  Tensor rm = test::rand({C}, -1, 1, dt, Device::cpu(), 35);
  Tensor rv = test::rand({C}, 0.5, 2, dt, Device::cpu(), 36);
  Tensor rmd = rm.cuda(), rvd = rv.cuda();
  auto c = kernels::batchnorm_forward(x, g, b, rm, rv, training, 0.1, 1e-5);
  auto gc = kernels::batchnorm_backward(x, gy, c.mean, c.invstd, g, training);
  auto d = kernels::batchnorm_forward(x.cuda(), g.cuda(), b.cuda(), rmd, rvd, training, 0.1, 1e-5);
  auto gd = kernels::batchnorm_backward(x.cuda(), gy.cuda(), d.mean, d.invstd, g.cuda(), training);
  EXPECT_TRUE(test::all_close(c.y, d.y, atol, rtol)) << shape_str(shape);
  EXPECT_TRUE(test::all_close(c.mean, d.mean, atol, rtol));
  EXPECT_TRUE(test::all_close(c.invstd, d.invstd, atol, rtol));
  EXPECT_TRUE(test::all_close(rm, rmd, atol, rtol));
  EXPECT_TRUE(test::all_close(rv, rvd, atol, rtol));
  EXPECT_TRUE(test::all_close(gc.dx, gd.dx, atol, rtol)) << shape_str(shape);
  // dgamma/dbeta are sums over up to 345,600 values: their rounding grows with M.
  EXPECT_TRUE(test::all_close(gc.dgamma, gd.dgamma, atol * 100, rtol * 10));
  EXPECT_TRUE(test::all_close(gc.dbeta, gd.dbeta, atol * 100, rtol * 10));
}

TEST(BatchNormCudaTest, ParityKochAndOddShapes) {
  MN_SKIP_IF_NO_CUDA();
  // The CPU accumulates in double, the GPU in T (Welford per thread + tree): for
  // float32 at M = 345,600 the mean/var differ by ~1e-6 relative; 1e-4 leaves margin.
  for (auto s : test::sized({{150, 64, 48, 48}, {150, 4096}, {1, 1, 7, 5}, {3, 5, 13, 1},
                            {2, 3}})) {
    for (bool training : {true, false}) {
      bn_parity(s, DType::F32, training, 1e-4, 1e-4);
      bn_parity(s, DType::F64, training, 1e-10, 1e-10);
    }
  }
}

}  // namespace
}  // namespace mn
