// Whole tensor-core launches emulated on the CPU (tests/kernels/mma_emulator.h): the
// gather tables against the convolution's definition, then the GEMM, the forward, both
// backward-data paths and the split-K weight gradient, each with the loaders, tile
// shapes and epilogues the launchers in kernels/cuda/mma_*.cu use, in TF32 and BF16,
// against float64 references on the same rounded inputs; every launch through the
// kernel's pipeline schedule with late-landing copies, a few also with eager ones, and
// the faults a pipeline can have (a k-tile never multiplied, a ring one stage short, a
// wait one group short) must each fail.
//
// Tolerance, per output element: the emulator adds each MMA's exact sum into float
// accumulators, as the tensor cores do; against a float64 sum of the same rounded
// products the difference is FP32 accumulation error, at most about
// 8 (sqrt(K) + 2 + splits) 2^-24 sum_k |a_k b_k| for that element (K products in
// sequential MMAs, then `splits` partials added). A dropped k-tile removes ~32 products,
// an error of order |ab| sqrt(32): far outside it for every K these cases use.
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
// The per-element bound above; abs_sum[i] = sum_k |a_k b_k| of element i.
std::vector<double> fp32_bounds(int64_t K, int splits, const std::vector<double>& abs_sum) {
  std::vector<double> tol(abs_sum.size());
  for (size_t i = 0; i < tol.size(); ++i)
    tol[i] = 8 * (std::sqrt(double(K)) + 2 + splits) * std::ldexp(1.0, -24) * abs_sum[i] + 1e-30;
  return tol;
}

// How many elements lie outside their tolerance; prints the first few when `report`.
int count_outside(const std::vector<double>& ref, const float* got, const std::vector<double>& tol,
                  const std::string& what, bool report) {
  int bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::abs(double(got[i]) - ref[i]) <= tol[i]) continue;
    if (report && ++bad <= 5)
      ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " expected " << ref[i] << " (tol " << tol[i]
                    << ")";
    else if (!report) ++bad;
  }
  if (report) {
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << ref.size() << " elements outside the tolerance";
  }
  return bad;
}

// A case run correctly must match (report), a case run with a fault must not.
bool faulty(const emu::EmuOptions& o) {
  return o.fault.drop_tile >= 0 || o.fault.short_ring > 0 || o.fault.wait_slack > 0;
}
std::string opt_str(const emu::EmuOptions& o) {
  return std::string(o.landing == emu::Landing::Late ? " late" : " eager") +
         (o.fault.drop_tile >= 0 ? " drop-tile-" + std::to_string(o.fault.drop_tile) : "") +
         (o.fault.short_ring ? " short-ring" : "") + (o.fault.wait_slack ? " short-wait" : "");
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
int emulate_gemm(Math math, int batch, int M, int N, int K, float alpha, float beta, uint64_t seed,
                 const emu::EmuOptions& opt = {}) {
  using Cfg = TileBig;
  using L = StageLayout<Cfg, !TA, TB>;
  const int64_t lda = TA ? M : K, ldb = TB ? K : N, ldc = N;
  const int64_t sa = int64_t(M) * K, sb = int64_t(K) * N, sc = int64_t(M) * N;
  Buf A = rand_buf(size_t(batch * sa), seed), B = rand_buf(size_t(batch * sb), seed + 1);
  Buf C = rand_buf(size_t(batch * sc), seed + 2);
  const std::vector<double> Ar = rounded(A, math), Br = rounded(B, math);
  std::vector<double> ref(size_t(batch * sc)), abs_sum(ref.size());
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
        abs_sum[i] = std::abs(alpha) * a_s + std::abs(beta * C[i]);
      }
  DenseLoader<Cfg, typename L::ATile, V> la;
  la.p = A.p, la.ld = lda, la.x_ext = M;
  DenseLoader<Cfg, typename L::BTile, V> lb;
  lb.p = B.p, lb.ld = ldb, lb.x_ext = N;
  GemmEpilogue epi;
  epi.C = C.p, epi.ldc = ldc, epi.c_zstride = sc, epi.M = M, epi.N = N, epi.alpha = alpha, epi.beta = beta;
  emu::emulate_igemm<Cfg, L>(la, lb, epi, M, N, K, 0, sa, sb, batch, math, {A.span(), B.span()}, nullptr, 0, opt);
  return count_outside(ref, C.p, fp32_bounds(K, 0, abs_sum),
                       std::string("gemm ") + name(math) + " ta=" + std::to_string(TA) + " tb=" + std::to_string(TB) +
                           " V=" + std::to_string(V) + " " + std::to_string(M) + "x" + std::to_string(N) + "x" +
                           std::to_string(K) + opt_str(opt),
                       !faulty(opt));
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
    // Copies landing as they are issued (no refill overwrites a stage in use).
    emulate_gemm<false, false, 4>(m, 2, 132, 136, 68, 0.5f, 0.25f, 11, {emu::Landing::Eager, {}});
    emulate_gemm<true, false, 1>(m, 1, 129, 9, 33, 1.f, 0.f, 17, {emu::Landing::Eager, {}});
  }
}

// ---- convolution forward ------------------------------------------------------------------------
// y (N, K, P, Q) of x and w (K, C, R, S) on the tensor-core path (as forward_cfg).
template <class Cfg, int VA>
void emulate_forward(const ConvGeom32& g, const Buf& x, const Buf& w, const float* bias, float* y, bool relu, Math math,
                     const emu::EmuOptions& opt = {}) {
  using L = StageLayout<Cfg, true, false>;
  const int M = g.K, N = g.N * g.P * g.Q, Kd = g.C * g.R * g.S;
  const std::vector<Entry> kt = table(Kd, Cfg::BK, [&](int i) { return fwd_k_entry(g, i); });
  const std::vector<Entry> nt = table(N, Cfg::BN, [&](int i) { return fwd_n_entry(g, i); });
  DenseLoader<Cfg, typename L::ATile, VA> la;
  la.p = w.p, la.ld = Kd, la.x_ext = M;
  ConvColsLoader<Cfg, typename L::BTile> lb;
  lb.x = x.p, lb.ntab = nt.data(), lb.H = g.H, lb.W = g.W;
  ConvFwdEpilogue epi;
  epi.y = y, epi.bias = bias, epi.M = M, epi.ncols = N, epi.PQ = g.P * g.Q, epi.dPQ = FastDiv(g.P * g.Q), epi.relu = relu;
  emu::emulate_igemm<Cfg, L>(la, lb, epi, M, N, Kd, 0, 0, 0, 1, math, {x.span(), w.span()}, kt.data(), kt.size(), opt);
}

template <class Cfg, int VA>
int check_forward(const ConvGeom32& g, bool with_bias, bool relu, uint64_t seed, const emu::EmuOptions& opt = {}) {
  int bad = 0;
  for (Math m : {Math::TF32, Math::BF16}) {
    Buf x = rand_buf(size_t(g.N) * g.C * g.H * g.W, seed), w = rand_buf(size_t(g.K) * g.C * g.R * g.S, seed + 1, -0.3f, 0.3f);
    Buf b = rand_buf(size_t(g.K), seed + 2);
    Buf y(size_t(g.N) * g.K * g.P * g.Q, std::nanf(""));
    emulate_forward<Cfg, VA>(g, x, w, with_bias ? b.p : nullptr, y.p, relu, m, opt);
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
    std::vector<double> abs_sum =
        conv2d_forward(t64(absv(rounded(x, m)), xs), t64(absv(rounded(w, m)), ws), Tensor(), p).to_double_vector();
    if (with_bias)
      for (size_t i = 0; i < abs_sum.size(); ++i) abs_sum[i] += std::abs(b[(i / size_t(g.P * g.Q)) % size_t(g.K)]);
    bad += count_outside(r, y.p, fp32_bounds(g.C * g.R * g.S, 0, abs_sum),
                         std::string("forward ") + name(m) + " " + gstr(g) + (relu ? " relu" : "") +
                             (with_bias ? " bias" : "") + opt_str(opt),
                         !faulty(opt));
  }
  return bad;
}

TEST(MmaEmulated, ForwardBothTilesBothCopyWidthsBiasAndFusedRelu) {
  // 128 x 128 tiles, 16-byte weight copies (C R S = 36): two M tiles, three N tiles.
  check_forward<TileBig, 4>(geom(2, 4, 12, 12, 130, 3, 3, 1, 1, 1, 1), true, true, 21);
  // ... with every copy landing as it is issued: no refill overwrites a stage in use.
  check_forward<TileBig, 4>(geom(2, 4, 12, 12, 130, 3, 3, 1, 1, 1, 1), true, true, 21, {emu::Landing::Eager, {}});
  // 4-byte copies (C R S = 27), strides, padding, dilation.
  check_forward<TileBig, 1>(geom(2, 3, 13, 11, 70, 3, 3, 2, 1, 1, 2, 2, 1), false, false, 22);
  // 64 x 256 tiles (K <= 64), Koch's first layer in small: C = 1, 10 x 10 kernel.
  check_forward<TileWide, 4>(geom(2, 1, 20, 20, 20, 10, 10), true, true, 23);
  check_forward<TileWide, 4>(geom(2, 1, 20, 20, 20, 10, 10), true, true, 23, {emu::Landing::Eager, {}});
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
      lb.dy = dy.p, lb.ntab = nt.data(), lb.P = g.P, lb.Q = g.Q, lb.dsh = FastDiv(g.sh), lb.dsw = FastDiv(g.sw);
      ConvFwdEpilogue epi;
      epi.y = dx.p, epi.M = M, epi.ncols = N, epi.PQ = g.H * g.W, epi.dPQ = FastDiv(g.H * g.W);
      emu::emulate_igemm<Cfg, L>(la, lb, epi, M, N, Kd, 0, 0, 0, 1, m, {dy.span(), wt.span()}, kt.data(), kt.size());
    }
    const Conv2dParams p = params_of(g);
    const Shape xs{g.N, g.C, g.H, g.W}, ws{g.K, g.C, g.R, g.S}, ys{g.N, g.K, g.P, g.Q};
    const Tensor ref = conv2d_backward_data(t64(rounded(dy, m), ys), t64(rounded(w, m), ws), xs, p);
    const std::vector<double> abs_sum =
        conv2d_backward_data(t64(absv(rounded(dy, m)), ys), t64(absv(rounded(w, m)), ws), xs, p).to_double_vector();
    count_outside(ref.to_double_vector(), dx.p, fp32_bounds(g.K * RS, 0, abs_sum),
                  std::string("backward-data ") + name(m) + " " + gstr(g) +
                      (bwd_data_as_forward(g) ? " (flip)" : " (strided)"),
                  true);
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
// As backward_weight_cfg: split-K over `wave` blocks at once (wave_fit_k_per_split).
template <class Cfg>
int check_backward_weight(const ConvGeom32& g, int64_t wave, int want_splits, uint64_t seed,
                          const emu::EmuOptions& opt = {}) {
  using L = StageLayout<Cfg, true, true>;
  int bad = 0;
  for (Math m : {Math::TF32, Math::BF16}) {
    Buf x = rand_buf(size_t(g.N) * g.C * g.H * g.W, seed), dy = rand_buf(size_t(g.N) * g.K * g.P * g.Q, seed + 1);
    const int M = g.K, N = g.C * g.R * g.S, Kd = g.N * g.P * g.Q;
    const int64_t tiles = int64_t((M + Cfg::BM - 1) / Cfg::BM) * ((N + Cfg::BN - 1) / Cfg::BN);
    const int k_per_z = wave_fit_k_per_split(Kd, tiles, wave, Cfg::BK);
    EXPECT_EQ(k_per_z % Cfg::BK, 0);
    const int splits = (Kd + k_per_z - 1) / k_per_z;
    EXPECT_EQ(splits, want_splits) << gstr(g) << ": " << tiles << " tiles, waves of " << wave;
    const std::vector<Entry> kt = table(Kd, Cfg::BK, [&](int i) { return wgrad_k_entry(g, i); });
    const std::vector<Entry> nt = table(N, Cfg::BN, [&](int i) { return wgrad_n_entry(g, i); });
    WgradDyLoader<Cfg, typename L::ATile> la;
    la.dy = dy.p, la.M = M, la.PQ = g.P * g.Q;
    WgradImgLoader<Cfg, typename L::BTile> lb;
    lb.x = x.p, lb.ntab = nt.data(), lb.H = g.H, lb.W = g.W;
    Buf part(size_t(splits) * M * N, std::nanf(""));
    SplitEpilogue epi;
    epi.out = part.p, epi.M = M, epi.N = N;
    emu::emulate_igemm<Cfg, L>(la, lb, epi, M, N, Kd, k_per_z, 0, 0, splits, m, {x.span(), dy.span()}, kt.data(),
                               kt.size(), opt);
    std::vector<float> dw(size_t(M) * N, 0.f);  // sum_partials, z in order
    for (int z = 0; z < splits; ++z)
      for (size_t i = 0; i < dw.size(); ++i) dw[i] += part[size_t(z) * dw.size() + i];
    const Conv2dParams p = params_of(g);
    const Shape xs{g.N, g.C, g.H, g.W}, ws{g.K, g.C, g.R, g.S}, ys{g.N, g.K, g.P, g.Q};
    const Tensor ref = conv2d_backward_weight(t64(rounded(dy, m), ys), t64(rounded(x, m), xs), ws, p);
    const std::vector<double> abs_sum =
        conv2d_backward_weight(t64(absv(rounded(dy, m)), ys), t64(absv(rounded(x, m)), xs), ws, p).to_double_vector();
    bad += count_outside(ref.to_double_vector(), dw.data(), fp32_bounds(Kd, splits, abs_sum),
                         std::string("backward-weight ") + name(m) + " " + gstr(g) + " splits " +
                             std::to_string(splits) + opt_str(opt),
                         !faulty(opt));
  }
  return bad;
}

TEST(MmaEmulated, WeightGradientSplitKFillsWholeWavesBothTiles) {
  // 1 x 1 tiles, N P Q = 784 (25 k-tiles): waves of 2 blocks -> 2 splits of 13 k-tiles
  // (1 wave x 13 beats 1 x 25; 3 splits would take 2 waves x 9).
  check_backward_weight<TileBig>(geom(4, 3, 14, 14, 70, 3, 3, 1, 1, 1, 1), 2, 2, 41);
  check_backward_weight<TileBig>(geom(4, 3, 14, 14, 70, 3, 3, 1, 1, 1, 1), 2, 2, 41, {emu::Landing::Eager, {}});
  check_backward_weight<TileBig>(geom(2, 5, 13, 11, 130, 3, 2, 2, 1, 1, 2, 2, 1), 1, 1, 42);  // two M tiles, one split
  // 64 x 128 tiles, 2 N tiles, N P Q = 1176 (37 k-tiles), waves of 6: 3 splits of 13.
  check_backward_weight<TileMid>(geom(6, 15, 14, 14, 20, 3, 3), 6, 3, 43);
}

TEST(MmaEmulated, WaveFitSplitsMinimiseWavesTimesSplitLength) {
  // Koch's conv2 weight gradient at 150 images: 25 tiles of 128 x 128, 264,600 k
  // (8,269 k-tiles) on 132 SMs x 2 blocks: 21 splits = 525 blocks, 99.4 % of 2 waves
  // (the old rule, ~4 blocks per SM: 22 splits = 550 blocks, 2.08 waves, a 3rd wave 4 % full).
  EXPECT_EQ((8269 + wave_fit_k_per_split(264600, 25, 264, 32) / 32 - 1) / (wave_fit_k_per_split(264600, 25, 264, 32) / 32), 21);
  // Every split is whole k-tiles, at least 8 of them, and covers k exactly once.
  for (int kd : {32, 100, 255, 256, 257, 4096, 100000})
    for (int64_t tiles : {1, 3, 25, 300})
      for (int64_t wave : {1, 8, 264}) {
        const int kp = wave_fit_k_per_split(kd, tiles, wave, 32);
        ASSERT_EQ(kp % 32, 0);
        const int k_tiles = (kd + 31) / 32, splits = (kd + kp - 1) / kp;
        EXPECT_GE(kp / 32 * splits, k_tiles);
        EXPECT_LT(kp / 32 * (splits - 1), k_tiles);
        if (splits > 1) {
          EXPECT_GE(kp / 32, 8) << kd << " " << tiles << " " << wave;
        }
        // Within 3 % of the best split count, and no smaller count is.
        int64_t best = wave_fit_time(k_tiles, tiles, wave, 1);
        for (int s = 2; s <= k_tiles / 8; ++s) best = std::min(best, wave_fit_time(k_tiles, tiles, wave, s));
        EXPECT_LE(100 * wave_fit_time(k_tiles, tiles, wave, splits), 103 * best) << kd << " " << tiles << " " << wave;
        for (int s = 1; s < splits; ++s)
          EXPECT_GT(100 * wave_fit_time(k_tiles, tiles, wave, s), 103 * best) << kd << " " << tiles << " " << wave;
      }
}

// ---- the pipeline's faults must fail ---------------------------------------------------------------
TEST(MmaEmulated, APipelineThatDropsAKTileOrAStageOrAWaitFails) {
  const ConvGeom32 fwd = geom(2, 4, 12, 12, 130, 3, 3, 1, 1, 1, 1);  // 36 k: 2 k-tiles
  const ConvGeom32 wg = geom(4, 3, 14, 14, 70, 3, 3, 1, 1, 1, 1);     // 2 splits of 13 k-tiles
  for (emu::Landing land : {emu::Landing::Late, emu::Landing::Eager}) {
    emu::EmuOptions drop{land, {}};
    drop.fault.drop_tile = 1;
    EXPECT_GT((emulate_gemm<false, false, 4>(Math::TF32, 1, 132, 136, 68, 1.f, 0.f, 12, drop)), 0) << "gemm, dropped k-tile";
    EXPECT_GT((check_forward<TileBig, 4>(fwd, true, false, 21, drop)), 0) << "forward, dropped k-tile";
    EXPECT_GT(check_backward_weight<TileBig>(wg, 2, 2, 41, drop), 0) << "weight gradient, dropped k-tile";
    emu::EmuOptions ring{land, {}};
    ring.fault.short_ring = 1;
    EXPECT_GT((emulate_gemm<false, false, 4>(Math::TF32, 1, 132, 136, 68, 1.f, 0.f, 12, ring)), 0) << "gemm, short ring";
    EXPECT_GT((check_forward<TileWide, 4>(geom(2, 1, 20, 20, 20, 10, 10), false, false, 23, ring)), 0)
        << "forward (Wide, 2 stages), short ring";
    EXPECT_GT(check_backward_weight<TileMid>(geom(6, 15, 14, 14, 20, 3, 3), 6, 3, 43, ring), 0)
        << "weight gradient (Mid, 4 stages), short ring";
  }
  emu::EmuOptions wait{emu::Landing::Late, {}};
  wait.fault.wait_slack = 1;
  EXPECT_GT((emulate_gemm<false, false, 4>(Math::TF32, 1, 132, 136, 68, 1.f, 0.f, 12, wait)), 0) << "gemm, short wait";
  EXPECT_GT(check_backward_weight<TileBig>(wg, 2, 2, 41, wait), 0) << "weight gradient, short wait";
}

}  // namespace
}  // namespace mn::kernels::mma
