// Batch-all triplet loss on the GPU (kernels/batch_all.h); the CPU code in
// kernels/cpu/batch_all.cpp is its oracle. One warp per anchor row: lanes
// stride over the row's entries; a chosen positive p counts and sums its
// active negatives (D[a,n] < D[a,p] + m) over the row, a negative n counts the
// chosen positives with D[a,p] + m > D[a,n]; warp sums give the row's outputs.
// O(B) work per entry, no atomics (each row is one warp's), the reduction one
// block with double accumulators in a fixed order: deterministic. The backward
// scale is the multi-similarity loss's (reads grad_out and the normaliser on
// the device).
#include "kernels/batch_all.h"
#include "runtime/cuda_check.h"

namespace mn::kernels {
namespace {

constexpr int kWarps = 8;

__device__ __forceinline__ double wsum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename T>
__global__ void ba_forward_kernel(BatchAllParams P, int64_t B, const T* D, const int64_t* labels, T* grad,
                                  BatchAllRowOut<T> o) {
  const int lane = threadIdx.x & 31;
  const int64_t a = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (a >= B) return;
  const T* row = D + a * B;
  T* g = grad + a * B;
  const int64_t la = labels[a];
  const T m = T(P.margin);
  double loss = 0, active = 0, chosen = 0, nneg = 0, spos = 0, npos = 0, sneg = 0;
  for (int64_t j = lane; j < B; j += 32) {
    const bool same = labels[j] == la;
    if (j == a) {
      g[j] = T(0);
    } else if (same) {
      spos += double(row[j]);
      npos += 1;
      if (P.unordered_positives && j < a) {
        g[j] = T(0);
        continue;
      }
      chosen += 1;
      const T t = row[j] + m;
      double c = 0;
      for (int64_t n = 0; n < B; ++n)
        if (labels[n] != la && row[n] < t) {
          c += 1;
          loss += double(t) - double(row[n]);
        }
      active += c;
      g[j] = T(c);
    } else {
      sneg += double(row[j]);
      nneg += 1;
      double c = 0;
      for (int64_t p = 0; p < B; ++p)
        if (p != a && labels[p] == la && (!P.unordered_positives || p > a) && row[p] + m > row[j]) c += 1;
      g[j] = T(-c);
    }
  }
  loss = wsum(loss);
  active = wsum(active);
  chosen = wsum(chosen);
  nneg = wsum(nneg);
  spos = wsum(spos);
  npos = wsum(npos);
  sneg = wsum(sneg);
  if (lane == 0) {
    o.loss[a] = T(loss);
    o.active[a] = T(active);
    o.triplets[a] = T(chosen * nneg);
    o.spos[a] = T(spos);
    o.npos[a] = T(npos);
    o.sneg[a] = T(sneg);
    o.nneg[a] = T(nneg);
  }
}

template <typename T>
__global__ void ba_reduce_kernel(Reduction r, int64_t B, BatchAllRowOut<T> o, T* stats) {
  __shared__ double sh[7][256];
  double acc[7] = {0, 0, 0, 0, 0, 0, 0};
  for (int64_t i = threadIdx.x; i < B; i += blockDim.x) {
    acc[0] += double(o.loss[i]);
    acc[1] += double(o.active[i]);
    acc[2] += double(o.triplets[i]);
    acc[3] += double(o.spos[i]);
    acc[4] += double(o.npos[i]);
    acc[5] += double(o.sneg[i]);
    acc[6] += double(o.nneg[i]);
  }
  for (int k = 0; k < 7; ++k) sh[k][threadIdx.x] = acc[k];
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if ((int)threadIdx.x < w)
      for (int k = 0; k < 7; ++k) sh[k][threadIdx.x] += sh[k][threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const double active = sh[1][0], trip = sh[2][0];
    const double norm = r == Reduction::Sum ? 1.0
                        : r == Reduction::Mean ? 1.0 / (trip > 1.0 ? trip : 1.0)
                                               : 1.0 / (active > 1.0 ? active : 1.0);
    stats[0] = T(sh[0][0] * norm);
    stats[1] = T(active);
    stats[2] = T(sh[4][0] > 0 ? sh[3][0] / sh[4][0] : 0.0);
    stats[3] = T(sh[6][0] > 0 ? sh[5][0] / sh[6][0] : 0.0);
    stats[4] = T(norm);
  }
}

}  // namespace

template <typename T>
void batch_all_forward_cuda(const BatchAllParams& P, int64_t B, const T* D, const int64_t* labels, T* grad,
                            const BatchAllRowOut<T>& rows) {
  if (B == 0) return;
  const unsigned blocks = static_cast<unsigned>((B + kWarps - 1) / kWarps);
  ba_forward_kernel<T><<<blocks, kWarps * 32, 0, cuda::stream()>>>(P, B, D, labels, grad, rows);
  CUDA_CHECK_LAUNCH("ba_forward_kernel");
}

template <typename T>
void batch_all_reduce_cuda(Reduction r, int64_t B, const BatchAllRowOut<T>& rows, T* stats) {
  ba_reduce_kernel<T><<<1, 256, 0, cuda::stream()>>>(r, B, rows, stats);
  CUDA_CHECK_LAUNCH("ba_reduce_kernel");
}

#define MN_BA_INST(T)                                                                                      \
  template void batch_all_forward_cuda<T>(const BatchAllParams&, int64_t, const T*, const int64_t*, T*,    \
                                          const BatchAllRowOut<T>&);                                       \
  template void batch_all_reduce_cuda<T>(Reduction, int64_t, const BatchAllRowOut<T>&, T*);
MN_BA_INST(float)
MN_BA_INST(double)
#undef MN_BA_INST

}  // namespace mn::kernels
