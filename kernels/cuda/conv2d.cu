// CUDA conv2d: forward, backward-data, backward-weight, backward-bias.
//
// Versions (Conv2dAlgo, see kernels/conv2d.h):
//   0 Direct: one thread per output element; loops over the reduction. Simple,
//             obviously correct, slow: the GPU oracle next to the CPU loops.
//   1 Gemm:   implicit GEMM. One templated tiled kernel (igemm_kernel) computes
//             C (M x Ncols) = A (M x Kd) * B (Kd x Ncols) where A and B are never
//             materialised: an "op" functor gathers their elements from the tensors
//             (zero for padding) and scatters C back:
//               forward          M = K, Ncols = N*P*Q, Kd = C*R*S (A = weight, B = im2col(x))
//               backward-data    M = C, Ncols = N*H*W, Kd = K*R*S (A = weight^T, B = "col(dy)")
//                                with stride 1: the forward op on dy and the weights
//                                flipped and transposed (conv_flip_weights), padding
//                                dh*(R-1) - ph (CudaSpeedups in kernels/gemm_config.h)
//               backward-weight  M = K, Ncols = C*R*S, Kd = N*P*Q (A = dy, B = im2col(x)^T)
//             float (igemm_big_kernel): BM x BN outputs per 256-thread block (128 x
//             128; 64 x 256 or 64 x 128 when M <= 64), 8-deep K slices double-buffered
//             in shared memory with the next slice gathered into registers during the
//             FMAs; each thread accumulates (BM/16) x (BN/16) outputs read as float4. double
//             (igemm_kernel, the float64 oracle path): 64 x 64 tiles, 16-deep
//             slices, a 4 x 4 register tile at rows ty + 16 i, columns tx + 16 j.
//             Each thread loads a fixed B column, so the column's index decode is
//             hoisted out of the K loop; the per-element decodes of the K index use
//             multiply-shift division (kernels/fastdiv.h), not `/`. Backward-weight has a long reduction (N*P*Q) and a small
//             output, so it splits Kd over gridDim.z and a second kernel sums the
//             partials in a fixed order (deterministic, no atomics).
//   1 Gemm with TF32 or BF16 (float, when kernels::conv_precision() says so, see
//             kernels/gemm_config.h): our mma.sync implicit GEMM (kernels/cuda/mma_conv.cu:
//             cp.async pipeline, ldmatrix, gather tables; all three passes, any stride),
//             and there the fused bias + ReLU epilogue (conv2d_forward_relu_fused_cuda).
//             With CudaSpeedups::tc_mma off, TF32 runs the older igemm_tf32_kernel, the same implicit GEMM and
//             the same op functors on tensor cores. 64 x 128 outputs per 256-thread
//             block (8 warps in a 2 x 4 grid, each 32 x 32 = 2 x 2 WMMA m16n16k8
//             TF32 fragments, float accumulators), BK = 16. Gathered elements are
//             rounded to TF32 on their way into shared memory (As[m][k], Bs[k][n]);
//             the next k-tile is gathered into registers while the current one is
//             multiplied (double-buffered shared memory, one barrier per k-tile).
//             Fragments leave through a per-warp 16x16 shared scratch and op.store,
//             bounds-checked. Split-K for backward-weight as above (deterministic).
//             Compiled for sm_80+ only; the host refuses older devices.
// Index decodes use 32-bit arithmetic (checked on the host: every extent < 2^31).
#include <mma.h>

#include <algorithm>
#include <climits>
#include <type_traits>

#include "kernels/conv2d.h"
#include "kernels/cuda/mma.h"
#include "kernels/fastdiv.h"
#include "kernels/gemm_config.h"
#include "runtime/cuda_check.h"

namespace mn::kernels {
namespace {

// 32-bit copy of the geometry for the device.
struct G {
  int N, C, H, W, K, R, S, P, Q, sh, sw, ph, pw, dh, dw;
  // Multiply-shift dividers for the implicit-GEMM index decodes (kernels/fastdiv.h).
  FastDiv dRS, dS, dPQ, dQ, dHW, dW, dsh, dsw;
};

G to_device_geom(const Conv2dGeom& g) {
  const int64_t biggest =
      std::max({g.N * g.C * g.H * g.W, g.N * g.K * g.P * g.Q, g.K * g.C * g.R * g.S});
  MN_CHECK(biggest < INT_MAX, "conv2d (cuda): tensors with 2^31 or more elements are not supported: ",
           conv2d_geom_str(g));
  G d{};
  d.N = int(g.N), d.C = int(g.C), d.H = int(g.H), d.W = int(g.W), d.K = int(g.K);
  d.R = int(g.R), d.S = int(g.S), d.P = int(g.P), d.Q = int(g.Q);
  d.sh = int(g.sh), d.sw = int(g.sw), d.ph = int(g.ph), d.pw = int(g.pw), d.dh = int(g.dh), d.dw = int(g.dw);
  d.dRS = FastDiv(std::max<int64_t>(1, g.R * g.S));
  d.dS = FastDiv(std::max<int64_t>(1, g.S));
  d.dPQ = FastDiv(std::max<int64_t>(1, g.P * g.Q));
  d.dQ = FastDiv(std::max<int64_t>(1, g.Q));
  d.dHW = FastDiv(std::max<int64_t>(1, g.H * g.W));
  d.dW = FastDiv(std::max<int64_t>(1, g.W));
  d.dsh = FastDiv(std::max<int64_t>(1, g.sh));
  d.dsw = FastDiv(std::max<int64_t>(1, g.sw));
  return d;
}

// ============================ version 0: direct ===============================
template <typename T>
__global__ void conv_fwd_direct(G g, const T* __restrict__ x, const T* __restrict__ w,
                                const T* __restrict__ b, T* __restrict__ y, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int q = int(i % g.Q), p = int((i / g.Q) % g.P), k = int((i / (int64_t(g.Q) * g.P)) % g.K);
    const int n = int(i / (int64_t(g.Q) * g.P * g.K));
    T acc = b ? b[k] : T(0);
    for (int c = 0; c < g.C; ++c)
      for (int r = 0; r < g.R; ++r) {
        const int h = p * g.sh - g.ph + r * g.dh;
        if (h < 0 || h >= g.H) continue;
        for (int s = 0; s < g.S; ++s) {
          const int ww = q * g.sw - g.pw + s * g.dw;
          if (ww < 0 || ww >= g.W) continue;
          acc += w[((int64_t(k) * g.C + c) * g.R + r) * g.S + s] *
                 x[((int64_t(n) * g.C + c) * g.H + h) * g.W + ww];
        }
      }
    y[i] = acc;
  }
}

template <typename T>
__global__ void conv_bwd_data_direct(G g, const T* __restrict__ dy, const T* __restrict__ w,
                                     T* __restrict__ dx, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int ww = int(i % g.W), h = int((i / g.W) % g.H), c = int((i / (int64_t(g.W) * g.H)) % g.C);
    const int n = int(i / (int64_t(g.W) * g.H * g.C));
    T acc = 0;
    for (int k = 0; k < g.K; ++k)
      for (int r = 0; r < g.R; ++r) {
        const int ps = h + g.ph - r * g.dh;  // = p * sh
        if (ps < 0 || ps % g.sh != 0 || ps / g.sh >= g.P) continue;
        const int p = ps / g.sh;
        for (int s = 0; s < g.S; ++s) {
          const int qs = ww + g.pw - s * g.dw;
          if (qs < 0 || qs % g.sw != 0 || qs / g.sw >= g.Q) continue;
          acc += dy[((int64_t(n) * g.K + k) * g.P + p) * g.Q + qs / g.sw] *
                 w[((int64_t(k) * g.C + c) * g.R + r) * g.S + s];
        }
      }
    dx[i] = acc;
  }
}

template <typename T>
__global__ void conv_bwd_weight_direct(G g, const T* __restrict__ x, const T* __restrict__ dy,
                                       T* __restrict__ dw, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int s = int(i % g.S), r = int((i / g.S) % g.R), c = int((i / (g.S * g.R)) % g.C);
    const int k = int(i / (int64_t(g.S) * g.R * g.C));
    T acc = 0;
    for (int n = 0; n < g.N; ++n)
      for (int p = 0; p < g.P; ++p) {
        const int h = p * g.sh - g.ph + r * g.dh;
        if (h < 0 || h >= g.H) continue;
        for (int q = 0; q < g.Q; ++q) {
          const int ww = q * g.sw - g.pw + s * g.dw;
          if (ww < 0 || ww >= g.W) continue;
          acc += dy[((int64_t(n) * g.K + k) * g.P + p) * g.Q + q] *
                 x[((int64_t(n) * g.C + c) * g.H + h) * g.W + ww];
        }
      }
    dw[i] = acc;
  }
}

// db[k] = sum over n, p, q of dy[n, k, p, q]: one block per k, fixed-order tree.
template <typename T>
__global__ void conv_bwd_bias(G g, const T* __restrict__ dy, T* __restrict__ db, int n_per_split) {
  __shared__ T red[256];
  const int k = blockIdx.x;
  const int PQ = g.P * g.Q;
  // Block (k, z) sums images [z * n_per_split, ...) of channel k into db[z * K + k].
  const int n0 = blockIdx.y * n_per_split, n1 = min(g.N, n0 + n_per_split);
  T acc = 0;
  for (int n = n0; n < n1; ++n) {
    const T* row = dy + (int64_t(n) * g.K + k) * PQ;
    for (int i = threadIdx.x; i < PQ; i += blockDim.x) acc += row[i];
  }
  red[threadIdx.x] = acc;
  __syncthreads();
  for (int o = blockDim.x / 2; o > 0; o >>= 1) {
    if (threadIdx.x < o) red[threadIdx.x] += red[threadIdx.x + o];
    __syncthreads();
  }
  if (threadIdx.x == 0) db[int64_t(blockIdx.y) * g.K + k] = red[0];
}

// wf[c, k, rs] = w[k, c, RS-1-rs]: the weights of a stride-1 backward-data run as a
// forward convolution (reversing the flattened rs index flips both r and s).
template <typename T>
__global__ void conv_flip_weights(const T* __restrict__ w, T* __restrict__ wf, int K, int C, int RS,
                                  int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int rs = int(i % RS), k = int((i / RS) % K), c = int(i / (int64_t(RS) * K));
    wf[i] = w[(int64_t(k) * C + c) * RS + (RS - 1 - rs)];
  }
}

// ========================= version 1: implicit GEMM ===========================
constexpr int BM = 64, BN = 64, BK = 16, NT = 256;

// Forward: A = w (K, CRS), B[crs, npq] = x gathered, C -> y (+ bias).
template <typename T>
struct FwdOp {
  G g;
  const T* x;
  const T* w;
  const T* b;
  T* y;
  int CRS, RS, PQ;
  struct Col {
    bool valid;
    int n, hb, wb;     // image, top-left input row/col of the window
    int64_t yoff;      // offset of y[n, 0, p, q]
  };
  __device__ Col col(int j, int ncols) const {
    Col c{j < ncols, 0, 0, 0, 0};
    if (!c.valid) return c;
    int pq, q;
    const int n = g.dPQ.divmod(j, pq), p = g.dQ.divmod(pq, q);
    c.n = n, c.hb = p * g.sh - g.ph, c.wb = q * g.sw - g.pw;
    c.yoff = int64_t(n) * g.K * PQ + pq;
    return c;
  }
  __device__ T a(int m, int kk) const { return w[int64_t(m) * CRS + kk]; }
  __device__ T bval(int kk, const Col& c) const {
    int rs, s;
    const int ch = g.dRS.divmod(kk, rs), r = g.dS.divmod(rs, s);
    const int h = c.hb + r * g.dh, ww = c.wb + s * g.dw;
    if (h < 0 || h >= g.H || ww < 0 || ww >= g.W) return T(0);
    return x[((int64_t(c.n) * g.C + ch) * g.H + h) * g.W + ww];
  }
  __device__ void store(int m, const Col& c, T v, int) const {
    y[c.yoff + int64_t(m) * PQ] = v + (b ? b[m] : T(0));
  }
};

// Backward-data: A[c, krs] = w[k, c, r, s], B[krs, nhw] = dy gathered, C -> dx.
template <typename T>
struct BwdDataOp {
  G g;
  const T* dy;
  const T* w;
  T* dx;
  int RS, HW, PQ;
  struct Col {
    bool valid;
    int n, hp, wp;     // h + ph, w + pw
    int64_t xoff;      // offset of dx[n, 0, h, w]
  };
  __device__ Col col(int j, int ncols) const {
    Col c{j < ncols, 0, 0, 0, 0};
    if (!c.valid) return c;
    int hw, ww;
    const int n = g.dHW.divmod(j, hw), h = g.dW.divmod(hw, ww);
    c.n = n, c.hp = h + g.ph, c.wp = ww + g.pw;
    c.xoff = int64_t(n) * g.C * HW + hw;
    return c;
  }
  __device__ T a(int m, int kk) const {
    int rs;
    const int k = g.dRS.divmod(kk, rs);
    return w[(int64_t(k) * g.C + m) * RS + rs];
  }
  __device__ T bval(int kk, const Col& c) const {
    int rs, s;
    const int k = g.dRS.divmod(kk, rs), r = g.dS.divmod(rs, s);
    const int ps = c.hp - r * g.dh, qs = c.wp - s * g.dw;
    if (ps < 0 || qs < 0) return T(0);
    int ph, pw;
    const int p = g.dsh.divmod(ps, ph), q = g.dsw.divmod(qs, pw);
    if (ph != 0 || pw != 0 || p >= g.P || q >= g.Q) return T(0);
    return dy[(int64_t(c.n) * g.K + k) * PQ + p * g.Q + q];
  }
  __device__ void store(int m, const Col& c, T v, int) const { dx[c.xoff + int64_t(m) * HW] = v; }
};

// Backward-weight: A[k, npq] = dy, B[npq, crs] = x gathered, C -> partial[z] (K, CRS).
template <typename T>
struct BwdWeightOp {
  G g;
  const T* x;
  const T* dy;
  T* out;  // (splits, K, CRS)
  int CRS, RS, PQ;
  struct Col {
    bool valid;
    int c, roff, soff;  // channel, r*dh - ph, s*dw - pw
    int j;
  };
  __device__ Col col(int j, int ncols) const {
    Col c{j < ncols, 0, 0, 0, j};
    if (!c.valid) return c;
    int rs, s;
    const int ch = g.dRS.divmod(j, rs), r = g.dS.divmod(rs, s);
    c.c = ch, c.roff = r * g.dh - g.ph, c.soff = s * g.dw - g.pw;
    return c;
  }
  __device__ T a(int m, int kk) const {
    int pq;
    const int n = g.dPQ.divmod(kk, pq);
    return dy[(int64_t(n) * g.K + m) * PQ + pq];
  }
  __device__ T bval(int kk, const Col& c) const {
    int pq, q;
    const int n = g.dPQ.divmod(kk, pq), p = g.dQ.divmod(pq, q);
    const int h = p * g.sh + c.roff, ww = q * g.sw + c.soff;
    if (h < 0 || h >= g.H || ww < 0 || ww >= g.W) return T(0);
    return x[((int64_t(n) * g.C + c.c) * g.H + h) * g.W + ww];
  }
  __device__ void store(int m, const Col& c, T v, int z) const {
    out[(int64_t(z) * g.K + m) * CRS + c.j] = v;
  }
};

// C (M x ncols) = A (M x Kd) * B (Kd x ncols) over the K range of this blockIdx.z.
template <typename T, typename Op>
__global__ void __launch_bounds__(NT) igemm_kernel(Op op, int M, int ncols, int Kd, int k_split) {
  __shared__ T As[BK][BM + 1];
  __shared__ T Bs[BK][BN];
  const int tid = threadIdx.x;
  const int tx = tid % 16, ty = tid / 16;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int kbeg = blockIdx.z * k_split;
  const int kend = min(Kd, kbeg + k_split);

  // Loader roles: A element (am + 16 i, ak); B element (bk + 4 i, bn).
  const int ak = tid % BK, am = tid / BK;
  const int bn = tid % BN, bk = tid / BN;
  const typename Op::Col bcol = op.col(n0 + bn, ncols);

  T acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = T(0);

  for (int kt = kbeg; kt < kend; kt += BK) {
    const int ka = kt + ak;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = m0 + am + 16 * i;
      As[ak][am + 16 * i] = (m < M && ka < kend) ? op.a(m, ka) : T(0);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int kb = kt + bk + 4 * i;
      Bs[bk + 4 * i][bn] = (bcol.valid && kb < kend) ? op.bval(kb, bcol) : T(0);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      T ra[4], rb[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) ra[i] = As[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) rb[j] = Bs[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += ra[i] * rb[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const typename Op::Col c = op.col(n0 + tx + 16 * j, ncols);
    if (!c.valid) continue;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = m0 + ty + 16 * i;
      if (m < M) op.store(m, c, acc[i][j], blockIdx.z);
    }
  }
}

// ---- float32: larger tiles, register prefetch, vector shared-memory reads -----------
// The same implicit GEMM for float in FP32 with BM x BN outputs per 256-thread block
// (BM x BN = 128 x 128, or 64 x 256 when M <= 64 and there are many columns, or
// 64 x 128 for few), BK = 8: each thread accumulates (BM/16) x (BN/16) outputs at rows
// ty*4 + {0..3} (+ 64) and columns tx*4 + {0..3} + 64 q, read from shared memory as
// float4 (16 FMAs per 16-byte read instead of 2 per 4-byte read in igemm_kernel). The
// 64 x 256 tile keeps a 64-row problem (Koch's layer 1 forward, layer 2 backward-data)
// at the 128 x 128 tile's 4 FMAs per shared-memory float instead of the 64 x 128
// tile's 2.7 (measured on an H200, 2026-11-26, same call, wide tile off/on alone: layer 1
// forward 0.865 -> 0.889 ms, i.e. 3 % slower; its effect on layer 2 backward-data was not
// separated from the flipped-weight path's, which took that pass 13.0 -> 11.4 ms; kept on
// by default pending a separated measurement, MN_CONV_WIDE_TILE=0 turns it off). The next k-tile is gathered into registers while this one is multiplied
// (double-buffered shared memory, one barrier per k-tile). A is stored k-major with 4
// floats of padding per row, so the gather's transposed stores are conflict-free.
namespace big {
constexpr int BK = 8, NT = 256, PAD = 4;
}  // namespace big

template <typename Op, int BM, int BN>
__global__ void __launch_bounds__(big::NT) igemm_big_kernel(Op op, int M, int ncols, int Kd, int k_split) {
  static_assert((BM == 64 || BM == 128) && (BN == 128 || BN == 256) && BM * BN <= 128 * 128,
                "tiles: 128 x 128, 64 x 128 or 64 x 256");
  constexpr int BK = big::BK, TM = BM / 16, TN = BN / 16;  // per thread: TM rows, TN columns
  constexpr int LDA = BM + big::PAD;
  constexpr int AL = BM * BK / big::NT;  // A elements gathered per thread: 2 or 4
  constexpr int BL = BN * BK / big::NT;  // B elements gathered per thread: 4 or 8
  constexpr int BSTEP = big::NT / BN;    // row step between a thread's B elements: 2 or 1
  __shared__ __align__(16) float As[2][BK][LDA];
  __shared__ __align__(16) float Bs[2][BK][BN];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int kbeg = blockIdx.z * k_split;
  const int kend = min(Kd, kbeg + k_split);

  // Gather roles. A: k = ak (8 consecutive threads on consecutive k of one row, as A
  // rows are contiguous in k), rows am + 32 i. B: one fixed column bn per thread
  // (decode hoisted), rows bk + BSTEP i.
  const int ak = tid % BK, am = tid / BK;
  const int bn = tid % BN, bk = tid / BN;
  const typename Op::Col bcol = op.col(n0 + bn, ncols);
  float ra[AL], rb[BL];
  auto gather = [&](int kt) {
    const int ka = kt + ak;
#pragma unroll
    for (int i = 0; i < AL; ++i) {
      const int m = m0 + am + 32 * i;
      ra[i] = (m < M && ka < kend) ? op.a(m, ka) : 0.f;
    }
#pragma unroll
    for (int i = 0; i < BL; ++i) {
      const int kb = kt + bk + BSTEP * i;
      rb[i] = (bcol.valid && kb < kend) ? op.bval(kb, bcol) : 0.f;
    }
  };
  auto stash = [&](int buf) {
#pragma unroll
    for (int i = 0; i < AL; ++i) As[buf][ak][am + 32 * i] = ra[i];
#pragma unroll
    for (int i = 0; i < BL; ++i) Bs[buf][bk + BSTEP * i][bn] = rb[i];
  };

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

  if (kbeg < kend) {
    gather(kbeg);
    stash(0);
  }
  __syncthreads();
  int cur = 0;
  for (int kt = kbeg; kt < kend; kt += BK) {
    const bool more = kt + BK < kend;
    if (more) gather(kt + BK);  // global -> registers, overlapping the FMAs below
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float a[TM], b[TN];
#pragma unroll
      for (int h = 0; h < TM / 4; ++h) {
        const float4 v = *reinterpret_cast<const float4*>(&As[cur][kk][64 * h + ty * 4]);
        a[4 * h] = v.x, a[4 * h + 1] = v.y, a[4 * h + 2] = v.z, a[4 * h + 3] = v.w;
      }
#pragma unroll
      for (int q = 0; q < TN / 4; ++q) {
        const float4 v = *reinterpret_cast<const float4*>(&Bs[cur][kk][64 * q + tx * 4]);
        b[4 * q] = v.x, b[4 * q + 1] = v.y, b[4 * q + 2] = v.z, b[4 * q + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    if (more) stash(cur ^ 1);  // that buffer was last read before the previous barrier
    __syncthreads();
    cur ^= 1;
  }

#pragma unroll
  for (int j = 0; j < TN; ++j) {
    const typename Op::Col c = op.col(n0 + 64 * (j / 4) + tx * 4 + j % 4, ncols);
    if (!c.valid) continue;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int m = m0 + 64 * (i / 4) + ty * 4 + i % 4;
      if (m < M) op.store(m, c, acc[i][j], blockIdx.z);
    }
  }
}

// The FP32 tile for an M x ncols problem: 128 x 128 when M > 64; for M <= 64, 64 x 256
// when there are enough columns for 4 blocks per SM of a large GPU (132 SMs), else 64 x 128.
struct BigTile {
  int bm, bn;
};
BigTile big_tile(int M, int ncols) {
  if (M > 64) return {128, 128};
  return {64, cuda_speedups().conv_wide_tile && ncols >= 4 * 132 * 256 ? 256 : 128};
}

// ---- the same implicit GEMM on TF32 tensor cores (float only) -------------------
namespace tc {
constexpr int BM = 64, BN = 128, BK = 16, NT = 256;
constexpr int WM = 32, WN = 32;  // warp tile; warps form a 2 (m) x 4 (n) grid
constexpr int LDA = BK + 4;      // As[m][k]: ldm 20 (a multiple of 4 floats, as WMMA needs)
constexpr int LDB = BN + 8;      // Bs[k][n]: ldm 136 (the pads spread fragment reads over banks)
constexpr int LDE = 16 + 4;      // per-warp 16 x 16 epilogue scratch
constexpr int SA = BM * LDA, SB = BK * LDB;  // floats per buffer
// Fragment pointers must be 32-byte aligned: buffers are multiples of 8 floats and
// the offsets (16 i) * LDA + kk and kk * LDB + 16 j (kk = 0 or 8) are too.
static_assert(SA % 8 == 0 && SB % 8 == 0 && LDA % 4 == 0 && LDB % 4 == 0 && LDE % 4 == 0,
              "WMMA alignment");
static_assert(8 * 16 * LDE <= 2 * SA + 2 * SB, "epilogue scratch fits in the tiles");
static_assert(2 * WM == BM && 4 * WN == BN && NT == 8 * 32 && NT % BK == 0 && NT % BN == 0 &&
                  (NT / BK) * 4 == BM && (NT / BN) * 8 == BK,
              "8 warps of 2 x 2 fragments cover the block tile; loader roles cover the tiles");
}  // namespace tc

// C (M x ncols) = A (M x Kd) * B (Kd x ncols) over the K range of this blockIdx.z,
// as igemm_kernel, with TF32 inputs and float accumulation.
template <typename Op>
__global__ void __launch_bounds__(tc::NT)
    igemm_tf32_kernel(Op op, int M, int ncols, int Kd, int k_split) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  namespace wmma = nvcuda::wmma;
  // [As buffer 0 | As buffer 1 | Bs buffer 0 | Bs buffer 1]; after the main loop the
  // first 8 * 16 * LDE floats are the warps' epilogue scratch.
  __shared__ __align__(32) float smem[2 * tc::SA + 2 * tc::SB];
  float* const As = smem;
  float* const Bs = smem + 2 * tc::SA;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / 4, wn = warp % 4;  // warp sub-tile rows wm*32, cols wn*32
  const int m0 = blockIdx.y * tc::BM, n0 = blockIdx.x * tc::BN;
  const int kbeg = blockIdx.z * k_split;
  const int kend = min(Kd, kbeg + k_split);

  // Loader roles: A elements (am + 16 i, ak), i < 4 (consecutive threads on
  // consecutive k); B elements (bk + 2 i, bn), i < 8, one fixed column per thread
  // so its decode is hoisted out of the K loop.
  const int ak = tid % tc::BK, am = tid / tc::BK;
  const int bn = tid % tc::BN, bk = tid / tc::BN;
  const typename Op::Col bcol = op.col(n0 + bn, ncols);
  float ra[4], rb[8];
  auto gather = [&](int kt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = m0 + am + 16 * i, ka = kt + ak;
      ra[i] = (m < M && ka < kend) ? op.a(m, ka) : 0.f;
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int kb = kt + bk + 2 * i;
      rb[i] = (bcol.valid && kb < kend) ? op.bval(kb, bcol) : 0.f;
    }
  };
  auto stash = [&](int buf) {
    float* a = As + buf * tc::SA;
    float* b = Bs + buf * tc::SB;
#pragma unroll
    for (int i = 0; i < 4; ++i) a[(am + 16 * i) * tc::LDA + ak] = wmma::__float_to_tf32(ra[i]);
#pragma unroll
    for (int i = 0; i < 8; ++i) b[(bk + 2 * i) * tc::LDB + bn] = wmma::__float_to_tf32(rb[i]);
  };

  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.f);

  if (kbeg < kend) {
    gather(kbeg);
    stash(0);
  }
  __syncthreads();
  int cur = 0;
  for (int kt = kbeg; kt < kend; kt += tc::BK) {
    const bool more = kt + tc::BK < kend;
    if (more) gather(kt + tc::BK);  // global -> registers, overlapping the MMAs
    const float* a = As + cur * tc::SA;
    const float* b = Bs + cur * tc::SB;
#pragma unroll
    for (int kk = 0; kk < tc::BK; kk += 8) {
      wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fb[2];
#pragma unroll
      for (int i = 0; i < 2; ++i)
        wmma::load_matrix_sync(fa[i], a + (wm * tc::WM + 16 * i) * tc::LDA + kk, tc::LDA);
#pragma unroll
      for (int j = 0; j < 2; ++j)
        wmma::load_matrix_sync(fb[j], b + kk * tc::LDB + wn * tc::WN + 16 * j, tc::LDB);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    if (more) stash(cur ^ 1);  // that buffer was last read before the previous barrier
    __syncthreads();
    cur ^= 1;
  }

  // Epilogue (every tile read finished at the last barrier): one 16 x 16 fragment
  // at a time through the warp's scratch; lane covers column lane % 16, rows
  // lane / 16 + 2 t.
  float* scratch = smem + warp * 16 * tc::LDE;
  const int lc = lane % 16, lr = lane / 16;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const typename Op::Col c = op.col(n0 + wn * tc::WN + 16 * j + lc, ncols);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      wmma::store_matrix_sync(scratch, acc[i][j], tc::LDE, wmma::mem_row_major);
      __syncwarp();
#pragma unroll
      for (int t = 0; t < 8; ++t) {
        const int r = lr + 2 * t, m = m0 + wm * tc::WM + 16 * i + r;
        if (c.valid && m < M) op.store(m, c, scratch[r * tc::LDE + lc], blockIdx.z);
      }
      __syncwarp();  // the next store_matrix_sync overwrites the scratch
    }
  }
#else
  __trap();  // unreachable: the host refuses devices below sm_80 (check_tf32_device)
#endif
}

// dw[i] = sum_z partial[z][i], z in order.
template <typename T>
__global__ void sum_splits(const T* __restrict__ part, T* __restrict__ out, int splits, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    T acc = 0;
    for (int z = 0; z < splits; ++z) acc += part[z * n + i];
    out[i] = acc;
  }
}

// The precision of this call: float only, never inside an Fp32Scope (the Direct oracle
// never gets here); conv_precision() otherwise.
template <typename T>
Precision conv_prec() {
  return std::is_same<T, float>::value && !fp32_forced() ? conv_precision() : Precision::FP32;
}
// TF32 and BF16 run on the mma.sync kernels (kernels/cuda/mma_conv.cu); TF32 runs on the
// older WMMA kernel below when CudaSpeedups::tc_mma is off.
bool use_mma(Precision p) {
  return p == Precision::BF16 || (p == Precision::TF32 && cuda_speedups().tc_mma);
}
template <typename T>
bool use_tf32() {
  return conv_prec<T>() == Precision::TF32 && !cuda_speedups().tc_mma;
}

template <typename T, typename Op>
void launch_igemm(const Op& op, int M, int ncols, int Kd, int splits, int k_split, bool tf32,
                  const char* name) {
  if constexpr (std::is_same<T, float>::value) {
    if (tf32) {
      check_tf32_device(name);
      const dim3 grid((ncols + tc::BN - 1) / tc::BN, (M + tc::BM - 1) / tc::BM, splits);
      MN_CHECK(grid.y <= 65535, name, ": too many output-channel tiles (", M, ")");
      igemm_tf32_kernel<Op><<<grid, tc::NT, 0, cuda::stream()>>>(op, M, ncols, Kd, k_split);
      CUDA_CHECK_LAUNCH(name);
      return;
    }
  }
  MN_CHECK(!tf32, name, ": TF32 requested for a non-float type");
  if constexpr (std::is_same<T, float>::value) {
    const BigTile t = big_tile(M, ncols);
    const dim3 grid((ncols + t.bn - 1) / t.bn, (M + t.bm - 1) / t.bm, splits);
    MN_CHECK(grid.y <= 65535, name, ": too many output-channel tiles (", M, ")");
    if (t.bm == 128)
      igemm_big_kernel<Op, 128, 128><<<grid, big::NT, 0, cuda::stream()>>>(op, M, ncols, Kd, k_split);
    else if (t.bn == 256)
      igemm_big_kernel<Op, 64, 256><<<grid, big::NT, 0, cuda::stream()>>>(op, M, ncols, Kd, k_split);
    else
      igemm_big_kernel<Op, 64, 128><<<grid, big::NT, 0, cuda::stream()>>>(op, M, ncols, Kd, k_split);
    CUDA_CHECK_LAUNCH(name);
  } else {  // double: the 64 x 64 kernel (the float64 oracle path of the tests)
    const dim3 grid((ncols + BN - 1) / BN, (M + BM - 1) / BM, splits);
    MN_CHECK(grid.y <= 65535, name, ": too many output-channel tiles (", M, ")");
    igemm_kernel<T, Op><<<grid, NT, 0, cuda::stream()>>>(op, M, ncols, Kd, k_split);
    CUDA_CHECK_LAUNCH(name);
  }
}

}  // namespace

// The forward implicit GEMM of geometry g (also the flipped stride-1 backward-data).
// (Tried on the H200 and removed: decoding (c, r, s) from a per-call table instead of two
// multiply-shift divisions per gathered element made no convolution faster and layer 3's
// forward 30 % slower, the whole step 2 % slower: the gather's index arithmetic is not
// what bounds these kernels. bench/results/2026-11-26-NVIDIA-H200-speedups.md.)
template <typename T>
void launch_forward_igemm(const G& g, const T* x, const T* w, const T* b, T* y, const char* name,
                          const char* name_tf32) {
  const int CRS = g.C * g.R * g.S, ncols = g.N * g.P * g.Q;
  const bool tf32 = use_tf32<T>();
  FwdOp<T> op{g, x, w, b, y, CRS, g.R * g.S, g.P * g.Q};
  launch_igemm<T>(op, g.K, ncols, CRS, 1, CRS, tf32, tf32 ? name_tf32 : name);
}

template <typename T>
void conv2d_forward_cuda(const Conv2dGeom& geom, const T* x, const T* w, const T* b, T* y,
                         Conv2dAlgo algo) {
  const G g = to_device_geom(geom);
  if (algo == Conv2dAlgo::Direct) {
    const int64_t total = geom.N * geom.K * geom.P * geom.Q;
    conv_fwd_direct<T><<<cuda::grid_for(total), 256, 0, cuda::stream()>>>(g, x, w, b, y, total);
    CUDA_CHECK_LAUNCH("conv_fwd_direct");
    return;
  }
  if constexpr (std::is_same<T, float>::value) {
    if (const Precision pr = conv_prec<T>(); use_mma(pr)) {
      mma_conv_forward_cuda(pr, geom, x, w, b, y, false);
      return;
    }
  }
  launch_forward_igemm<T>(g, x, w, b, y, "conv_fwd_igemm", "conv_fwd_igemm_tf32");
}

bool conv2d_forward_relu_fused_cuda(const Conv2dGeom& geom, const float* x, const float* w, const float* b, float* y,
                                    Conv2dAlgo algo) {
  const Precision pr = conv_prec<float>();
  if (algo == Conv2dAlgo::Direct || !use_mma(pr) || !cuda_speedups().conv_fused_relu) return false;
  mma_conv_forward_cuda(pr, geom, x, w, b, y, true);
  return true;
}

template <typename T>
void conv2d_backward_data_cuda(const Conv2dGeom& geom, const T* dy, const T* w, T* dx,
                               Conv2dAlgo algo) {
  const G g = to_device_geom(geom);
  if (algo == Conv2dAlgo::Direct) {
    const int64_t total = geom.N * geom.C * geom.H * geom.W;
    conv_bwd_data_direct<T><<<cuda::grid_for(total), 256, 0, cuda::stream()>>>(g, dy, w, dx, total);
    CUDA_CHECK_LAUNCH("conv_bwd_data_direct");
    return;
  }
  if constexpr (std::is_same<T, float>::value) {
    if (const Precision pr = conv_prec<T>(); use_mma(pr)) {
      mma_conv_backward_data_cuda(pr, geom, dy, w, dx);
      return;
    }
  }
  const bool tf32 = use_tf32<T>();
  // Stride 1 (any dilation): dx is the forward convolution of dy, padded by
  // dh*(R-1) - ph (and dw*(S-1) - pw), with the weights flipped and transposed
  // (see CudaSpeedups in kernels/gemm_config.h): dx[h] = sum_r dy[h + ph - r*dh] w[r]
  // = sum_r' dy[h - pad + r'*dh] w[R-1-r'] with pad = dh*(R-1) - ph. Needs pad >= 0.
  const int64_t fph = geom.dh * (geom.R - 1) - geom.ph, fpw = geom.dw * (geom.S - 1) - geom.pw;
  if (cuda_speedups().conv_bwd_data_flip && geom.sh == 1 && geom.sw == 1 && fph >= 0 && fpw >= 0) {
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    const int64_t wtotal = geom.K * geom.C * geom.R * geom.S;
    Tensor wf = Tensor::empty({geom.C, geom.K, geom.R, geom.S}, dtype_of<T>, Device::cuda(dev));
    conv_flip_weights<T><<<cuda::grid_for(wtotal), 256, 0, cuda::stream()>>>(
        w, wf.data<T>(), g.K, g.C, g.R * g.S, wtotal);
    CUDA_CHECK_LAUNCH("conv_flip_weights");
    Conv2dGeom fgeom = geom;  // input dy (N, K, P, Q), weights (C, K, R, S), output dx (N, C, H, W)
    fgeom.C = geom.K, fgeom.H = geom.P, fgeom.W = geom.Q, fgeom.K = geom.C;
    fgeom.P = geom.H, fgeom.Q = geom.W, fgeom.ph = fph, fgeom.pw = fpw;
    launch_forward_igemm<T>(to_device_geom(fgeom), dy, wf.data<T>(), nullptr, dx,
                            "conv_bwd_data_flip_igemm", "conv_bwd_data_flip_igemm_tf32");
    return;
  }
  BwdDataOp<T> op{g, dy, w, dx, g.R * g.S, g.H * g.W, g.P * g.Q};
  const int ncols = g.N * g.H * g.W, Kd = g.K * g.R * g.S;
  launch_igemm<T>(op, g.C, ncols, Kd, 1, Kd, tf32,
                  tf32 ? "conv_bwd_data_igemm_tf32" : "conv_bwd_data_igemm");
}

template <typename T>
void conv2d_backward_weight_cuda(const Conv2dGeom& geom, const T* x, const T* dy, T* dw,
                                 Conv2dAlgo algo) {
  const G g = to_device_geom(geom);
  const int64_t total = geom.K * geom.C * geom.R * geom.S;
  if (algo == Conv2dAlgo::Direct) {
    conv_bwd_weight_direct<T><<<cuda::grid_for(total), 256, 0, cuda::stream()>>>(g, x, dy, dw, total);
    CUDA_CHECK_LAUNCH("conv_bwd_weight_direct");
    return;
  }
  if constexpr (std::is_same<T, float>::value) {
    if (const Precision pr = conv_prec<T>(); use_mma(pr)) {
      mma_conv_backward_weight_cuda(pr, geom, x, dy, dw);
      return;
    }
  }
  const int CRS = g.C * g.R * g.S, Kd = g.N * g.P * g.Q;
  const bool tf32 = use_tf32<T>();
  const char* name = tf32 ? "conv_bwd_weight_igemm_tf32" : "conv_bwd_weight_igemm";
  static_assert(tc::BK == BK && big::BK <= BK && BK % big::BK == 0,
                "the split sizes below are counted in k-tiles of BK, a multiple of every kernel's");
  const bool fp32_big = std::is_same<T, float>::value && !tf32;  // igemm_big_kernel
  const int bm = tf32 ? tc::BM : fp32_big ? big_tile(g.K, CRS).bm : BM;
  const int bn = tf32 ? tc::BN : fp32_big ? big_tile(g.K, CRS).bn : BN;
  // Enough blocks to fill a large GPU (~4 waves of 132 SMs), each split at least
  // 8 K-tiles long so the partial write-out stays small next to the work.
  const int64_t tiles_xy = int64_t((CRS + bn - 1) / bn) * ((g.K + bm - 1) / bm);
  const int64_t k_tiles = (Kd + BK - 1) / BK;
  int64_t splits = std::max<int64_t>(1, std::min<int64_t>(512 / std::max<int64_t>(tiles_xy, 1),
                                                          k_tiles / 8));
  splits = std::min<int64_t>(splits, 65535);
  const int k_split = int(((k_tiles + splits - 1) / splits) * BK);
  splits = (Kd + k_split - 1) / k_split;
  if (splits == 1) {
    BwdWeightOp<T> op{g, x, dy, dw, CRS, g.R * g.S, g.P * g.Q};
    launch_igemm<T>(op, g.K, CRS, Kd, 1, k_split, tf32, name);
    return;
  }
  // Partials: (splits, K, CRS), from the caching allocator, on the current device
  // (the allocator switches to the device it is asked for).
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  Tensor part = Tensor::empty({splits, total}, dtype_of<T>, Device::cuda(dev));
  BwdWeightOp<T> op{g, x, dy, part.data<T>(), CRS, g.R * g.S, g.P * g.Q};
  launch_igemm<T>(op, g.K, CRS, Kd, int(splits), k_split, tf32, name);
  sum_splits<T><<<cuda::grid_for(total), 256, 0, cuda::stream()>>>(part.data<T>(), dw, int(splits), total);
  CUDA_CHECK_LAUNCH("conv_bwd_weight_sum_splits");
}

template <typename T>
void conv2d_backward_bias_cuda(const Conv2dGeom& geom, const T* dy, T* db) {
  G g{};
  g.N = int(geom.N), g.K = int(geom.K), g.P = int(geom.P), g.Q = int(geom.Q);
  // One block per channel left 64-256 blocks on a 132-SM GPU, each walking N*P*Q
  // values: 0.68 ms a launch at the Koch shapes, 6.4 % of the H200's training step
  // (Nsight Compute, 2026-11-27). The images are split so about 1024 blocks run;
  // the partial sums are added in a fixed order (deterministic, no atomics).
  const int64_t splits = std::max<int64_t>(1, std::min<int64_t>(geom.N, 1024 / std::max<int64_t>(geom.K, 1)));
  const int n_per_split = int((geom.N + splits - 1) / splits);
  const int64_t used = (geom.N + n_per_split - 1) / n_per_split;  // no empty split
  if (used == 1) {
    conv_bwd_bias<T><<<dim3(unsigned(geom.K), 1), 256, 0, cuda::stream()>>>(g, dy, db, n_per_split);
    CUDA_CHECK_LAUNCH("conv_bwd_bias");
    return;
  }
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  Tensor part = Tensor::empty({used, geom.K}, dtype_of<T>, Device::cuda(dev));
  conv_bwd_bias<T><<<dim3(unsigned(geom.K), unsigned(used)), 256, 0, cuda::stream()>>>(g, dy, part.data<T>(),
                                                                                      n_per_split);
  CUDA_CHECK_LAUNCH("conv_bwd_bias");
  sum_splits<T><<<cuda::grid_for(geom.K), 256, 0, cuda::stream()>>>(part.data<T>(), db, int(used), geom.K);
  CUDA_CHECK_LAUNCH("conv_bwd_bias_sum_splits");
}

#define MN_CONV2D_CUDA_INSTANTIATE(T)                                                         \
  template void conv2d_forward_cuda<T>(const Conv2dGeom&, const T*, const T*, const T*, T*,    \
                                       Conv2dAlgo);                                           \
  template void conv2d_backward_data_cuda<T>(const Conv2dGeom&, const T*, const T*, T*,        \
                                             Conv2dAlgo);                                     \
  template void conv2d_backward_weight_cuda<T>(const Conv2dGeom&, const T*, const T*, T*,      \
                                               Conv2dAlgo);                                   \
  template void conv2d_backward_bias_cuda<T>(const Conv2dGeom&, const T*, T*);
MN_CONV2D_CUDA_INSTANTIATE(float)
MN_CONV2D_CUDA_INSTANTIATE(double)
#undef MN_CONV2D_CUDA_INSTANTIATE

}  // namespace mn::kernels
