// The CUDA pooling kernels' index maths and per-thread bodies (kernels/pool_index.h),
// run on the CPU: the helpers against brute force, and every kernel emulated thread by
// thread (in a shuffled order, over slabs forced small) against the CPU oracle bit for
// bit. Then the fused ReLU + max-pool backward (kernels::max_pool2d_relu_backward)
// against the unfused composition, and the CUDA kernels against the CPU (bit for bit:
// pooling copies and sums the same terms in the same order).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/activation.h"
#include "kernels/gemm_config.h"
#include "kernels/pool.h"
#include "kernels/pool_index.h"
#include "tests/common/test_util.h"

namespace mn {
namespace {

using kernels::Pool2dGeom;
using kernels::Pool2dParams;
namespace pi = kernels::pool_index;

Pool2dParams pp(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw) {
  Pool2dParams p;
  p.kernel_h = kh, p.kernel_w = kw, p.stride_h = sh, p.stride_w = sw, p.pad_h = ph, p.pad_w = pw;
  return p;
}

struct Case {
  Shape x;
  Pool2dParams p;
};
// Disjoint windows: exact tiling (Koch), odd sizes (uncovered last row / column),
// padding, stride > kernel (gaps), kernel 1. Overlapping: the last three.
std::vector<Case> cases() {
  return {{{2, 3, 8, 8}, pp(2, 2, 2, 2, 0, 0)},   {{2, 3, 9, 7}, pp(2, 2, 2, 2, 0, 0)},
          {{1, 2, 10, 11}, pp(3, 3, 3, 3, 1, 1)}, {{2, 2, 11, 10}, pp(2, 2, 3, 3, 0, 0)},
          {{2, 1, 9, 13}, pp(2, 3, 3, 4, 1, 1)},  {{1, 3, 5, 6}, pp(1, 1, 2, 2, 0, 0)},
          {{2, 3, 9, 7}, pp(3, 3, 2, 2, 1, 1)},   {{1, 2, 7, 6}, pp(3, 2, 1, 1, 1, 0)},
          {{2, 2, 9, 10}, pp(4, 4, 1, 3, 2, 1)}};
}

// Bitwise equality; with nan_any, any two NaNs match (a GPU's arithmetic returns the
// canonical NaN where the CPU keeps the input's payload).
template <typename T>
::testing::AssertionResult same_bits(const std::vector<T>& ref, const std::vector<T>& x,
                                     bool nan_any = false) {
  if (ref.size() != x.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < ref.size(); ++i) {
    if (nan_any && std::isnan(ref[i]) && std::isnan(x[i])) continue;
    if (std::memcmp(&ref[i], &x[i], sizeof(T)) != 0)
      return ::testing::AssertionFailure() << "element " << i << ": expected " << ref[i] << ", got "
                                           << x[i] << " (bits differ)";
  }
  return ::testing::AssertionSuccess();
}

// Values from {-2, -1, 0, 1, 2} (ties everywhere), 1 in 16 NaN when nans.
template <typename T>
std::vector<T> coarse(int64_t n, uint64_t seed, bool nans) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(static_cast<size_t>(n));
  for (T& x : v) {
    const int r = static_cast<int>(rng() % 16);
    x = nans && r == 15 ? std::numeric_limits<T>::quiet_NaN() : T(r % 5 - 2);
  }
  return v;
}
// Gradients: uniform in [-1, 1) with some -0.0 and NaN.
template <typename T>
std::vector<T> grads(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<T> v(static_cast<size_t>(n));
  for (T& x : v) {
    const int r = static_cast<int>(rng() % 32);
    x = r == 0 ? T(-0.0) : r == 1 ? std::numeric_limits<T>::quiet_NaN() : T(u(rng));
  }
  return v;
}

// A NaN with a payload no kernel produces: what an element no thread wrote still holds.
template <typename T>
T sentinel() {
  T v;
  if constexpr (sizeof(T) == 4) {
    const uint32_t b = 0x7fe5a5a5u;
    std::memcpy(&v, &b, 4);
  } else {
    const uint64_t b = 0x7ffa5a5a5a5a5a5aull;
    std::memcpy(&v, &b, 8);
  }
  return v;
}

// ---- the helpers ---------------------------------------------------------------------

TEST(PoolIndex, CoveringMatchesBruteForce) {
  for (int H = 1; H <= 12; ++H)
    for (int k = 1; k <= 4; ++k)
      for (int s = 1; s <= 4; ++s)
        for (int pad = 0; 2 * pad <= k; ++pad) {
          if (H + 2 * pad < k) continue;
          const int P = (H + 2 * pad - k) / s + 1;
          const kernels::FastDiv fs(s);
          for (int h = 0; h < H; ++h) {
            std::vector<int> want;
            for (int p = 0; p < P; ++p) {
              int h0, h1;
              pi::pool_window(p, k, s, pad, H, h0, h1);
              ASSERT_EQ(h0, std::max(p * s - pad, 0));
              ASSERT_EQ(h1, std::min(p * s - pad + k, H));
              if (h0 <= h && h < h1) want.push_back(p);
            }
            int p0, p1;
            pi::pool_covering(h, k, fs, pad, P, p0, p1);
            std::vector<int> got;
            for (int p = p0; p < p1; ++p) got.push_back(p);
            ASSERT_EQ(want, got) << "H " << H << " k " << k << " s " << s << " pad " << pad << " h " << h;
          }
        }
}

// For stride >= kernel the cells partition [0, H) in order and each holds its window.
TEST(PoolIndex, CellsPartitionThePlaneAndHoldTheirWindows) {
  int checked = 0;
  for (int H = 1; H <= 14; ++H)
    for (int k = 1; k <= 4; ++k)
      for (int s = k; s <= 5; ++s)
        for (int pad = 0; 2 * pad <= k; ++pad) {
          if (H + 2 * pad < k) continue;
          ASSERT_TRUE(pi::windows_disjoint(k, k, s, s));
          const int P = (H + 2 * pad - k) / s + 1;
          int next = 0;
          for (int p = 0; p < P; ++p) {
            int c0, c1, h0, h1;
            pi::pool_cell(p, s, pad, P, H, c0, c1);
            pi::pool_window(p, k, s, pad, H, h0, h1);
            ASSERT_EQ(c0, next) << "H " << H << " k " << k << " s " << s << " pad " << pad << " p " << p;
            ASSERT_LE(c0, h0);
            ASSERT_GE(c1, h1);
            next = c1;
          }
          ASSERT_EQ(next, H);
          ++checked;
        }
  EXPECT_GT(checked, 200);
  EXPECT_FALSE(pi::windows_disjoint(3, 2, 2, 2));
  EXPECT_FALSE(pi::windows_disjoint(2, 3, 2, 2));
}

TEST(PoolIndex, Decode3MatchesDivisionAndModulo) {
  std::mt19937_64 rng(3);
  for (auto [R, S] : std::vector<std::pair<uint32_t, uint32_t>>{{1, 1}, {9, 9}, {48, 48}, {21, 7}, {1, 46341}, {65537, 3}}) {
    const kernels::FastDiv fS(S), fR(R);
    for (int t = 0; t < 20000; ++t) {
      const uint32_t i = static_cast<uint32_t>(rng() % (uint64_t(1) << 31));
      int plane, r, s;
      pi::decode3(i, fS, fR, plane, r, s);
      ASSERT_EQ(uint32_t(s), i % S);
      ASSERT_EQ(uint32_t(r), (i / S) % R);
      ASSERT_EQ(uint32_t(plane), i / S / R);
    }
  }
}

Pool2dGeom geom(const Shape& x, const Pool2dParams& p) { return kernels::pool2d_geometry("test", x, p); }

// Slabs cover every plane once, stay under the limit on both sides, and a plane larger
// than the limit is an error that names the sizes (never a silent 32-bit overflow).
TEST(PoolIndex, SlabsCoverThePlanesWithinTheLimit) {
  for (const Case& c : cases())
    for (int64_t limit : {int64_t(200), int64_t(401), int64_t(INT32_MAX)}) {
      const Pool2dGeom g = geom(c.x, c.p);
      int64_t next = 0;
      pi::for_pool_slabs("t", g, limit, [&](int64_t p0, int64_t n) {
        EXPECT_EQ(p0, next);
        EXPECT_GE(n, 1);
        EXPECT_LE(n * g.H * g.W, limit);
        EXPECT_LE(n * g.P * g.Q, limit);
        next = p0 + n;
      });
      EXPECT_EQ(next, g.N * g.C);
    }
  // A 2^31-element batch (not allocated): slabs of whole planes below 2^31 each. With
  // padding the output plane is the larger (P = H + 1).
  const Pool2dGeom big = geom({64, 512, 256, 256}, pp(2, 2, 1, 1, 1, 1));
  ASSERT_GT(big.P * big.Q, big.H * big.W);
  const int64_t slab = pi::pool_slab_planes(big);
  EXPECT_EQ(slab, INT32_MAX / (big.P * big.Q));
  EXPECT_LT(slab * big.P * big.Q, int64_t(1) << 31);
  try {
    pi::for_pool_slabs("max_pool2d", geom({1, 1, 20, 20}, pp(2, 2, 2, 2, 0, 0)), 399, [](int64_t, int64_t) {});
    FAIL() << "a plane above the limit must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_pool2d: a plane of input (20, 20)"), std::string::npos) << e.what();
  }
}

// ---- the kernels, emulated -----------------------------------------------------------

// Runs body(d, i, in_offset, out_offset) for every thread of every slab, threads in a
// shuffled order (the kernels' threads write disjoint elements, so order must not matter).
template <typename F>
void emulate(const Pool2dGeom& g, int64_t limit, bool per_output, F&& body) {
  const pi::PoolDev d = pi::make_pool_dev(g);
  std::mt19937_64 rng(11);
  pi::for_pool_slabs("emulate", g, limit, [&](int64_t p0, int64_t n) {
    std::vector<uint32_t> order(static_cast<size_t>(per_output ? n * g.P * g.Q : n * g.H * g.W));
    std::iota(order.begin(), order.end(), 0u);
    std::shuffle(order.begin(), order.end(), rng);
    for (uint32_t i : order) body(d, i, p0 * g.H * g.W, p0 * g.P * g.Q);
  });
}

template <typename T>
void emulated_vs_oracle(const Case& c, int64_t limit) {
  const Pool2dGeom g = geom(c.x, c.p);
  const int64_t nin = g.N * g.C * g.H * g.W, nout = g.N * g.C * g.P * g.Q;
  const std::vector<T> x = coarse<T>(nin, 5, true), dy = grads<T>(nout, 6);
  std::vector<T> y(nout), ye(nout);
  std::vector<int32_t> am(nout), ame(nout);
  kernels::max_pool2d_forward_cpu<T>(g, x.data(), y.data(), am.data());
  emulate(g, limit, true, [&](const pi::PoolDev& d, uint32_t o, int64_t in, int64_t out) {
    pi::max_pool_fwd_thread<T>(d, o, x.data() + in, ye.data() + out, ame.data() + out);
  });
  ASSERT_TRUE(same_bits(y, ye));
  ASSERT_EQ(am, ame);
  // Backward: dx starts as a NaN no result can have, so an element no thread wrote shows.
  const T unset = sentinel<T>();
  std::vector<T> relu_y(nout);  // the pool of relu(x): its values for the masked form
  for (int64_t i = 0; i < nout; ++i) relu_y[i] = y[i] > T(0) ? y[i] : T(0);
  for (bool relu : {false, true}) {
    std::vector<T> dx(nin);
    if (relu) kernels::max_pool2d_relu_backward_cpu<T>(g, dy.data(), relu_y.data(), am.data(), dx.data());
    else kernels::max_pool2d_backward_cpu<T>(g, dy.data(), am.data(), dx.data());
    const T* ys = relu_y.data();
    std::vector<T> gather(nin, unset), scatter(nin, unset);
    emulate(g, limit, false, [&](const pi::PoolDev& d, uint32_t i, int64_t in, int64_t out) {
      if (relu) pi::max_pool_bwd_gather_thread<T, true>(d, i, dy.data() + out, ys + out, am.data() + out, gather.data() + in);
      else pi::max_pool_bwd_gather_thread<T, false>(d, i, dy.data() + out, nullptr, am.data() + out, gather.data() + in);
    });
    EXPECT_TRUE(same_bits(dx, gather)) << "gather, relu " << relu;
    if (!pi::windows_disjoint(int(g.kh), int(g.kw), int(g.sh), int(g.sw))) continue;
    emulate(g, limit, true, [&](const pi::PoolDev& d, uint32_t o, int64_t in, int64_t out) {
      if (relu) pi::max_pool_bwd_scatter_thread<T, true>(d, o, dy.data() + out, ys + out, am.data() + out, scatter.data() + in);
      else pi::max_pool_bwd_scatter_thread<T, false>(d, o, dy.data() + out, nullptr, am.data() + out, scatter.data() + in);
    });
    EXPECT_TRUE(same_bits(dx, scatter)) << "scatter, relu " << relu;
  }
  // Average pool: the same terms; the oracle multiplies by 1/(kh kw) where the kernel
  // divides, so 1 ulp per term (<= 16 terms of |dy| <= 1 or |x| <= 2): 1e-5 / 1e-13.
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-13;
  const std::vector<T> xf = grads<T>(nin, 8), dyf = grads<T>(nout, 9);
  std::vector<T> xs(xf), dys(dyf);  // without NaNs
  for (T& v : xs) v = std::isnan(v) ? T(0.5) : v;
  for (T& v : dys) v = std::isnan(v) ? T(0.5) : v;
  for (bool cip : {true, false}) {
    std::vector<T> ya(nout), yae(nout), dxa(nin), dxae(nin, unset);
    kernels::avg_pool2d_forward_cpu<T>(g, xs.data(), ya.data(), cip);
    emulate(g, limit, true, [&](const pi::PoolDev& d, uint32_t o, int64_t in, int64_t out) {
      pi::avg_pool_fwd_thread<T>(d, o, xs.data() + in, yae.data() + out, cip);
    });
    kernels::avg_pool2d_backward_cpu<T>(g, dys.data(), dxa.data(), cip);
    emulate(g, limit, false, [&](const pi::PoolDev& d, uint32_t i, int64_t in, int64_t out) {
      pi::avg_pool_bwd_thread<T>(d, i, dys.data() + out, dxae.data() + in, cip);
    });
    EXPECT_TRUE(test::all_close(std::vector<double>(ya.begin(), ya.end()), std::vector<double>(yae.begin(), yae.end()), tol, tol));
    EXPECT_TRUE(test::all_close(std::vector<double>(dxa.begin(), dxa.end()), std::vector<double>(dxae.begin(), dxae.end()), tol, tol));
  }
}

TEST(PoolIndex, EmulatedKernelsMatchTheCpuBitForBit) {
  for (const Case& c : cases())
    for (int64_t limit : {int64_t(INT32_MAX), int64_t(300)}) {  // one slab, then several
      SCOPED_TRACE("input " + shape_str(c.x) + " kernel " + std::to_string(c.p.kernel_h) + "x" +
                   std::to_string(c.p.kernel_w) + " stride " + std::to_string(c.p.stride_h) + "," +
                   std::to_string(c.p.stride_w) + " limit " + std::to_string(limit));
      emulated_vs_oracle<float>(c, limit);
      emulated_vs_oracle<double>(c, limit);
    }
}

// ---- the fused ReLU + max-pool backward against the composition ------------------------

// (a) Koch's order, pool(relu(z)): the composition is max_pool2d_backward then ReLU's
// backward on r = relu(z). (b) relu(pool(z)): ReLU's backward on the pooled z, then the
// pool's. Both must equal max_pool2d_relu_backward with y the pooled tensor, bit for bit.
template <typename T>
void fused_vs_composition(const Case& c, Device dev) {
  const int64_t nin = numel_of(c.x);
  const Tensor z = Tensor::from_vector(coarse<T>(nin, 21, true), c.x, dev);
  const Tensor r = kernels::activation_forward(kernels::Act::ReLU, z);
  auto [y, am] = kernels::max_pool2d_forward(r, c.p);
  const Tensor dy = Tensor::from_vector(grads<T>(y.numel(), 22), y.shape(), dev);
  const Tensor unfused = kernels::activation_backward(kernels::Act::ReLU, r, kernels::max_pool2d_backward(dy, am, c.x, c.p));
  const Tensor fused = kernels::max_pool2d_relu_backward(dy, y, am, c.x, c.p);
  EXPECT_TRUE(same_bits(unfused.to_vector<T>(), fused.to_vector<T>())) << "pool(relu(z))";
  auto [yz, amz] = kernels::max_pool2d_forward(z, c.p);
  const Tensor unfused_b = kernels::max_pool2d_backward(kernels::activation_backward(kernels::Act::ReLU, yz, dy), amz, c.x, c.p);
  const Tensor fused_b = kernels::max_pool2d_relu_backward(dy, yz, amz, c.x, c.p);
  EXPECT_TRUE(same_bits(unfused_b.to_vector<T>(), fused_b.to_vector<T>())) << "relu(pool(z))";
}

TEST(PoolReluBackward, MatchesTheUnfusedOpsBitForBit) {
  for (const Case& c : cases()) {
    fused_vs_composition<float>(c, Device::cpu());
    fused_vs_composition<double>(c, Device::cpu());
  }
}

TEST(PoolReluBackward, ErrorsNameTheOpAndShapes) {
  const Shape xs{2, 3, 8, 8};
  auto [y, am] = kernels::max_pool2d_forward(Tensor::zeros(xs), pp(2, 2, 2, 2, 0, 0));
  try {
    kernels::max_pool2d_relu_backward(Tensor::zeros({2, 3, 4, 5}), y, am, xs, pp(2, 2, 2, 2, 0, 0));
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("max_pool2d_relu_backward"), std::string::npos) << m;
    EXPECT_NE(m.find("(2, 3, 4, 5)"), std::string::npos) << m;
    EXPECT_NE(m.find("(2, 3, 8, 8)"), std::string::npos) << m;
  }
  EXPECT_THROW(kernels::max_pool2d_relu_backward(Tensor::zeros(y.shape(), DType::F64), y, am, xs, pp(2, 2, 2, 2, 0, 0)), Error);
  EXPECT_THROW(kernels::max_pool2d_relu_backward(Tensor::zeros(y.shape()), y, y, xs, pp(2, 2, 2, 2, 0, 0)), Error);
}

// ---- CUDA against the CPU -------------------------------------------------------------

// Forward and both backward forms (scatter, and the gather it falls back to) against the
// CPU, on allocations poisoned with NaN (an element a kernel skipped would show).
template <typename T>
void cuda_vs_cpu(const Case& c) {
  const Device g = Device::cuda();
  const test::PoisonScope poison(true);
  const int64_t nin = numel_of(c.x);
  const Tensor x = Tensor::from_vector(coarse<T>(nin, 31, true), c.x);
  auto [y, am] = kernels::max_pool2d_forward(x, c.p);
  auto [yg, amg] = kernels::max_pool2d_forward(x.to(g), c.p);
  ASSERT_TRUE(same_bits(y.to_vector<T>(), yg.to_vector<T>(), true));
  ASSERT_EQ(am.to_vector<int32_t>(), amg.to_vector<int32_t>());
  const Tensor dy = Tensor::from_vector(grads<T>(y.numel(), 32), y.shape());
  const Tensor yr = kernels::activation_forward(kernels::Act::ReLU, y);  // pooled values with zeros
  const kernels::CudaSpeedups saved = kernels::cuda_speedups();
  for (bool scatter : {true, false}) {
    kernels::CudaSpeedups s = saved;
    s.pool_scatter = scatter;
    kernels::set_cuda_speedups(s);
    EXPECT_TRUE(same_bits(kernels::max_pool2d_backward(dy, am, c.x, c.p).to_vector<T>(),
                          kernels::max_pool2d_backward(dy.to(g), amg, c.x, c.p).to_vector<T>(), true))
        << "scatter " << scatter;
    EXPECT_TRUE(same_bits(kernels::max_pool2d_relu_backward(dy, yr, am, c.x, c.p).to_vector<T>(),
                          kernels::max_pool2d_relu_backward(dy.to(g), yr.to(g), amg, c.x, c.p).to_vector<T>(), true))
        << "relu, scatter " << scatter;
  }
  kernels::set_cuda_speedups(saved);
}

TEST(PoolIndexCuda, KernelsMatchTheCpuBitForBit) {
  MN_SKIP_IF_NO_CUDA();
  for (const Case& c : cases()) {
    cuda_vs_cpu<float>(c);
    cuda_vs_cpu<double>(c);
  }
  // Koch's pools (batch 150): 96 -> 48, 42 -> 21, 18 -> 9.
  for (const Shape& s : test::sized({{150, 64, 96, 96}, {150, 128, 42, 42}, {150, 128, 18, 18}}))
    cuda_vs_cpu<float>({s, pp(2, 2, 2, 2, 0, 0)});
}

TEST(PoolIndexCuda, FusedBackwardMatchesTheUnfusedOps) {
  MN_SKIP_IF_NO_CUDA();
  for (const Case& c : cases()) {
    fused_vs_composition<float>(c, Device::cuda());
    fused_vs_composition<double>(c, Device::cuda());
  }
}

}  // namespace
}  // namespace mn
