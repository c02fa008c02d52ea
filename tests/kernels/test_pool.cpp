// Max / average pooling tests: forward against loops written here, backward via
// gradcheck (max pool on well-separated values with a 1e-4 step so no argmax
// flips), routing of the max-pool gradient, CPU-vs-CUDA parity, error paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>

#include "autograd/gradcheck.h"
#include "autograd/ops_conv.h"
#include "kernels/pool.h"
#include "tests/common/test_util.h"

namespace mn {
namespace {

using kernels::Pool2dParams;

Pool2dParams pp(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                bool cip = true) {
  Pool2dParams p;
  p.kernel_h = kh, p.kernel_w = kw, p.stride_h = sh, p.stride_w = sw, p.pad_h = ph, p.pad_w = pw;
  p.count_include_pad = cip;
  return p;
}

// Values 0, 1, ..., n-1 shuffled and scaled: every pair differs by >= `gap`,
// so a central difference with step << gap/2 never flips an argmax.
Tensor distinct_values(const Shape& s, double gap, uint64_t seed, Device d = Device::cpu()) {
  std::vector<double> v(numel_of(s));
  std::iota(v.begin(), v.end(), 0.0);
  std::shuffle(v.begin(), v.end(), std::mt19937_64(seed));
  for (double& x : v) x = (x - v.size() / 2.0) * gap;
  return Tensor::from_vector(v, s, d);
}

// Direct pooling over the padded plane, as in the definition.
std::vector<double> reference_pool(const Tensor& x, const Pool2dParams& p, bool is_max) {
  const auto X = x.to_double_vector();
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t sh = p.stride_h ? p.stride_h : p.kernel_h, sw = p.stride_w ? p.stride_w : p.kernel_w;
  const int64_t P = (H + 2 * p.pad_h - p.kernel_h) / sh + 1, Q = (W + 2 * p.pad_w - p.kernel_w) / sw + 1;
  std::vector<double> y;
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t i = 0; i < P; ++i)
      for (int64_t j = 0; j < Q; ++j) {
        double m = -std::numeric_limits<double>::infinity(), s = 0;
        int64_t cnt = 0;
        for (int64_t r = 0; r < p.kernel_h; ++r)
          for (int64_t t = 0; t < p.kernel_w; ++t) {
            const int64_t h = i * sh - p.pad_h + r, w = j * sw - p.pad_w + t;
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            const double v = X[(nc * H + h) * W + w];
            m = std::max(m, v), s += v, ++cnt;
          }
        y.push_back(is_max ? m : s / double(p.count_include_pad ? p.kernel_h * p.kernel_w : cnt));
      }
  return y;
}

std::vector<Pool2dParams> cases() {
  return {pp(2, 2, 2, 2, 0, 0), pp(3, 3, 2, 2, 1, 1), pp(3, 2, 1, 1, 1, 0),
          pp(2, 3, 3, 2, 1, 1), pp(3, 3, 2, 2, 1, 1, false), pp(4, 4, 1, 3, 2, 1, false)};
}

TEST(PoolKernel, ForwardMatchesLoops) {
  for (DType dt : {DType::F32, DType::F64})
    for (const Pool2dParams& p : cases()) {
      Tensor x = test::rand({2, 3, 9, 7}, -1, 1, dt, Device::cpu(), 1);
      auto [y, am] = kernels::max_pool2d_forward(x, p);
      // Max pool copies an element; average pool of <= 16 terms: 1e-6 covers float32.
      EXPECT_TRUE(test::all_close(reference_pool(x, p, true), y.to_double_vector(), 0, 0));
      EXPECT_TRUE(test::all_close(reference_pool(x, p, false),
                                  kernels::avg_pool2d_forward(x, p).to_double_vector(), 1e-6, 1e-6));
      // The argmax points at the maximum.
      const auto xv = x.to_double_vector(), yv = y.to_double_vector();
      const auto av = am.to_vector<int32_t>();
      const int64_t plane = y.size(2) * y.size(3);
      for (size_t i = 0; i < av.size(); ++i)
        ASSERT_EQ(xv[(i / plane) * 63 + av[i]], yv[i]) << "output " << i;
    }
}

// Ties and NaNs (values drawn from {0, 1, 2, NaN}): the 2x2 / stride 2 fast path and
// the general path both keep the first maximum in row-major window order, and the
// first NaN of a window wins; checked against a scan written here, with odd sizes.
TEST(PoolKernel, MaxPoolTiesAndNaNsFollowTheDocumentedOrder) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::mt19937_64 rng(17);
  for (DType dt : {DType::F32, DType::F64})
    for (const Pool2dParams& p : {pp(2, 2, 2, 2, 0, 0), pp(3, 3, 2, 2, 1, 1)}) {
      const int64_t N = 2, C = 3, H = 11, W = 19;  // 2x2: Q = 9, two 4-window SSE steps and a scalar tail
      std::vector<double> v(static_cast<size_t>(N * C * H * W));
      for (double& x : v) {
        const int r = static_cast<int>(rng() % 8);  // 1 in 8 NaN, the rest 0, 1, 2
        x = r == 7 ? nan : double(r % 3);
      }
      Tensor x = Tensor::from_vector(v, {N, C, H, W}).to(dt);
      auto [y, am] = kernels::max_pool2d_forward(x, p);
      const auto yv = y.to_double_vector();
      const auto av = am.to_vector<int32_t>();
      const int64_t P = y.size(2), Q = y.size(3), sh = p.stride_h, sw = p.stride_w;
      int64_t nan_windows = 0, tie_windows = 0;
      for (int64_t nc = 0; nc < N * C; ++nc)
        for (int64_t i = 0; i < P; ++i)
          for (int64_t j = 0; j < Q; ++j) {
            int64_t best = -1, ties = 0;
            double m = 0;
            for (int64_t r = 0; r < p.kernel_h; ++r)
              for (int64_t t = 0; t < p.kernel_w; ++t) {
                const int64_t h = i * sh - p.pad_h + r, w = j * sw - p.pad_w + t;
                if (h < 0 || h >= H || w < 0 || w >= W) continue;
                const double e = v[static_cast<size_t>((nc * H + h) * W + w)];
                if (best >= 0 && e == m) ++ties;
                if (best < 0 || (!std::isnan(m) && (e > m || std::isnan(e)))) best = h * W + w, m = e, ties = 0;
              }
            nan_windows += std::isnan(m);
            tie_windows += ties > 0;
            const size_t o = static_cast<size_t>((nc * P + i) * Q + j);
            ASSERT_EQ(av[o], best) << "output " << o;
            if (std::isnan(m)) ASSERT_TRUE(std::isnan(yv[o])) << "output " << o;
            else ASSERT_EQ(yv[o], m) << "output " << o;
          }
      EXPECT_GT(nan_windows, 10);  // the data exercises both rules
      EXPECT_GT(tie_windows, 10);
    }
}

TEST(PoolKernel, MaxPoolBackwardRoutesToArgmax) {
  // Overlapping windows (3x3 stride 2): an element chosen by two windows gets both.
  Tensor x = distinct_values({1, 2, 7, 7}, 1.0, 3);
  const Pool2dParams p = pp(3, 3, 2, 2, 1, 1);
  auto [y, am] = kernels::max_pool2d_forward(x, p);
  Tensor dy = test::rand(y.shape(), 0.5, 1.5, DType::F64, Device::cpu(), 4);
  Tensor dx = kernels::max_pool2d_backward(dy, am, x.shape(), p);
  std::vector<double> ref(x.numel(), 0.0);
  const auto a = am.to_vector<int32_t>();
  const auto d = dy.to_double_vector();
  const int64_t plane = y.size(2) * y.size(3);
  for (size_t i = 0; i < a.size(); ++i) ref[(i / plane) * 49 + a[i]] += d[i];
  EXPECT_TRUE(test::all_close(ref, dx.to_double_vector(), 1e-14, 0));
}

TEST(PoolGradcheck, MaxPoolFloat64) {
  for (const Pool2dParams& p : cases()) {
    auto f = [p](const std::vector<ag::Variable>& v) { return ag::max_pool2d(v[0], p); };
    ag::GradcheckOptions o;
    o.eps = 1e-4;  // values are >= 0.01 apart: a 1e-4 step never flips an argmax
    ag::GradcheckResult r = ag::gradcheck(f, {distinct_values({2, 2, 7, 6}, 0.01, 5)}, o);
    EXPECT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.skipped, 0);
  }
}

TEST(PoolGradcheck, AvgPoolFloat64) {
  for (const Pool2dParams& p : cases()) {
    auto f = [p](const std::vector<ag::Variable>& v) { return ag::avg_pool2d(v[0], p); };
    ag::GradcheckResult r =
        ag::gradcheck(f, {test::rand({2, 2, 7, 6}, -1, 1, DType::F64, Device::cpu(), 6)});
    EXPECT_TRUE(r.ok) << r.message;
  }
}

TEST(PoolKernel, ErrorsNameShapes) {
  Tensor x = Tensor::zeros({2, 3, 4, 4});
  try {
    kernels::max_pool2d_forward(x, pp(5, 5, 1, 1, 0, 0));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(2, 3, 4, 4)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(kernels::max_pool2d_forward(x, pp(0, 2, 1, 1, 0, 0)), Error);
  EXPECT_THROW(kernels::avg_pool2d_forward(x, pp(2, 2, 1, 1, 2, 0)), Error);  // pad > k/2
  EXPECT_THROW(kernels::avg_pool2d_forward(Tensor::zeros({3, 4, 4}), pp(2, 2, 2, 2, 0, 0)), Error);
}

void pool_parity(const Shape& s, const Pool2dParams& p, DType dt) {
  const Device g = Device::cuda();
  Tensor x = dt == DType::F64 ? distinct_values(s, 1e-3, 7) : test::rand(s, -1, 1, dt, Device::cpu(), 7);
  auto [y, am] = kernels::max_pool2d_forward(x, p);
  auto [yg, amg] = kernels::max_pool2d_forward(x.to(g), p);
  EXPECT_TRUE(test::all_close(y, yg, 0, 0));
  EXPECT_EQ(am.to_vector<int32_t>(), amg.to_vector<int32_t>());
  Tensor dy = test::rand(y.shape(), -1, 1, dt, Device::cpu(), 8);
  // Backward sums at most kh*kw gradient terms: 1e-6 (float32), exact order may differ.
  EXPECT_TRUE(test::all_close(kernels::max_pool2d_backward(dy, am, s, p),
                              kernels::max_pool2d_backward(dy.to(g), amg, s, p), 1e-6, 1e-6));
  EXPECT_TRUE(test::all_close(kernels::avg_pool2d_forward(x, p),
                              kernels::avg_pool2d_forward(x.to(g), p), 1e-6, 1e-6));
  EXPECT_TRUE(test::all_close(kernels::avg_pool2d_backward(dy, s, p),
                              kernels::avg_pool2d_backward(dy.to(g), s, p), 1e-6, 1e-6));
}

TEST(PoolCuda, Parity) {
  MN_SKIP_IF_NO_CUDA();
  for (DType dt : {DType::F32, DType::F64})
    for (const Pool2dParams& p : cases()) pool_parity({2, 3, 9, 7}, p, dt);
  // Koch pooling shapes (batch 150), N = 1 / C = 1 odd shapes.
  const Pool2dParams k2 = pp(2, 2, 2, 2, 0, 0);
  for (const Shape& s : test::sized({{150, 64, 96, 96}, {150, 128, 42, 42}, {150, 128, 18, 18}}))
    pool_parity(s, k2, DType::F32);
  pool_parity({1, 1, 13, 11}, pp(3, 3, 2, 2, 1, 1), DType::F32);
}

}  // namespace
}  // namespace mn
