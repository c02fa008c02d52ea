// Multi-Similarity loss on the GPU (kernels/multi_similarity.h); the CPU loop in
// kernels/cpu/multi_similarity.cpp is its oracle and uses the same ms_math.
// Version 1 (the only one): one warp per anchor row (loss and miner alike); lanes stride over the B
// columns for the four passes of the CPU loop (thresholds, shifts, sums,
// gradient), combining with shuffles; the reduction is one block with double
// accumulators; the backward scale reads grad_out and the normaliser on the
// device (no host synchronisation anywhere).
#include <cfloat>

#include "kernels/multi_similarity.h"
#include "runtime/cuda_check.h"

namespace mn::kernels {
namespace {

constexpr int kWarps = 8;

template <typename T>
__device__ __forceinline__ T wsum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <typename T>
__device__ __forceinline__ T wmax(T v) {
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
template <typename T>
__device__ __forceinline__ T wmin(T v) {
  for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The miner's thresholds of row i over the warp (every lane gets them).
template <typename T>
__device__ __forceinline__ void warp_thresholds(int64_t i, int64_t B, const T* s, const int64_t* labels,
                                                int lane, T* min_pos, T* max_neg) {
  const T inf = T(INFINITY);
  T lo = inf, hi = -inf;
  for (int64_t j = lane; j < B; j += 32) {
    if (j == i) continue;
    if (labels[j] == labels[i]) lo = min(lo, s[j]);
    else hi = max(hi, s[j]);
  }
  *min_pos = wmin(lo);
  *max_neg = wmax(hi);
}

template <typename T>
__global__ void ms_forward_kernel(MultiSimilarityParams P, int64_t B, const T* S,
                                  const int64_t* labels, T* grad, MsRowOut<T> o) {
  const int lane = threadIdx.x & 31;
  const int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
  const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
  for (int64_t i = warp; i < B; i += nwarps) {
    const T* s = S + i * B;
    T* g = grad + i * B;
    const int64_t li = labels[i];
    T min_pos, max_neg;
    warp_thresholds(i, B, s, labels, lane, &min_pos, &max_neg);
    T mp = T(0), mn = T(0);
    for (int64_t j = lane; j < B; j += 32) {
      const bool same = labels[j] == li;
      if (j == i || !ms_math::kept(P, same, s[j], min_pos, max_neg)) continue;
      T x = ms_math::expo(P, same, s[j]);
      if (same) mp = max(mp, x);
      else mn = max(mn, x);
    }
    mp = wmax(mp);
    mn = wmax(mn);
    T sp = T(0), sn = T(0), np = T(0), nn = T(0), simp = T(0), simn = T(0);
    for (int64_t j = lane; j < B; j += 32) {
      const bool same = labels[j] == li;
      if (j == i || !ms_math::kept(P, same, s[j], min_pos, max_neg)) continue;
      T x = ms_math::expo(P, same, s[j]);
      if (same) { sp += exp(x - mp); np += T(1); simp += s[j]; }
      else { sn += exp(x - mn); nn += T(1); simn += s[j]; }
    }
    sp = wsum(sp) + exp(-mp);
    sn = wsum(sn) + exp(-mn);
    np = wsum(np);
    nn = wsum(nn);
    simp = wsum(simp);
    simn = wsum(simn);
    if (lane == 0) {
      o.loss[i] = (mp + log(sp)) / T(P.alpha) + (mn + log(sn)) / T(P.beta);
      o.npos[i] = np;
      o.nneg[i] = nn;
      o.spos[i] = simp;
      o.sneg[i] = simn;
    }
    for (int64_t j = lane; j < B; j += 32) {
      const bool same = labels[j] == li;
      if (j == i || !ms_math::kept(P, same, s[j], min_pos, max_neg)) { g[j] = T(0); continue; }
      T x = ms_math::expo(P, same, s[j]);
      g[j] = same ? -exp(x - mp) / sp : exp(x - mn) / sn;
    }
  }
}

// Miner: one warp per row. The fill keeps row-major order: each 32-column chunk
// ballots its kept columns and every lane writes at base + (kept lanes below it).
template <typename T>
__global__ void ms_mine_kernel(MultiSimilarityParams P, int64_t B, const T* S, const int64_t* labels,
                               int64_t* counts, const int64_t* offsets, int64_t* pairs, int64_t* is_pos) {
  const int lane = threadIdx.x & 31;
  const int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
  const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
  for (int64_t i = warp; i < B; i += nwarps) {
    const T* s = S + i * B;
    T min_pos, max_neg;
    warp_thresholds(i, B, s, labels, lane, &min_pos, &max_neg);
    int64_t base = offsets ? offsets[i] : 0;
    for (int64_t j0 = 0; j0 < B; j0 += 32) {
      const int64_t j = j0 + lane;
      const bool same = j < B && labels[j] == labels[i];
      const bool keep = j < B && j != i && ms_math::kept(P, same, s[j], min_pos, max_neg);
      const unsigned mask = __ballot_sync(0xffffffffu, keep);
      if (offsets && keep) {
        const int64_t k = base + __popc(mask & ((1u << lane) - 1u));
        pairs[2 * k] = i;
        pairs[2 * k + 1] = j;
        is_pos[k] = same ? 1 : 0;
      }
      base += __popc(mask);
    }
    if (!offsets && lane == 0) counts[i] = base;
  }
}

unsigned row_blocks(int64_t B) {
  int64_t blocks = (B + kWarps - 1) / kWarps;
  if (blocks > 65535LL * 64) blocks = 65535LL * 64;
  return static_cast<unsigned>(blocks);
}

MultiSimilarityParams miner_params(double epsilon) {
  MultiSimilarityParams P;
  P.mine = true;
  P.epsilon = epsilon;
  return P;
}

template <typename T>
__global__ void ms_reduce_kernel(Reduction r, int64_t B, MsRowOut<T> o, T* stats) {
  __shared__ double sh[6][256];
  double acc[6] = {0, 0, 0, 0, 0, 0};
  for (int64_t i = threadIdx.x; i < B; i += blockDim.x) {
    acc[0] += double(o.loss[i]);
    acc[1] += double(o.npos[i]);
    acc[2] += double(o.nneg[i]);
    acc[3] += double(o.spos[i]);
    acc[4] += double(o.sneg[i]);
    acc[5] += (o.npos[i] + o.nneg[i] > T(0)) ? 1.0 : 0.0;
  }
  for (int k = 0; k < 6; ++k) sh[k][threadIdx.x] = acc[k];
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if ((int)threadIdx.x < w)
      for (int k = 0; k < 6; ++k) sh[k][threadIdx.x] += sh[k][threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const double np = sh[1][0], nn = sh[2][0];
    const double norm = r == Reduction::Sum ? 1.0
                        : r == Reduction::Mean ? 1.0 / double(B > 1 ? B : 1)
                                               : 1.0 / (sh[5][0] > 1.0 ? sh[5][0] : 1.0);
    stats[0] = T(sh[0][0] * norm);
    stats[1] = T(np + nn);
    stats[2] = T(np > 0 ? sh[3][0] / np : 0.0);
    stats[3] = T(nn > 0 ? sh[4][0] / nn : 0.0);
    stats[4] = T(norm);
  }
}

template <typename T>
__global__ void ms_scale_kernel(int64_t n, const T* grad, const T* grad_out, const T* stats, T* out) {
  const T k = grad_out[0] * stats[4];
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[i] = grad[i] * k;
}

}  // namespace

template <typename T>
void multi_similarity_forward_cuda(const MultiSimilarityParams& P, int64_t B, const T* S,
                                   const int64_t* labels, T* grad, const MsRowOut<T>& rows) {
  if (B == 0) return;
  ms_forward_kernel<T><<<row_blocks(B), kWarps * 32, 0, cuda::stream()>>>(P, B, S, labels, grad, rows);
  CUDA_CHECK_LAUNCH("ms_forward_kernel");
}

template <typename T>
void multi_similarity_reduce_cuda(Reduction r, int64_t B, const MsRowOut<T>& rows, T* stats) {
  ms_reduce_kernel<T><<<1, 256, 0, cuda::stream()>>>(r, B, rows, stats);
  CUDA_CHECK_LAUNCH("ms_reduce_kernel");
}

template <typename T>
void multi_similarity_scale_cuda(int64_t n, const T* grad, const T* grad_out, const T* stats, T* out) {
  if (n == 0) return;
  ms_scale_kernel<T><<<cuda::grid_for(n), 256, 0, cuda::stream()>>>(n, grad, grad_out, stats, out);
  CUDA_CHECK_LAUNCH("ms_scale_kernel");
}

template <typename T>
void multi_similarity_count_cuda(double epsilon, int64_t B, const T* S, const int64_t* labels,
                                 int64_t* counts) {
  if (B == 0) return;
  ms_mine_kernel<T><<<row_blocks(B), kWarps * 32, 0, cuda::stream()>>>(miner_params(epsilon), B, S, labels,
                                                                      counts, nullptr, nullptr, nullptr);
  CUDA_CHECK_LAUNCH("ms_mine_kernel (count)");
}

template <typename T>
void multi_similarity_fill_cuda(double epsilon, int64_t B, const T* S, const int64_t* labels,
                                const int64_t* offsets, int64_t* pairs, int64_t* is_pos) {
  if (B == 0) return;
  ms_mine_kernel<T><<<row_blocks(B), kWarps * 32, 0, cuda::stream()>>>(miner_params(epsilon), B, S, labels,
                                                                      nullptr, offsets, pairs, is_pos);
  CUDA_CHECK_LAUNCH("ms_mine_kernel (fill)");
}

#define MN_MS_INST(T)                                                                            \
  template void multi_similarity_forward_cuda<T>(const MultiSimilarityParams&, int64_t, const T*, \
                                                 const int64_t*, T*, const MsRowOut<T>&);        \
  template void multi_similarity_reduce_cuda<T>(Reduction, int64_t, const MsRowOut<T>&, T*);     \
  template void multi_similarity_scale_cuda<T>(int64_t, const T*, const T*, const T*, T*);      \
  template void multi_similarity_count_cuda<T>(double, int64_t, const T*, const int64_t*, int64_t*); \
  template void multi_similarity_fill_cuda<T>(double, int64_t, const T*, const int64_t*,         \
                                              const int64_t*, int64_t*, int64_t*);
MN_MS_INST(float)
MN_MS_INST(double)
#undef MN_MS_INST

}  // namespace mn::kernels
