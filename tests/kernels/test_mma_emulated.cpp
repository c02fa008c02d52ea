// Whole tensor-core launches emulated on the CPU (tests/kernels/mma_emulator.h): the
// gather tables against the convolution's definition, then the GEMM, the forward, both
// backward-data paths and the split-K weight gradient, each with the loaders, tile
// shapes and epilogues the launchers in kernels/cuda/mma_*.cu use, in TF32 and BF16,
// against float64 references on the same rounded inputs. The tolerance is explained at
// the top of test_mma_layout.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/conv2d.h"
#include "kernels/mma_layout.h"
#include "tests/kernels/mma_emulator.h"

namespace mn::kernels::mma {
namespace {
using emu::Buf;
using emu::Math;

const char* name(Math m) { return m == Math::TF32 ? "tf32" : "bf16"; }

Buf rand_buf(size_t n, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Buf b(n);
  for (size_t i = 0; i < n; ++i) b[i] = u(g);
  return b;
}
// The inputs as the tensor cores see them, in float64 (exact).
std::vector<double> rounded(const Buf& b, Math m) {
  std::vector<double> v(b.n);
  for (size_t i = 0; i < b.n; ++i) v[i] = emu::round_input(b[i], m);
  return v;
}
double fp32_bound(int64_t K, double mag) { return 8 * (std::sqrt(double(K)) + 2) * std::ldexp(1.0, -24) * mag + 1e-30; }

// |got - ref| <= tol everywhere; prints the first mismatches.
void expect_close(const std::vector<double>& ref, const float* got, double tol, const std::string& what) {
  int bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::abs(double(got[i]) - ref[i]) <= tol) continue;
    if (++bad <= 5) ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " expected " << ref[i] << " (tol " << tol << ")";
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << ref.size() << " elements outside the tolerance";
}

std::vector<Entry> table(int n_real, int pad, const std::function<Entry(int)>& f) {
  std::vector<Entry> t(size_t(round_up(std::max(n_real, 1), pad)));
  for (size_t i = 0; i < t.size(); ++i) t[i] = int(i) < n_real ? f(int(i)) : bad_entry();
  return t;
}

ConvGeom32 geom(int N, int C, int H, int W, int K, int R, int S, int sh = 1, int sw = 1, int ph = 0, int pw = 0,
                int dh = 1, int dw = 1) {
  ConvGeom32 g{N, C, H, W, K, R, S, 0, 0, sh, sw, ph, pw, dh, dw};
  g.P = (H + 2 * ph - dh * (R - 1) - 1) / sh + 1;
  g.Q = (W + 2 * pw - dw * (S - 1) - 1) / sw + 1;
  return g;
}
Conv2dParams params_of(const ConvGeom32& g) {
  Conv2dParams p;
  p.stride_h = g.sh, p.stride_w = g.sw, p.pad_h = g.ph, p.pad_w = g.pw, p.dilation_h = g.dh, p.dilation_w = g.dw;
  p.algo = Conv2dAlgo::Direct;
  return p;
}
Tensor t64(const std::vector<double>& v, const Shape& s) { return Tensor::from_vector(v, s); }
std::vector<double> absv(std::vector<double> v) {
  for (double& x : v) x = std::abs(x);
  return v;
}
double maxv(const Tensor& t) {
  double m = 0;
  for (double x : t.to_double_vector()) m = std::max(m, std::abs(x));
  return m;
}
std::string gstr(const ConvGeom32& g) {
  return "x(" + std::to_string(g.N) + "," + std::to_string(g.C) + "," + std::to_string(g.H) + "," + std::to_string(g.W) +
         ") w(" + std::to_string(g.K) + "," + std::to_string(g.R) + "," + std::to_string(g.S) + ") s" +
         std::to_string(g.sh) + std::to_string(g.sw) + " p" + std::to_string(g.ph) + std::to_string(g.pw) + " d" +
         std::to_string(g.dh) + std::to_string(g.dw);
}

// ---- the gather tables against the convolution's definition --------------------------------------
TEST(MmaTables, EntriesAddressTheConvolutionsElements) {
  for (const ConvGeom32& g : {geom(2, 1, 105, 105, 4, 10, 10), geom(1, 3, 24, 24, 5, 7, 7), geom(2, 3, 13, 11, 7, 3, 2, 2, 1, 1, 2, 2, 1),
                              geom(2, 2, 11, 10, 3, 2, 3, 1, 2, 2, 1, 2, 3), geom(1, 2, 9, 9, 3, 4, 4)}) {
    const int HW = g.H * g.W, PQ = g.P * g.Q, RS = g.R * g.S;
    // Forward: im2col element (k = c r s, n = img p q).
    for (int k = 0; k < g.C * RS; ++k)
      for (int n = 0; n < g.N * PQ; ++n) {
        const Entry ke = fwd_k_entry(g, k), ne = fwd_n_entry(g, n);
        const int c = k / RS, r = (k % RS) / g.S, s = k % g.S, img = n / PQ, p = (n % PQ) / g.Q, q = n % g.Q;
        const int h = p * g.sh - g.ph + r * g.dh, w = q * g.sw - g.pw + s * g.dw;
        const bool in = h >= 0 && h < g.H && w >= 0 && w < g.W;
        ASSERT_EQ(inside(ke.h + ne.h, ke.w + ne.w, g.H, g.W), in) << gstr(g) << " fwd k " << k << " n " << n;
        if (in) {
          ASSERT_EQ(ke.off + ne.off, ((img * g.C + c) * g.H + h) * g.W + w) << gstr(g) << " fwd k " << k << " n " << n;
        }
      }
    // Weight gradient: k = img p q, row = c r s; dy offset aux + m P Q.
    for (int k = 0; k < g.N * PQ; ++k) {
      const Entry ke = wgrad_k_entry(g, k);
      const int img = k / PQ, p = (k % PQ) / g.Q, q = k % g.Q;
      EXPECT_EQ(ke.aux, img * g.K * PQ + p * g.Q + q);
      for (int n = 0; n < g.C * RS; ++n) {
        const Entry ne = wgrad_n_entry(g, n);
        const int c = n / RS, r = (n % RS) / g.S, s = n % g.S;
        const int h = p * g.sh - g.ph + r * g.dh, w = q * g.sw - g.pw + s * g.dw;
        const bool in = h >= 0 && h < g.H && w >= 0 && w < g.W;
        ASSERT_EQ(inside(ke.h + ne.h, ke.w + ne.w, g.H, g.W), in) << gstr(g) << " wgrad k " << k << " n " << n;
        if (in) {
          ASSERT_EQ(ke.off + ne.off, ((img * g.C + c) * g.H + h) * g.W + w);
        }
      }
    }
    // Backward-data (strided gather): k = k_out r s, n = img h w.
    for (int k = 0; k < g.K * RS; ++k)
      for (int n = 0; n < g.N * HW; ++n) {
        const Entry ke = bwd_data_k_entry(g, k), ne = bwd_data_n_entry(g, n);
        const int ko = k / RS, r = (k % RS) / g.S, s = k % g.S, img = n / HW, h = (n % HW) / g.W, w = n % g.W;
        const int ps = h + g.ph - r * g.dh, qs = w + g.pw - s * g.dw;
        const bool in = ps >= 0 && qs >= 0 && ps % g.sh == 0 && qs % g.sw == 0 && ps / g.sh < g.P && qs / g.sw < g.Q;
        ASSERT_EQ(ke.h + ne.h, ps);
        ASSERT_EQ(ke.w + ne.w, qs);
        if (in) {
          ASSERT_EQ(ke.off + ne.off + (ps / g.sh) * g.Q + qs / g.sw, ((img * g.K + ko) * g.P + ps / g.sh) * g.Q + qs / g.sw);
        }
      }
    EXPECT_FALSE(inside(bad_entry().h + 5, 0, g.H, g.W));
  }
}

// ---- GEMM ------------------------------------------------------------------------------------------
template <bool TA, bool TB, int V>
void emulate_gemm(Math math, int batch, int M, int N, int K, float alpha, float beta, uint64_t seed) {
  using Cfg = TileBig;
  using L = StageLayout<Cfg, !TA, TB>;
  const int64_t lda = TA ? M : K, ldb = TB ? K : N, ldc = N;
  const int64_t sa = int64_t(M) * K, sb = int64_t(K) * N, sc = int64_t(M) * N;
  Buf A = rand_buf(size_t(batch * sa), seed), B = rand_buf(size_t(batch * sb), seed + 1);
  Buf C = rand_buf(size_t(batch * sc), seed + 2);
  const std::vector<double> Ar = rounded(A, math), Br = rounded(B, math);
  std::vector<double> ref(size_t(batch * sc));
  double mag = 0;
  for (int b = 0; b < batch; ++b)
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        double s = 0, a_s = 0;
        for (int k = 0; k < K; ++k) {
          const double a = Ar[size_t(b * sa + (TA ? int64_t(k) * lda + m : int64_t(m) * lda + k))];
          const double bb = Br[size_t(b * sb + (TB ? int64_t(n) * ldb + k : int64_t(k) * ldb + n))];
          s += a * bb, a_s += std::abs(a * bb);
        }
        const size_t i = size_t(b * sc + int64_t(m) * ldc + n);
        ref[i] = alpha * s + beta * double(C[i]);
        mag = std::max(mag, std::abs(alpha) * a_s + std::abs(beta * C[i]));
      }
  DenseLoader<Cfg, typename L::ATile, V> la;
  la.p = A.p, la.ld = lda, la.x_ext = M;
  DenseLoader<Cfg, typename L::BTile, V> lb;
  lb.p = B.p, lb.ld = ldb, lb.x_ext = N;
  GemmEpilogue epi;
  epi.C = C.p, epi.ldc = ldc, epi.c_zstride = sc, epi.M = M, epi.N = N, epi.alpha = alpha, epi.beta = beta;
  emu::emulate_igemm<Cfg, L>(la, lb, epi, M, N, K, 0, sa, sb, batch, math, {A.span(), B.span()});
  expect_close(ref, C.p, fp32_bound(K, mag),
               std::string("gemm ") + name(math) + " ta=" + std::to_string(TA) + " tb=" + std::to_string(TB) + " V=" +
                   std::to_string(V) + " " + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K));
}

TEST(MmaEmulated, GemmAllTransposesBothCopyWidthsBatchedAlphaBeta) {
  for (Math m : {Math::TF32, Math::BF16}) {
    // 16-byte copies: inner extents multiples of 4; two M and two N tiles, the last partial.
    emulate_gemm<false, false, 4>(m, 2, 132, 136, 68, 0.5f, 0.25f, 11);
    emulate_gemm<false, true, 4>(m, 1, 132, 136, 68, 1.f, 0.f, 12);
    emulate_gemm<true, false, 4>(m, 1, 132, 136, 68, 1.f, 0.f, 13);
    emulate_gemm<true, true, 4>(m, 2, 132, 136, 68, -1.f, 1.f, 14);
    // 4-byte copies: odd sizes, K not a multiple of the 32-deep k-tile.
    emulate_gemm<false, false, 1>(m, 1, 70, 131, 45, 1.f, 0.f, 15);
    emulate_gemm<false, true, 1>(m, 2, 70, 131, 45, 0.5f, 0.5f, 16);
    emulate_gemm<true, false, 1>(m, 1, 129, 9, 33, 1.f, 0.f, 17);
    emulate_gemm<true, true, 1>(m, 1, 17, 130, 7, 1.f, 0.f, 18);
  }
}

// ---- convolution forward ------------------------------------------------------------------------
// y (N, K, P, Q) of x and w (K, C, R, S) on the tensor-core path (as forward_cfg).
template <class Cfg, int VA>
void emulate_forward(const ConvGeom32& g, const Buf& x, const Buf& w, const float* bias, float* y, bool relu, Math math) {
  using L = StageLayout<Cfg, true, false>;
  const int M = g.K, N = g.N * g.P * g.Q, Kd = g.C * g.R * g.S;
  const std::vector<Entry> kt = table(Kd, Cfg::BK, [&](int i) { return fwd_k_entry(g, i); });
  const std::vector<Entry> nt = table(N, Cfg::BN, [&](int i) { return fwd_n_entry(g, i); });
  DenseLoader<Cfg, typename L::ATile, VA> la;
  la.p = w.p, la.ld = Kd, la.x_ext = M;
  ConvColsLoader<Cfg, typename L::BTile> lb;
  lb.x = x.p, lb.ktab = kt.data(), lb.ntab = nt.data(), lb.H = g.H, lb.W = g.W;
  ConvFwdEpilogue epi;
  epi.y = y, epi.bias = bias, epi.M = M, epi.ncols = N, epi.PQ = g.P * g.Q, epi.dPQ = FastDiv(g.P * g.Q), epi.relu = relu;
  emu::emulate_igemm<Cfg, L>(la, lb, epi, M, N, Kd, 0, 0, 0, 1, math, {x.span(), w.span()});
}

template <class Cfg, int VA>
void check_forward(const ConvGeom32& g, bool with_bias, bool relu, uint64_t seed) {
  for (Math m : {Math::TF32, Math::BF16}) {
    Buf x = rand_buf(size_t(g.N) * g.C * g.H * g.W, seed), w = rand_buf(size_t(g.K) * g.C * g.R * g.S, seed + 1, -0.3f, 0.3f);
    Buf b = rand_buf(size_t(g.K), seed + 2);
    Buf y(size_t(g.N) * g.K * g.P * g.Q, std::nanf(""));
    emulate_forward<Cfg, VA>(g, x, w, with_bias ? b.p : nullptr, y.p, relu, m);
    const Conv2dParams p = params_of(g);
    const Shape xs{g.N, g.C, g.H, g.W}, ws{g.K, g.C, g.R, g.S};
    Tensor bt;
    if (with_bias) {
      std::vector<double> bv(b.p, b.p + g.K);
      bt = t64(bv, {g.K});
    }
    const Tensor ref = conv2d_forward(t64(rounded(x, m), xs), t64(rounded(w, m), ws), bt, p);
    std::vector<double> r = ref.to_double_vector();
    if (relu)
      for (double& v : r) v = v > 0 ? v : 0;
    const double mag = maxv(conv2d_forward(t64(absv(rounded(x, m)), xs), t64(absv(rounded(w, m)), ws), Tensor(), p)) + 1;
    expect_close(r, y.p, fp32_bound(g.C * g.R * g.S, mag),
                 std::string("forward ") + name(m) + " " + gstr(g) + (relu ? " relu" : "") + (with_bias ? " bias" : ""));
  }
}

TEST(MmaEmulated, ForwardBothTilesBothCopyWidthsBiasAndFusedRelu) {
  // 128 x 128 tiles, 16-byte weight copies (C R S = 36): two M tiles, three N tiles.
  check_forward<TileBig, 4>(geom(2, 4, 12, 12, 130, 3, 3, 1, 1, 1, 1), true, true, 21);
  // 4-byte copies (C R S = 27), strides, padding, dilation.
  check_forward<TileBig, 1>(geom(2, 3, 13, 11, 70, 3, 3, 2, 1, 1, 2, 2, 1), false, false, 22);
  // 64 x 256 tiles (K <= 64), Koch's first layer in small: C = 1, 10 x 10 kernel.
  check_forward<TileWide, 4>(geom(2, 1, 20, 20, 20, 10, 10), true, true, 23);
  check_forward<TileWide, 1>(geom(1, 3, 9, 30, 5, 3, 3, 1, 2, 0, 1), true, false, 24);
}

// ---- backward-data -------------------------------------------------------------------------------
void check_backward_data(const ConvGeom32& g, uint64_t seed) {
  for (Math m : {Math::TF32, Math::BF16}) {
    Buf dy = rand_buf(size_t(g.N) * g.K * g.P * g.Q, seed), w = rand_buf(size_t(g.K) * g.C * g.R * g.S, seed + 1);
    Buf dx(size_t(g.N) * g.C * g.H * g.W, std::nanf(""));
    const int RS = g.R * g.S;
    Buf wt(w.n);
    if (bwd_data_as_forward(g)) {  // as mma_conv_backward_data_cuda: flipped weights, forward geometry
      for (size_t i = 0; i < w.n; ++i) wt[i] = w[size_t(transposed_weight_src(int64_t(i), g.K, g.C, RS, true))];
      const ConvGeom32 f = bwd_data_forward_geometry(g);
      if (f.K <= 64) emulate_forward<TileWide, 1>(f, dy, wt, nullptr, dx.p, false, m);
      else emulate_forward<TileBig, 1>(f, dy, wt, nullptr, dx.p, false, m);
    } else {  // as backward_data_strided
      for (size_t i = 0; i < w.n; ++i) wt[i] = w[size_t(transposed_weight_src(int64_t(i), g.K, g.C, RS, false))];
      using Cfg = TileBig;
      using L = StageLayout<Cfg, true, false>;
      const int M = g.C, N = g.N * g.H * g.W, Kd = g.K * RS;
      const std::vector<Entry> kt = table(Kd, Cfg::BK, [&](int i) { return bwd_data_k_entry(g, i); });
      const std::vector<Entry> nt = table(N, Cfg::BN, [&](int i) { return bwd_data_n_entry(g, i); });
      DenseLoader<Cfg, typename L::ATile, 1> la;
      la.p = wt.p, la.ld = Kd, la.x_ext = M;
      ConvBwdDataColsLoader<Cfg, typename L::BTile> lb;
      lb.dy = dy.p, lb.ktab = kt.data(), lb.ntab = nt.data(), lb.P = g.P, lb.Q = g.Q, lb.dsh = FastDiv(g.sh),
      lb.dsw = FastDiv(g.sw);
      ConvFwdEpilogue epi;
      epi.y = dx.p, epi.M = M, epi.ncols = N, epi.PQ = g.H * g.W, epi.dPQ = FastDiv(g.H * g.W);
      emu::emulate_igemm<Cfg, L>(la, lb, epi, M, N, Kd, 0, 0, 0, 1, m, {dy.span(), wt.span()});
    }
    const Conv2dParams p = params_of(g);
    const Shape xs{g.N, g.C, g.H, g.W}, ws{g.K, g.C, g.R, g.S}, ys{g.N, g.K, g.P, g.Q};
    const Tensor ref = conv2d_backward_data(t64(rounded(dy, m), ys), t64(rounded(w, m), ws), xs, p);
    const double mag = maxv(conv2d_backward_data(t64(absv(rounded(dy, m)), ys), t64(absv(rounded(w, m)), ws), xs, p));
    expect_close(ref.to_double_vector(), dx.p, fp32_bound(g.K * RS, mag),
                 std::string("backward-data ") + name(m) + " " + gstr(g) + (bwd_data_as_forward(g) ? " (flip)" : " (strided)"));
  }
}

TEST(MmaEmulated, BackwardDataFlippedForwardAndStridedGather) {
  check_backward_data(geom(2, 70, 12, 12, 6, 3, 3), 31);               // stride 1: forward with K' = 70 (Big)
  check_backward_data(geom(2, 5, 14, 13, 9, 4, 4, 1, 1, 1, 0), 32);     // stride 1, padding: K' = 5 (Wide)
  check_backward_data(geom(2, 5, 13, 11, 7, 3, 2, 2, 1, 1, 2, 2, 1), 33);  // strided, dilated
  check_backward_data(geom(1, 130, 9, 10, 3, 2, 3, 2, 3, 1, 1), 34);    // strided, two M tiles
  check_backward_data(geom(1, 3, 6, 6, 4, 3, 3, 1, 1, 3, 0), 35);       // padding > R-1: the gather path at stride 1
}

// ---- weight gradient ---------------------------------------------------------------------------------
template <class Cfg>
void check_backward_weight(const ConvGeom32& g, int64_t target_blocks, uint64_t seed) {
  using L = StageLayout<Cfg, true, true>;
  for (Math m : {Math::TF32, Math::BF16}) {
    Buf x = rand_buf(size_t(g.N) * g.C * g.H * g.W, seed), dy = rand_buf(size_t(g.N) * g.K * g.P * g.Q, seed + 1);
    const int M = g.K, N = g.C * g.R * g.S, Kd = g.N * g.P * g.Q;
    const int64_t tiles = int64_t((M + Cfg::BM - 1) / Cfg::BM) * ((N + Cfg::BN - 1) / Cfg::BN);
    const int k_per_z = wgrad_k_per_split(Kd, tiles, target_blocks, Cfg::BK);
    ASSERT_EQ(k_per_z % Cfg::BK, 0);
    const int splits = (Kd + k_per_z - 1) / k_per_z;
    const std::vector<Entry> kt = table(Kd, Cfg::BK, [&](int i) { return wgrad_k_entry(g, i); });
    const std::vector<Entry> nt = table(N, Cfg::BN, [&](int i) { return wgrad_n_entry(g, i); });
    WgradDyLoader<Cfg, typename L::ATile> la;
    la.dy = dy.p, la.ktab = kt.data(), la.M = M, la.PQ = g.P * g.Q;
    WgradImgLoader<Cfg, typename L::BTile> lb;
    lb.x = x.p, lb.ktab = kt.data(), lb.ntab = nt.data(), lb.H = g.H, lb.W = g.W;
    Buf part(size_t(splits) * M * N, std::nanf(""));
    SplitEpilogue epi;
    epi.out = part.p, epi.M = M, epi.N = N;
    emu::emulate_igemm<Cfg, L>(la, lb, epi, M, N, Kd, k_per_z, 0, 0, splits, m, {x.span(), dy.span()});
    std::vector<float> dw(size_t(M) * N, 0.f);  // sum_partials, z in order
    for (int z = 0; z < splits; ++z)
      for (size_t i = 0; i < dw.size(); ++i) dw[i] += part[size_t(z) * dw.size() + i];
    const Conv2dParams p = params_of(g);
    const Shape xs{g.N, g.C, g.H, g.W}, ws{g.K, g.C, g.R, g.S}, ys{g.N, g.K, g.P, g.Q};
    const Tensor ref = conv2d_backward_weight(t64(rounded(dy, m), ys), t64(rounded(x, m), xs), ws, p);
    const double mag = maxv(conv2d_backward_weight(t64(absv(rounded(dy, m)), ys), t64(absv(rounded(x, m)), xs), ws, p));
    expect_close(ref.to_double_vector(), dw.data(), fp32_bound(Kd, mag) * (1 + splits),
                 std::string("backward-weight ") + name(m) + " " + gstr(g) + " splits " + std::to_string(splits));
    if (target_blocks > tiles) {
      EXPECT_GT(splits, 1) << "the case was meant to split";
    }
  }
}

TEST(MmaEmulated, WeightGradientSplitKBothTiles) {
  check_backward_weight<TileBig>(geom(4, 3, 14, 14, 70, 3, 3, 1, 1, 1, 1), 8, 41);        // 1 x 1 tiles, N P Q = 784: 3 splits
  check_backward_weight<TileBig>(geom(2, 5, 13, 11, 130, 3, 2, 2, 1, 1, 2, 2, 1), 1, 42);  // two M tiles, one split
  check_backward_weight<TileMid>(geom(6, 15, 14, 14, 20, 3, 3), 5, 43);                    // 64 x 128 tiles, 2 N tiles, 3 splits
}

}  // namespace
}  // namespace mn::kernels::mma
