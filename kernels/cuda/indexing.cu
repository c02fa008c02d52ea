// CUDA indexing kernels: grid-stride gathers, atomicAdd scatters, and a
// three-pass stream compaction for masked_select / masked_scatter:
//   1. mask_count_kernel: one 1024-element tile per block, count via __syncthreads_count;
//   2. mask_scan_kernel: one block turns the counts into exclusive offsets (+ total);
//   3. masked_*_kernel: ballot + popc give each set element its rank inside the tile.
// Out-of-range indices are skipped and reported through the device record
// (runtime/cuda_check.h: the host raises them at its next synchronisation), see indexing.h.
#include "kernels/indexing.h"
#include "runtime/allocator.h"
#include "runtime/cuda_check.h"
#include "runtime/determinism.h"

namespace mn::kernels {

namespace {
constexpr int kThreads = 256;
constexpr int kTile = 1024;  // elements per block in the compaction passes (= threads)

#define MN_GRID_LOOP(i, n)                                                   \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); \
       i += (int64_t)gridDim.x * blockDim.x)

template <typename E>
__global__ void index_select_kernel(const E* __restrict__ x, int64_t n, int64_t inner,
                                    const int64_t* __restrict__ idx, int64_t k, E* __restrict__ out,
                                    int64_t total, cuda::DeviceReport* rep) {
  MN_GRID_LOOP(t, total) {
    const int64_t i = t % inner, j = (t / inner) % k, o = t / (inner * k);
    const int64_t s = idx[j];
    const bool ok = s >= 0 && s < n;
    if (!ok) cuda::report_bad_index(rep, cuda::DeviceOp::IndexSelect, s, n);
    out[t] = ok ? x[(o * n + s) * inner + i] : E(0);
  }
}

template <typename T>
__global__ void index_add_kernel(const T* __restrict__ g, int64_t k, int64_t inner,
                                 const int64_t* __restrict__ idx, int64_t n, T* out, int64_t total,
                                 cuda::DeviceReport* rep) {
  MN_GRID_LOOP(t, total) {
    const int64_t i = t % inner, j = (t / inner) % k, o = t / (inner * k);
    const int64_t d = idx[j];
    if (d >= 0 && d < n)
      atomicAdd(out + (o * n + d) * inner + i, g[t]);
    else
      cuda::report_bad_index(rep, cuda::DeviceOp::IndexAdd, d, n);
  }
}

template <typename E>
__global__ void gather_kernel(const E* __restrict__ x, StridedIndexer xi, int64_t x_dim_stride,
                              int64_t dim_size, const int64_t* __restrict__ idx, int64_t m,
                              E* __restrict__ out, cuda::DeviceReport* rep) {
  MN_GRID_LOOP(l, m) {
    const int64_t s = idx[l];
    const bool ok = s >= 0 && s < dim_size;
    if (!ok) cuda::report_bad_index(rep, cuda::DeviceOp::Gather, s, dim_size);
    out[l] = ok ? x[xi.offset(l) + s * x_dim_stride] : E(0);
  }
}

template <typename T>
__global__ void scatter_add_kernel(T* out, StridedIndexer oi, int64_t out_dim_stride, int64_t dim_size,
                                   const int64_t* __restrict__ idx, const T* __restrict__ src,
                                   StridedIndexer si, int64_t m, cuda::DeviceReport* rep) {
  MN_GRID_LOOP(l, m) {
    const int64_t d = idx[l];
    if (d >= 0 && d < dim_size)
      atomicAdd(out + oi.offset(l) + d * out_dim_stride, src[si.offset(l)]);
    else
      cuda::report_bad_index(rep, cuda::DeviceOp::ScatterAdd, d, dim_size);
  }
}

template <typename E>
__global__ void where_kernel(int64_t n, const uint8_t* __restrict__ cond, StridedIndexer ic,
                             const E* __restrict__ a, StridedIndexer ia, const E* __restrict__ b,
                             StridedIndexer ib, E* __restrict__ out) {
  MN_GRID_LOOP(l, n) out[l] = cond[ic.offset(l)] ? a[ia.offset(l)] : b[ib.offset(l)];
}

__global__ void mask_count_kernel(const uint8_t* __restrict__ mask, int64_t n, int64_t* counts) {
  const int64_t i = blockIdx.x * (int64_t)kTile + threadIdx.x;
  const int c = __syncthreads_count(i < n && mask[i] != 0);
  if (threadIdx.x == 0) counts[blockIdx.x] = c;
}

// One block of kTile threads: exclusive scan of counts[0..nb) in place, counts[nb] = total.
__global__ void mask_scan_kernel(int64_t* counts, int64_t nb) {
  __shared__ int64_t warp_sums[32];
  __shared__ int64_t carry;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int64_t base = 0; base < nb; base += kTile) {
    const int64_t i = base + threadIdx.x;
    const int64_t v = i < nb ? counts[i] : 0;
    int64_t incl = v;
    for (int off = 1; off < 32; off <<= 1) {
      const int64_t u = __shfl_up_sync(0xffffffffu, incl, off);
      if (lane >= off) incl += u;
    }
    if (lane == 31) warp_sums[warp] = incl;
    __syncthreads();
    if (warp == 0) {
      int64_t w = warp_sums[lane];
      for (int off = 1; off < 32; off <<= 1) {
        const int64_t u = __shfl_up_sync(0xffffffffu, w, off);
        if (lane >= off) w += u;
      }
      warp_sums[lane] = w;  // inclusive over warps
    }
    __syncthreads();
    const int64_t warp_off = warp > 0 ? warp_sums[warp - 1] : 0;
    if (i < nb) counts[i] = carry + warp_off + incl - v;
    __syncthreads();
    if (threadIdx.x == 0) carry += warp_sums[31];
    __syncthreads();
  }
  if (threadIdx.x == 0) counts[nb] = carry;
}

// Rank of this thread's element among the set elements of its tile (+ tile offset).
__device__ __forceinline__ int64_t tile_rank(bool pred, const int64_t* offsets) {
  __shared__ int warp_off[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const unsigned bal = __ballot_sync(0xffffffffu, pred);
  if (lane == 0) warp_off[warp] = __popc(bal);
  __syncthreads();
  if (warp == 0) {
    int w = warp_off[lane], incl = w;
    for (int off = 1; off < 32; off <<= 1) {
      const int u = __shfl_up_sync(0xffffffffu, incl, off);
      if (lane >= off) incl += u;
    }
    warp_off[lane] = incl - w;  // exclusive
  }
  __syncthreads();
  return offsets[blockIdx.x] + warp_off[warp] + __popc(bal & ((1u << lane) - 1u));
}

template <typename E>
__global__ void masked_select_kernel(const E* __restrict__ x, const uint8_t* __restrict__ mask, int64_t n,
                                     const int64_t* __restrict__ offsets, E* __restrict__ out) {
  const int64_t i = blockIdx.x * (int64_t)kTile + threadIdx.x;
  const bool pred = i < n && mask[i] != 0;
  const int64_t pos = tile_rank(pred, offsets);
  if (pred) out[pos] = x[i];
}

template <typename E>
__global__ void masked_scatter_kernel(const E* __restrict__ src, const uint8_t* __restrict__ mask, int64_t n,
                                      const int64_t* __restrict__ offsets, E* __restrict__ out) {
  const int64_t i = blockIdx.x * (int64_t)kTile + threadIdx.x;
  const bool pred = i < n && mask[i] != 0;
  const int64_t pos = tile_rank(pred, offsets);
  if (i < n) out[i] = pred ? src[pos] : E(0);
}
}  // namespace

template <typename E>
void index_select_cuda(const E* x, int64_t outer, int64_t n, int64_t inner, const int64_t* idx,
                       int64_t k, E* out) {
  const int64_t total = outer * k * inner;
  if (total == 0) return;
  index_select_kernel<E><<<cuda::grid_for(total, kThreads), kThreads, 0, cuda::stream()>>>(x, n, inner, idx, k, out, total, cuda::device_report());
  CUDA_CHECK_LAUNCH("index_select_kernel");
}

template <typename T>
void index_add_cuda(const T* g, int64_t outer, int64_t k, int64_t inner, const int64_t* idx,
                    int64_t n, T* out) {
  const int64_t total = outer * k * inner;
  if (total == 0) return;
  check_deterministic("index_add", "adds with float atomics in an order that varies");
  index_add_kernel<T><<<cuda::grid_for(total, kThreads), kThreads, 0, cuda::stream()>>>(g, k, inner, idx, n, out, total, cuda::device_report());
  CUDA_CHECK_LAUNCH("index_add_kernel");
}

template <typename E>
void gather_cuda(const E* x, const StridedIndexer& xi, int64_t x_dim_stride, int64_t dim_size,
                 const int64_t* idx, int64_t m, E* out) {
  if (m == 0) return;
  gather_kernel<E><<<cuda::grid_for(m, kThreads), kThreads, 0, cuda::stream()>>>(x, xi, x_dim_stride, dim_size, idx, m, out, cuda::device_report());
  CUDA_CHECK_LAUNCH("gather_kernel");
}

template <typename T>
void scatter_add_cuda(T* out, const StridedIndexer& oi, int64_t out_dim_stride, int64_t dim_size,
                      const int64_t* idx, const T* src, const StridedIndexer& si, int64_t m) {
  if (m == 0) return;
  check_deterministic("scatter_add", "adds with float atomics in an order that varies");
  scatter_add_kernel<T><<<cuda::grid_for(m, kThreads), kThreads, 0, cuda::stream()>>>(out, oi, out_dim_stride, dim_size, idx, src, si, m, cuda::device_report());
  CUDA_CHECK_LAUNCH("scatter_add_kernel");
}

template <typename E>
void where_cuda(int64_t n, const uint8_t* cond, const StridedIndexer& ic, const E* a,
                const StridedIndexer& ia, const E* b, const StridedIndexer& ib, E* out) {
  if (n == 0) return;
  where_kernel<E><<<cuda::grid_for(n, kThreads), kThreads, 0, cuda::stream()>>>(n, cond, ic, a, ia, b, ib, out);
  CUDA_CHECK_LAUNCH("where_kernel");
}

int64_t mask_scan_blocks(int64_t n) { return (n + kTile - 1) / kTile; }

int64_t mask_scan_cuda(const uint8_t* mask, int64_t n, int64_t* block_offsets) {
  const int64_t nb = mask_scan_blocks(n);
  cudaStream_t s = cuda::stream();
  if (nb > 0) {
    mask_count_kernel<<<static_cast<unsigned>(nb), kTile, 0, s>>>(mask, n, block_offsets);
    CUDA_CHECK_LAUNCH("mask_count_kernel");
  }
  mask_scan_kernel<<<1, kTile, 0, s>>>(block_offsets, nb);
  CUDA_CHECK_LAUNCH("mask_scan_kernel");
  // The output size is needed on the host to allocate: one counted 8-byte copy.
  int64_t total = 0;
  CUDA_CHECK(cudaMemcpyAsync(&total, block_offsets + nb, sizeof(int64_t), cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  ::mn::detail::count_transfer(/*to_device=*/false, /*from_device=*/true, sizeof(int64_t));
  return total;
}

template <typename E>
void masked_select_cuda(const E* x, const uint8_t* mask, int64_t n, const int64_t* block_offsets,
                        E* out) {
  const int64_t nb = mask_scan_blocks(n);
  if (nb == 0) return;
  masked_select_kernel<E><<<static_cast<unsigned>(nb), kTile, 0, cuda::stream()>>>(x, mask, n, block_offsets, out);
  CUDA_CHECK_LAUNCH("masked_select_kernel");
}

template <typename E>
void masked_scatter_cuda(const E* src, const uint8_t* mask, int64_t n,
                         const int64_t* block_offsets, E* out) {
  const int64_t nb = mask_scan_blocks(n);
  if (nb == 0) return;
  masked_scatter_kernel<E><<<static_cast<unsigned>(nb), kTile, 0, cuda::stream()>>>(src, mask, n, block_offsets, out);
  CUDA_CHECK_LAUNCH("masked_scatter_kernel");
}

#define MN_INSTANTIATE_E(E)                                                                    \
  template void index_select_cuda<E>(const E*, int64_t, int64_t, int64_t, const int64_t*, int64_t, E*); \
  template void gather_cuda<E>(const E*, const StridedIndexer&, int64_t, int64_t, const int64_t*, int64_t, E*); \
  template void where_cuda<E>(int64_t, const uint8_t*, const StridedIndexer&, const E*,        \
                              const StridedIndexer&, const E*, const StridedIndexer&, E*);     \
  template void masked_select_cuda<E>(const E*, const uint8_t*, int64_t, const int64_t*, E*);  \
  template void masked_scatter_cuda<E>(const E*, const uint8_t*, int64_t, const int64_t*, E*);
MN_INSTANTIATE_E(uint8_t)
MN_INSTANTIATE_E(uint32_t)
MN_INSTANTIATE_E(uint64_t)
#define MN_INSTANTIATE_T(T)                                                                    \
  template void index_add_cuda<T>(const T*, int64_t, int64_t, int64_t, const int64_t*, int64_t, T*); \
  template void scatter_add_cuda<T>(T*, const StridedIndexer&, int64_t, int64_t, const int64_t*, \
                                    const T*, const StridedIndexer&, int64_t);
MN_INSTANTIATE_T(float)
MN_INSTANTIATE_T(double)

}  // namespace mn::kernels
