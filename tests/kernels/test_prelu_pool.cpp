// PReLU + max pooling as one op (kernels/prelu_pool.h, ag::prelu_max_pool2d):
// the same outputs, argmax and input gradients as prelu then max_pool2d (exactly)
// and the same slope gradient to rounding, for the vectorised 2x2 path (with and
// without a scalar tail), overlapping and padded windows, ties, NaN, negative and
// zero slopes, per-channel and shared slopes; thread-count independence; float64
// gradchecks; shape errors; CPU/CUDA parity.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "autograd/gradcheck.h"
#include "autograd/ops_conv.h"
#include "kernels/pool.h"
#include "kernels/prelu.h"
#include "kernels/prelu_pool.h"
#include "runtime/parallel.h"
#include "tests/common/test_util.h"

namespace mn {
namespace {

using ag::Variable;

kernels::Pool2dParams pool(int64_t k, int64_t s = 0, int64_t pad = 0) {
  kernels::Pool2dParams p;
  p.kernel_h = p.kernel_w = k;
  p.stride_h = p.stride_w = s;
  p.pad_h = p.pad_w = pad;
  return p;
}

// x rounded to multiples of 0.5 in [-2, 2]: many ties inside windows, zeros included.
Tensor tie_heavy(const Shape& shape, DType dt, uint64_t seed) {
  auto v = test::rand(shape, -2.2, 2.2, DType::F64, Device::cpu(), seed).to_double_vector();
  for (double& e : v) e = std::round(e * 2) / 2;
  return Tensor::from_vector(v, shape).to(dt);
}

// Compares the fused op with prelu_forward then max_pool2d_forward, and the
// backward with max_pool2d_backward then prelu_backward.
void expect_matches_unfused(const Tensor& x, const Tensor& a, const kernels::Pool2dParams& p,
                            const std::string& what) {
  SCOPED_TRACE(what);
  auto [y, am] = kernels::prelu_max_pool2d_forward(x, a, p);
  auto [y_ref, am_ref] = kernels::max_pool2d_forward(kernels::prelu_forward(x, a), p);
  EXPECT_TRUE(test::all_close(y_ref, y, 0, 0));
  EXPECT_EQ(am_ref.to_vector<int32_t>(), am.to_vector<int32_t>());
  Tensor gy = test::randn(y.shape(), x.dtype(), Device::cpu(), 17);
  auto [gx, ga] = kernels::prelu_max_pool2d_backward(x, a, gy, am, p);
  auto [gx_ref, ga_ref] =
      kernels::prelu_backward(x, a, kernels::max_pool2d_backward(gy, am_ref, x.shape(), p));
  EXPECT_TRUE(test::all_close(gx_ref, gx, 0, 0));
  const double tol = x.dtype() == DType::F64 ? 1e-12 : 1e-5;
  EXPECT_TRUE(test::all_close(ga_ref, ga, tol, tol)) << "slope gradient";
  EXPECT_EQ(ga.numel(), a.numel());
}

TEST(PReLUMaxPool, MatchesPReLUThenMaxPool) {
  struct Case {
    Shape shape;
    kernels::Pool2dParams p;
    const char* name;
  };
  const std::vector<Case> cases = {
      {{3, 4, 24, 24}, pool(2), "2x2, Q = 12: three vector steps per row"},
      {{2, 3, 8, 8}, pool(2), "2x2, Q = 4: the sampling net's second pool"},
      {{2, 3, 10, 11}, pool(2), "2x2, Q = 5: a scalar tail, odd width floored"},
      {{2, 2, 3, 6}, pool(2), "2x2, Q = 3: scalar only"},
      {{2, 3, 9, 9}, pool(3, 2), "3x3 stride 2: overlapping windows"},
      {{2, 3, 7, 8}, pool(3, 2, 1), "3x3 stride 2 pad 1"},
      {{1, 2, 6, 6}, pool(2, 1), "2x2 stride 1"},
  };
  for (const Case& c : cases)
    for (DType dt : {DType::F32, DType::F64})
      for (int64_t na : {int64_t{1}, c.shape[1]}) {
        const std::string tag = std::string(c.name) + (dt == DType::F32 ? " f32" : " f64") +
                                " na " + std::to_string(na);
        Tensor x = test::rand(c.shape, -2, 2, dt, Device::cpu(), 3);
        Tensor a = test::rand({na}, 0.05, 0.6, dt, Device::cpu(), 4);
        expect_matches_unfused(x, a, c.p, tag);
        // Ties (first maximum of the PReLU outputs wins), zeros.
        expect_matches_unfused(tie_heavy(c.shape, dt, 5), a, c.p, tag + " ties");
        // A negative slope makes PReLU non-monotone (pool-then-PReLU would differ);
        // a zero slope makes every negative input a tie at 0.
        for (double s : {-0.7, 0.0}) {
          Tensor as = Tensor::full({na}, s, dt);
          expect_matches_unfused(tie_heavy(c.shape, dt, 6), as, c.p,
                                 tag + " slope " + std::to_string(s));
        }
      }
}

TEST(PReLUMaxPool, NaNWinsItsWindow) {
  for (DType dt : {DType::F32, DType::F64}) {
    Tensor x = test::rand({1, 2, 4, 16}, -2, 2, dt, Device::cpu(), 8);
    auto v = x.to_double_vector();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    v[1] = nan;            // top-right of window 0 (vector path)
    v[16 + 5] = nan;       // bottom-right of window 2
    v[64 + 16 * 2 + 14] = nan;  // channel 1, second row of windows, last window (y[16 + 8 + 7])
    x = Tensor::from_vector(v, x.shape()).to(dt);
    Tensor a = Tensor::full({2}, 0.25, dt);
    auto [y, am] = kernels::prelu_max_pool2d_forward(x, a, pool(2));
    auto [y_ref, am_ref] = kernels::max_pool2d_forward(kernels::prelu_forward(x, a), pool(2));
    EXPECT_TRUE(test::all_close(y_ref, y, 0, 0));
    EXPECT_EQ(am_ref.to_vector<int32_t>(), am.to_vector<int32_t>());
    const auto yv = y.to_double_vector();
    EXPECT_TRUE(std::isnan(yv[0]) && std::isnan(yv[2]) && std::isnan(yv[16 + 8 + 7]));
  }
}

TEST(PReLUMaxPool, SlopeGradientIndependentOfThreadCount) {
  Tensor x = test::rand({7, 5, 24, 24}, -2, 2, DType::F32, Device::cpu(), 9);
  Tensor gy = test::randn({7, 5, 12, 12}, DType::F32, Device::cpu(), 10);
  for (int64_t na : {int64_t{1}, int64_t{5}}) {
    Tensor a = test::rand({na}, 0.1, 0.4, DType::F32, Device::cpu(), 11);
    std::vector<std::vector<float>> gx, ga;
    const int saved = num_threads();
    for (int t : {1, 2, 3}) {
      set_num_threads(t);
      auto [y, am] = kernels::prelu_max_pool2d_forward(x, a, pool(2));
      auto g = kernels::prelu_max_pool2d_backward(x, a, gy, am, pool(2));
      gx.push_back(g.first.to_vector<float>());
      ga.push_back(g.second.to_vector<float>());
    }
    set_num_threads(saved);
    EXPECT_EQ(gx[0], gx[1]);
    EXPECT_EQ(gx[0], gx[2]);
    EXPECT_EQ(ga[0], ga[1]) << "na " << na;
    EXPECT_EQ(ga[0], ga[2]) << "na " << na;
  }
}

TEST(PReLUMaxPool, GradcheckInputAndSlope) {
  for (auto [p, na] : std::vector<std::pair<kernels::Pool2dParams, int64_t>>{
           {pool(2), 1}, {pool(2), 3}, {pool(3, 2, 1), 3}, {pool(2, 1), 1}}) {
    Tensor x = test::rand({2, 3, 6, 6}, -2, 2, DType::F64, Device::cpu(), 12);
    Tensor a = test::rand({na}, 0.1, 0.5, DType::F64, Device::cpu(), 13);
    auto res = ag::gradcheck(
        [p = p](const std::vector<Variable>& v) { return ag::prelu_max_pool2d(v[0], v[1], p); },
        {x, a});
    EXPECT_TRUE(res.ok) << "na " << na << " kernel " << p.kernel_h << ": " << res.message;
  }
}

TEST(PReLUMaxPool, ErrorsNameTheOpAndShapes) {
  Tensor x = Tensor::zeros({2, 3, 4, 4}, DType::F32);
  try {
    kernels::prelu_max_pool2d_forward(x, Tensor::zeros({2}, DType::F32), pool(2));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("prelu_max_pool2d"), std::string::npos) << m;
    EXPECT_NE(m.find("one per channel (3"), std::string::npos) << m;
  }
  try {
    kernels::prelu_max_pool2d_forward(Tensor::zeros({2, 3, 4}, DType::F32),
                                      Tensor::zeros({3}, DType::F32), pool(2));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(N, C, H, W)"), std::string::npos) << e.what();
  }
  Tensor a = Tensor::zeros({3}, DType::F32);
  auto [y, am] = kernels::prelu_max_pool2d_forward(x, a, pool(2));
  try {
    kernels::prelu_max_pool2d_backward(x, a, Tensor::zeros({2, 3, 3, 2}, DType::F32), am, pool(2));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("prelu_max_pool2d_backward"), std::string::npos) << m;
    EXPECT_NE(m.find("must be (2, 3, 2, 2)"), std::string::npos) << m;
  }
}

TEST(PReLUMaxPoolCuda, Parity) {
  MN_SKIP_IF_NO_CUDA();
  for (Shape shape : test::sized({{256, 32, 24, 24}, {3, 4, 10, 11}})) {
    for (int64_t na : {int64_t{1}, shape[1]}) {
      for (DType dt : {DType::F32, DType::F64}) {
        Tensor x = test::rand(shape, -3, 3, dt, Device::cpu(), 3);
        Tensor a = test::rand({na}, 0.05, 0.5, dt, Device::cpu(), 4);
        auto [yc, amc] = kernels::prelu_max_pool2d_forward(x, a, pool(2));
        auto [yd, amd] = kernels::prelu_max_pool2d_forward(x.cuda(), a.cuda(), pool(2));
        EXPECT_TRUE(test::all_close(yc, yd, 0, 0));
        EXPECT_EQ(amc.to_vector<int32_t>(), amd.cpu().to_vector<int32_t>());
        Tensor gy = test::randn(yc.shape(), dt, Device::cpu(), 5);
        auto gc = kernels::prelu_max_pool2d_backward(x, a, gy, amc, pool(2));
        auto gd = kernels::prelu_max_pool2d_backward(x.cuda(), a.cuda(), gy.cuda(), amd, pool(2));
        EXPECT_TRUE(test::all_close(gc.first, gd.first, 0, 0));
        const double tol = dt == DType::F32 ? 1e-4 : 1e-11;
        EXPECT_TRUE(test::all_close(gc.second, gd.second, tol, tol)) << "na " << na;
      }
    }
  }
}

}  // namespace
}  // namespace mn
