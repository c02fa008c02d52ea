// Reductions (kernels/reduce.h) against direct loops written here: all
// elements and given dims, keepdim, odd sizes (1, 7, 1000003), non-contiguous
// inputs, ties, var biased/unbiased, and CPU-vs-CUDA parity (skipped without GPU).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/reduce.h"
#include "tests/common/test_util.h"

using namespace mn;
namespace K = mn::kernels;

namespace {
// Reference over a 3-D tensor viewed (A, B, C) reducing the middle dimension.
struct Ref3 {
  std::vector<double> sum, mean, max, min, var_u, var_b;
  std::vector<int64_t> argmax, argmin;
};
Ref3 ref_mid(const std::vector<double>& x, int64_t A, int64_t B, int64_t C) {
  Ref3 r;
  for (int64_t a = 0; a < A; ++a)
    for (int64_t c = 0; c < C; ++c) {
      long double s = 0;
      double mx = -INFINITY, mn = INFINITY;
      int64_t ax = 0, an = 0;
      for (int64_t b = 0; b < B; ++b) {
        double v = x[(a * B + b) * C + c];
        s += v;
        if (v > mx) { mx = v; ax = b; }
        if (v < mn) { mn = v; an = b; }
      }
      double m = static_cast<double>(s / B);
      long double ss = 0;
      for (int64_t b = 0; b < B; ++b) {
        double d = x[(a * B + b) * C + c] - m;
        ss += d * d;
      }
      r.sum.push_back(static_cast<double>(s));
      r.mean.push_back(m);
      r.max.push_back(mx);
      r.min.push_back(mn);
      r.argmax.push_back(ax);
      r.argmin.push_back(an);
      r.var_u.push_back(static_cast<double>(ss / (B - 1)));
      r.var_b.push_back(static_cast<double>(ss / B));
    }
  return r;
}
}  // namespace

// float64: relative 1e-12 (double accumulation in a different order than the
// long double reference). float32 inputs are accumulated in double too, so the
// only error is the final rounding to float: 1e-6 relative; atol covers sums near 0.
TEST(Reduce, MiddleDimMatchesLoops) {
  const int64_t shapes[][3] = {{1, 7, 1}, {3, 7, 5}, {2, 1000, 3}, {4, 300, 1}, {1, 5, 300}};
  for (DType dt : {DType::F64, DType::F32}) {
    const double rtol = dt == DType::F64 ? 1e-12 : 1e-6, atol = dt == DType::F64 ? 1e-12 : 1e-5;
    for (auto& s : shapes) {
      Tensor x = test::randn({s[0], s[1], s[2]}, dt, Device::cpu(), 9);
      Ref3 r = ref_mid(x.to_double_vector(), s[0], s[1], s[2]);
      EXPECT_TRUE(test::all_close(r.sum, K::sum(x, {1}).to_double_vector(), atol, rtol));
      EXPECT_TRUE(test::all_close(r.mean, K::mean(x, {-2}).to_double_vector(), atol, rtol));
      auto mx = K::max_dim(x, 1), mn = K::min_dim(x, 1);
      EXPECT_TRUE(test::all_close(r.max, mx.values.to_double_vector(), 0, 0));
      EXPECT_TRUE(test::all_close(r.min, mn.values.to_double_vector(), 0, 0));
      EXPECT_EQ(r.argmax, mx.indices.to_vector<int64_t>());
      EXPECT_EQ(r.argmin, mn.indices.to_vector<int64_t>());
      EXPECT_TRUE(test::all_close(r.var_u, K::var(x, {1}, true).to_double_vector(), atol, 10 * rtol));
      EXPECT_TRUE(test::all_close(r.var_b, K::var(x, {1}, false).to_double_vector(), atol, 10 * rtol));
    }
  }
}

TEST(Reduce, KeepdimAndShapes) {
  Tensor x = test::randn({2, 3, 4}, DType::F64, Device::cpu(), 1);
  EXPECT_EQ(K::sum(x, {1}, true).shape(), (Shape{2, 1, 4}));
  EXPECT_EQ(K::sum(x, {0, 2}).shape(), (Shape{3}));
  EXPECT_EQ(K::sum(x, {0, 2}, true).shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(K::sum(x).shape(), (Shape{}));
  EXPECT_EQ(K::sum(x, {}, true).shape(), (Shape{1, 1, 1}));
  EXPECT_EQ(K::max_dim(x, -1, true).indices.shape(), (Shape{2, 3, 1}));
  EXPECT_THROW(K::sum(x, {3}), Error);
}

TEST(Reduce, NonAdjacentDimsMatchLoops) {
  Tensor x = test::randn({3, 4, 5}, DType::F64, Device::cpu(), 2);
  auto v = x.to_double_vector();
  std::vector<double> ref(4, 0.0);
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 4; ++b)
      for (int c = 0; c < 5; ++c) ref[b] += v[(a * 4 + b) * 5 + c];
  EXPECT_TRUE(test::all_close(ref, K::sum(x, {0, 2}).to_double_vector(), 1e-13, 1e-13));
  for (double& r : ref) r /= 15;
  EXPECT_TRUE(test::all_close(ref, K::mean(x, {2, 0}).to_double_vector(), 1e-13, 1e-13));
}

TEST(Reduce, AllElementsOddSizes) {
  for (int64_t n : {1, 7, 1000003}) {
    for (DType dt : {DType::F64, DType::F32}) {
      Tensor x = test::rand({n}, -1, 1, dt, Device::cpu(), 3);
      auto v = x.to_double_vector();
      long double s = 0;
      int64_t ai = 0, ni = 0;
      for (int64_t i = 0; i < n; ++i) {
        s += v[i];
        if (v[i] > v[ai]) ai = i;
        if (v[i] < v[ni]) ni = i;
      }
      // float32 sum of up to 1e6 terms in [-1,1]: double accumulation, final
      // rounding only; atol 1e-4 ~ |sum| * 2^-24 for sums up to ~1e3.
      const double atol = dt == DType::F64 ? 1e-9 : 1e-4;
      EXPECT_NEAR(static_cast<double>(s), K::sum(x).item(), atol) << n;
      EXPECT_NEAR(static_cast<double>(s / n), K::mean(x).item(), atol / n + 1e-7) << n;
      auto mx = K::max_all(x), mn = K::min_all(x);
      EXPECT_EQ(mx.values.item(), v[ai]);
      EXPECT_EQ(mx.indices.item(), static_cast<double>(ai));
      EXPECT_EQ(mn.indices.item(), static_cast<double>(ni));
    }
  }
}

TEST(Reduce, SumOfManyFloatsIsAccurate) {
  // 1000003 copies of 0.1f: naive float accumulation drifts by ~1%; double
  // accumulation stays within the rounding of the final result.
  Tensor x = Tensor::full({1000003}, 0.1, DType::F32);
  const double exact = 1000003 * static_cast<double>(0.1f);
  EXPECT_NEAR(K::sum(x).item(), exact, exact * 1e-7);
}

TEST(Reduce, NonContiguousInput) {
  Tensor base = test::randn({7, 1001}, DType::F64, Device::cpu(), 4);
  Tensor x = base.t();  // (1001, 7), strided
  auto v = base.to_double_vector();
  std::vector<double> ref(1001, 0.0);
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 1001; ++j) ref[j] += v[i * 1001 + j];
  EXPECT_TRUE(test::all_close(ref, K::sum(x, {1}).to_double_vector(), 1e-13, 1e-13));
  auto mx = K::max_dim(x, 0);
  for (int i = 0; i < 7; ++i) {
    double m = -INFINITY;
    for (int j = 0; j < 1001; ++j) m = std::max(m, v[i * 1001 + j]);
    EXPECT_EQ(mx.values.to_vector<double>()[i], m);
  }
}

TEST(Reduce, TiesGoToFirstIndexAndNanPropagates) {
  Tensor x = Tensor::from_vector<double>({1, 3, 3, 0, 3, -2, -2, 5}, {2, 4});
  EXPECT_EQ(K::argmax(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(K::argmin(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(K::max_all(x).indices.item(), 7);
  Tensor y = Tensor::from_vector<double>({1, NAN, 2}, {3});
  EXPECT_TRUE(std::isnan(K::max_all(y).values.item()));
  EXPECT_EQ(K::max_all(y).indices.item(), 1);
}

TEST(Reduce, SumToShapeAndErrors) {
  EXPECT_THROW(K::max_dim(Tensor::zeros({3, 0}), 1), Error);
  EXPECT_THROW(K::sum(Tensor::zeros({3}, DType::I32)), Error);
}

// Parity: same inputs on both devices. Both accumulate in double, so sums agree
// to float rounding: rtol 1e-5 with atol 1e-6 for results near zero. max/min/arg
// are exact.
TEST(ReduceCuda, Parity) {
  MN_SKIP_IF_NO_CUDA();
  const Shape shapes[] = {{1000003}, {7}, {1}, {37, 1000}, {1000, 37}, {3, 5000, 9}, {2, 3, 4, 5}};
  for (DType dt : {DType::F32, DType::F64})
    for (const Shape& s : shapes) {
      Tensor x = test::randn(s, dt, Device::cpu(), 77);
      Tensor xc = x.cuda();
      EXPECT_TRUE(test::all_close(K::sum(x), K::sum(xc), 1e-6, 1e-5)) << shape_str(s);
      EXPECT_TRUE(test::all_close(K::mean(x), K::mean(xc), 1e-6, 1e-5));
      auto a = K::max_all(x), b = K::max_all(xc);
      EXPECT_TRUE(test::all_close(a.values, b.values, 0, 0));
      EXPECT_TRUE(test::all_close(a.indices, b.indices, 0, 0));
      for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d) {
        EXPECT_TRUE(test::all_close(K::sum(x, {d}), K::sum(xc, {d}), 1e-6, 1e-5)) << shape_str(s) << d;
        EXPECT_TRUE(test::all_close(K::var(x, {d}), K::var(xc, {d}), 1e-6, 1e-5));
        auto m1 = K::min_dim(x, d), m2 = K::min_dim(xc, d);
        EXPECT_TRUE(test::all_close(m1.values, m2.values, 0, 0));
        EXPECT_TRUE(test::all_close(m1.indices, m2.indices, 0, 0));
      }
      Tensor xt = x.dim() >= 2 ? x.transpose(0, 1) : x;
      Tensor xct = xc.dim() >= 2 ? xc.transpose(0, 1) : xc;
      EXPECT_TRUE(test::all_close(K::sum(xt, {0}), K::sum(xct, {0}), 1e-6, 1e-5));
    }
}
