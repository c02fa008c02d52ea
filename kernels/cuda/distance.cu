// CUDA distances. Elementwise kernels for |a - b|; one warp per row for the
// row distances and the squared row norms (the warp primitives shared with the
// fused losses, kernels/cuda/distance_math.cuh); pairwise L1 in the direct
// difference form (a thread per output element, forward and backward); the
// Gram-based pairwise matrices use our GEMM (gemm_cuda) for A B^T, W B and
// W^T A, plus elementwise / row / column passes. Same formulas, zero-distance
// conventions and self case as the CPU (kernels/distance.h).
#include "kernels/cuda/distance_math.cuh"
#include "kernels/cuda/gemm.h"
#include "kernels/distance.h"
#include "kernels/gemm_config.h"
#include "runtime/cuda_check.h"

namespace mn::kernels {
namespace {

using dist_math::sgn;
using dist_math::warp_sum;

template <typename T>
__device__ __forceinline__ T clamped_norm(T sq) {
  const T n = sqrt(sq);
  return n > T(kCosEps) ? n : T(kCosEps);
}

template <typename T>
__global__ void abs_diff_fwd_kernel(int64_t n, const T* __restrict__ a, const T* __restrict__ b,
                                    T* __restrict__ y) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    y[i] = fabs(a[i] - b[i]);
}
template <typename T>
__global__ void abs_diff_bwd_kernel(int64_t n, const T* __restrict__ a, const T* __restrict__ b,
                                    const T* __restrict__ gy, T* ga, T* gb) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const T g = gy[i] * sgn(a[i] - b[i]);
    if (ga) ga[i] = g;
    if (gb) gb[i] = -g;
  }
}

// One warp per row: out[r] = sum_d f(a - b) (sqrt for L2).
template <typename T>
__global__ void row_dist_fwd_kernel(int k, int64_t N, int64_t D, const T* __restrict__ a,
                                    const T* __restrict__ b, T* __restrict__ out) {
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  const int lane = threadIdx.x & 31;
  for (int64_t r = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32; r < N; r += warps) {
    const T* p = a + r * D;
    const T* q = b + r * D;
    const T acc = k == int(Metric::L1) ? dist_math::warp_l1(p, q, D, lane)
                                       : dist_math::warp_sq_l2(p, q, D, lane);
    if (lane == 0) out[r] = k == int(Metric::L2) ? sqrt(acc) : acc;
  }
}
template <typename T>
__global__ void row_dist_bwd_kernel(int k, int64_t N, int64_t D, const T* __restrict__ a,
                                    const T* __restrict__ b, const T* __restrict__ out,
                                    const T* __restrict__ gout, T* ga, T* gb) {
  const int64_t total = N * D;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = i / D;
    const T diff = a[i] - b[i];
    T g;
    if (k == int(RowDist::L1)) g = gout[r] * sgn(diff);
    else if (k == int(RowDist::L2Squared)) g = T(2) * gout[r] * diff;
    else g = out[r] > T(kL2GradEps) ? gout[r] / out[r] * diff : T(0);
    if (ga) ga[i] = g;
    if (gb) gb[i] = -g;
  }
}

template <typename T>
__global__ void row_sqnorm_kernel(int64_t M, int64_t D, const T* __restrict__ A,
                                  T* __restrict__ n) {
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  const int lane = threadIdx.x & 31;
  for (int64_t r = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32; r < M; r += warps) {
    T acc = T(0);
    for (int64_t d = lane; d < D; d += 32) acc += A[r * D + d] * A[r * D + d];
    acc = warp_sum(acc);
    if (lane == 0) n[r] = acc;
  }
}

// out holds A B^T on entry.
template <typename T>
__global__ void pairwise_combine_kernel(int m, bool self, int64_t M, int64_t N,
                                        const T* __restrict__ na, const T* __restrict__ nb,
                                        T* __restrict__ out) {
  const int64_t total = M * N;
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total;
       idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = idx / N, j = idx % N;
    const T g = out[idx];
    if (m == int(Pairwise::Cosine)) {
      out[idx] = T(1) - g / (clamped_norm(na[i]) * clamped_norm(nb[j]));
    } else {
      T s = self && i == j ? T(0) : na[i] + nb[j] - T(2) * g;
      s = s > T(0) ? s : T(0);
      out[idx] = m == int(Pairwise::Euclidean) ? sqrt(s) : s;
    }
  }
}

// Self case: the squared norms are the Gram diagonal (out holds A A^T).
template <typename T>
__global__ void gram_diag_kernel(int64_t M, const T* __restrict__ G, T* __restrict__ na,
                                 T* __restrict__ nb) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < M;
       i += (int64_t)gridDim.x * blockDim.x) {
    na[i] = G[i * M + i];
    nb[i] = G[i * M + i];
  }
}

// L1 forward, a thread per (i, j): the row pair is read once from global
// memory (rows are short: D is an embedding size).
template <typename T>
__global__ void pairwise_l1_fwd_kernel(int64_t M, int64_t N, int64_t D, const T* __restrict__ A,
                                       const T* __restrict__ B, T* __restrict__ out) {
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < M * N;
       idx += (int64_t)gridDim.x * blockDim.x) {
    const T* p = A + (idx / N) * D;
    const T* q = B + (idx % N) * D;
    T acc = T(0);
    for (int64_t d = 0; d < D; ++d) acc += fabs(p[d] - q[d]);
    out[idx] = acc;
  }
}

// L1 backward, a thread per (r, d) of X: gX[r, d] = sum_c G(r, c) sign(X_rd - Y_cd),
// G(r, c) = G[r * gs_r + c * gs_c] (gA: X = A, Y = B; gB: X = B, Y = A, G transposed).
// Fixed summation order over c: deterministic.
template <typename T>
__global__ void pairwise_l1_bwd_kernel(int64_t R, int64_t C, int64_t D, const T* __restrict__ X,
                                       const T* __restrict__ Y, const T* __restrict__ G,
                                       int64_t gs_r, int64_t gs_c, T* __restrict__ gX) {
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < R * D;
       idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = idx / D, d = idx % D;
    const T x = X[idx];
    T acc = T(0);
    for (int64_t c = 0; c < C; ++c) acc += G[r * gs_r + c * gs_c] * sgn(x - Y[c * D + d]);
    gX[idx] = acc;
  }
}

template <typename T>
__global__ void pairwise_w_kernel(int m, int64_t M, int64_t N, const T* __restrict__ out,
                                  const T* __restrict__ na, const T* __restrict__ nb,
                                  const T* __restrict__ gout, T* __restrict__ W) {
  const int64_t total = M * N;
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total;
       idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = idx / N, j = idx % N;
    const T o = out[idx], g = gout[idx];
    T w;
    if (m == int(Pairwise::Cosine)) w = g / (clamped_norm(na[i]) * clamped_norm(nb[j]));
    else if (m == int(Pairwise::SqEuclidean)) w = o > T(0) ? T(2) * g : T(0);
    else w = o > T(kL2GradEps) ? g / o : T(0);
    W[idx] = w;
  }
}

// One warp per row i: alpha_i = sum_j term_ij (then the cosine scaling).
template <typename T>
__global__ void pairwise_alpha_kernel(int m, int64_t M, int64_t N, const T* __restrict__ W,
                                      const T* __restrict__ out, const T* __restrict__ gout,
                                      const T* __restrict__ na, T* __restrict__ alpha) {
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
  const int lane = threadIdx.x & 31;
  for (int64_t i = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32; i < M; i += warps) {
    T acc = T(0);
    for (int64_t j = lane; j < N; j += 32) {
      const int64_t idx = i * N + j;
      acc += m == int(Pairwise::Cosine) ? gout[idx] * (T(1) - out[idx]) : W[idx];
    }
    acc = warp_sum(acc);
    if (lane == 0) {
      if (m == int(Pairwise::Cosine)) {
        const T ma = clamped_norm(na[i]);
        alpha[i] = sqrt(na[i]) > T(kCosEps) ? acc / (ma * ma) : T(0);
      } else {
        alpha[i] = acc;
      }
    }
  }
}

// One thread per column j (coalesced across j): beta_j = sum_i term_ij.
template <typename T>
__global__ void pairwise_beta_kernel(int m, int64_t M, int64_t N, const T* __restrict__ W,
                                     const T* __restrict__ out, const T* __restrict__ gout,
                                     const T* __restrict__ nb, T* __restrict__ beta) {
  const int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (j >= N) return;
  T acc = T(0);
  for (int64_t i = 0; i < M; ++i) {
    const int64_t idx = i * N + j;
    acc += m == int(Pairwise::Cosine) ? gout[idx] * (T(1) - out[idx]) : W[idx];
  }
  if (m == int(Pairwise::Cosine)) {
    const T mb = clamped_norm(nb[j]);
    beta[j] = sqrt(nb[j]) > T(kCosEps) ? acc / (mb * mb) : T(0);
  } else {
    beta[j] = acc;
  }
}

// g[r, d] = coef[r] * X[r, d]
template <typename T>
__global__ void row_scale_kernel(int64_t R, int64_t D, const T* __restrict__ coef,
                                 const T* __restrict__ X, T* __restrict__ g) {
  const int64_t total = R * D;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x)
    g[i] = coef[i / D] * X[i];
}

unsigned warp_grid(int64_t rows) { return cuda::grid_for(rows * 32, 256); }
}  // namespace

template <typename T>
void abs_diff_forward_cuda(int64_t n, const T* a, const T* b, T* y) {
  abs_diff_fwd_kernel<T><<<cuda::grid_for(n), 256, 0, cuda::stream()>>>(n, a, b, y);
  CUDA_CHECK_LAUNCH("abs_diff_fwd_kernel");
}
template <typename T>
void abs_diff_backward_cuda(int64_t n, const T* a, const T* b, const T* gy, T* ga, T* gb) {
  abs_diff_bwd_kernel<T><<<cuda::grid_for(n), 256, 0, cuda::stream()>>>(n, a, b, gy, ga, gb);
  CUDA_CHECK_LAUNCH("abs_diff_bwd_kernel");
}
template <typename T>
void row_distance_forward_cuda(RowDist k, int64_t N, int64_t D, const T* a, const T* b, T* out) {
  row_dist_fwd_kernel<T><<<warp_grid(N), 256, 0, cuda::stream()>>>(int(k), N, D, a, b, out);
  CUDA_CHECK_LAUNCH("row_dist_fwd_kernel");
}
template <typename T>
void row_distance_backward_cuda(RowDist k, int64_t N, int64_t D, const T* a, const T* b,
                                const T* out, const T* gout, T* ga, T* gb) {
  row_dist_bwd_kernel<T><<<cuda::grid_for(N * D), 256, 0, cuda::stream()>>>(int(k), N, D, a, b,
                                                                            out, gout, ga, gb);
  CUDA_CHECK_LAUNCH("row_dist_bwd_kernel");
}

template <typename T>
void pairwise_forward_cuda(Pairwise m, int64_t M, int64_t N, int64_t D, const T* A, const T* B,
                           T* out, T* na, T* nb) {
  if (m == Metric::L1) {
    pairwise_l1_fwd_kernel<T><<<cuda::grid_for(M * N), 256, 0, cuda::stream()>>>(M, N, D, A, B,
                                                                                out);
    CUDA_CHECK_LAUNCH("pairwise_l1_fwd_kernel");
    return;
  }
  const bool self = A == B && M == N;
  const Fp32Scope fp32;  // the precision policy (kernels/gemm_config.h): never TF32 here
  gemm_cuda<T>(false, true, M, N, D, T(1), A, D, B, D, T(0), out, N);
  if (self) {
    gram_diag_kernel<T><<<cuda::grid_for(M), 256, 0, cuda::stream()>>>(M, out, na, nb);
    CUDA_CHECK_LAUNCH("gram_diag_kernel");
  } else {
    row_sqnorm_kernel<T><<<warp_grid(M), 256, 0, cuda::stream()>>>(M, D, A, na);
    CUDA_CHECK_LAUNCH("row_sqnorm_kernel");
    row_sqnorm_kernel<T><<<warp_grid(N), 256, 0, cuda::stream()>>>(N, D, B, nb);
    CUDA_CHECK_LAUNCH("row_sqnorm_kernel");
  }
  pairwise_combine_kernel<T><<<cuda::grid_for(M * N), 256, 0, cuda::stream()>>>(int(m), self, M,
                                                                                N, na, nb, out);
  CUDA_CHECK_LAUNCH("pairwise_combine_kernel");
}

template <typename T>
void pairwise_backward_cuda(Pairwise m, int64_t M, int64_t N, int64_t D, const T* A, const T* B,
                            const T* out, const T* na, const T* nb, const T* gout, T* gA, T* gB,
                            T* work) {
  if (m == Metric::L1) {
    if (gA) {
      pairwise_l1_bwd_kernel<T><<<cuda::grid_for(M * D), 256, 0, cuda::stream()>>>(
          M, N, D, A, B, gout, N, 1, gA);
      CUDA_CHECK_LAUNCH("pairwise_l1_bwd_kernel");
    }
    if (gB) {
      pairwise_l1_bwd_kernel<T><<<cuda::grid_for(N * D), 256, 0, cuda::stream()>>>(
          N, M, D, B, A, gout, 1, N, gB);
      CUDA_CHECK_LAUNCH("pairwise_l1_bwd_kernel");
    }
    return;
  }
  const Fp32Scope fp32;  // never TF32 (kernels/gemm_config.h)
  T* W = work;
  T* alpha = work + M * N;
  T* beta = alpha + M;
  pairwise_w_kernel<T><<<cuda::grid_for(M * N), 256, 0, cuda::stream()>>>(int(m), M, N, out, na,
                                                                          nb, gout, W);
  CUDA_CHECK_LAUNCH("pairwise_w_kernel");
  if (gA) {
    pairwise_alpha_kernel<T><<<warp_grid(M), 256, 0, cuda::stream()>>>(int(m), M, N, W, out, gout,
                                                                       na, alpha);
    CUDA_CHECK_LAUNCH("pairwise_alpha_kernel");
    row_scale_kernel<T><<<cuda::grid_for(M * D), 256, 0, cuda::stream()>>>(M, D, alpha, A, gA);
    CUDA_CHECK_LAUNCH("row_scale_kernel");
    gemm_cuda<T>(false, false, M, D, N, T(-1), W, N, B, D, T(1), gA, D);
  }
  if (gB) {
    pairwise_beta_kernel<T><<<(unsigned)((N + 255) / 256), 256, 0, cuda::stream()>>>(
        int(m), M, N, W, out, gout, nb, beta);
    CUDA_CHECK_LAUNCH("pairwise_beta_kernel");
    row_scale_kernel<T><<<cuda::grid_for(N * D), 256, 0, cuda::stream()>>>(N, D, beta, B, gB);
    CUDA_CHECK_LAUNCH("row_scale_kernel");
    gemm_cuda<T>(true, false, N, D, M, T(-1), W, N, A, D, T(1), gB, D);
  }
}

#define MN_DIST_CUDA_INST(T)                                                                     \
  template void abs_diff_forward_cuda<T>(int64_t, const T*, const T*, T*);                     \
  template void abs_diff_backward_cuda<T>(int64_t, const T*, const T*, const T*, T*, T*);      \
  template void row_distance_forward_cuda<T>(RowDist, int64_t, int64_t, const T*, const T*,    \
                                             T*);                                              \
  template void row_distance_backward_cuda<T>(RowDist, int64_t, int64_t, const T*, const T*,   \
                                              const T*, const T*, T*, T*);                     \
  template void pairwise_forward_cuda<T>(Pairwise, int64_t, int64_t, int64_t, const T*,        \
                                         const T*, T*, T*, T*);                                \
  template void pairwise_backward_cuda<T>(Pairwise, int64_t, int64_t, int64_t, const T*,       \
                                          const T*, const T*, const T*, const T*, const T*,    \
                                          T*, T*, T*);
MN_DIST_CUDA_INST(float)
MN_DIST_CUDA_INST(double)

}  // namespace mn::kernels
