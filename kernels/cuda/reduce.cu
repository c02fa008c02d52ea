// CUDA reductions over a contiguous (outer, r, inner) view (see kernels/reduce.h),
// accumulating in double (exact for max/min values, accurate for sums).
// Kernels:
//   all elements (outer == inner == 1): v1 two passes — reduce_partial_kernel
//     (grid-stride, warp shuffles, one partial per block) then reduce_final_kernel
//     (one block over the partials);
//   inner == 1, r <= 1024: reduce_rows_warp_kernel, one warp per output row;
//   inner == 1, r > 1024:  reduce_rows_block_kernel, one block per output row;
//   inner > 1:             reduce_cols_kernel, one thread per output column,
//     neighbouring threads read neighbouring addresses.
#include "kernels/reduce.h"
#include "kernels/reduce_math.h"
#include "runtime/cuda_check.h"

#include <algorithm>

namespace mn::kernels {

namespace {
using detail::RedAcc;
constexpr int kBlock = 256;
constexpr int kMaxPartials = 1024;

template <ReduceOp OP>
__device__ __forceinline__ RedAcc warp_reduce(RedAcc a) {
  for (int off = 16; off > 0; off >>= 1) {
    double v = __shfl_down_sync(0xffffffffu, a.v, off);
    long long i = __shfl_down_sync(0xffffffffu, (long long)a.i, off);
    detail::red_combine<OP>(a, v, (int64_t)i);
  }
  return a;
}

// Reduces `a` over the block; the result is valid in thread 0.
template <ReduceOp OP>
__device__ __forceinline__ RedAcc block_reduce(RedAcc a) {
  __shared__ double sv[32];
  __shared__ long long si[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  a = warp_reduce<OP>(a);
  if (lane == 0) { sv[warp] = a.v; si[warp] = a.i; }
  __syncthreads();
  const int nwarps = (blockDim.x + 31) >> 5;
  if (warp == 0) {
    a = lane < nwarps ? RedAcc{sv[lane], (int64_t)si[lane]} : detail::red_identity<OP>();
    a = warp_reduce<OP>(a);
  }
  return a;
}

template <ReduceOp OP, typename T>
__device__ __forceinline__ void store(const RedAcc& a, int64_t r, T* out, int64_t* idx, int64_t o) {
  out[o] = static_cast<T>(OP == ReduceOp::Mean ? a.v / (double)r : a.v);
  if (idx) idx[o] = a.i;
}

template <ReduceOp OP, typename T>
__global__ void reduce_partial_kernel(const T* __restrict__ x, int64_t n, double* pv, int64_t* pi) {
  RedAcc a = detail::red_identity<OP>();
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n;
       k += (int64_t)gridDim.x * blockDim.x)
    detail::red_combine<OP>(a, (double)x[k], k);
  a = block_reduce<OP>(a);
  if (threadIdx.x == 0) { pv[blockIdx.x] = a.v; pi[blockIdx.x] = a.i; }
}

template <ReduceOp OP, typename T>
__global__ void reduce_final_kernel(const double* pv, const int64_t* pi, int np, int64_t r, T* out,
                                    int64_t* idx) {
  RedAcc a = detail::red_identity<OP>();
  for (int k = threadIdx.x; k < np; k += blockDim.x) detail::red_combine<OP>(a, pv[k], pi[k]);
  a = block_reduce<OP>(a);
  if (threadIdx.x == 0) store<OP, T>(a, r, out, idx, 0);
}

template <ReduceOp OP, typename T>
__global__ void reduce_rows_warp_kernel(const T* __restrict__ x, int64_t outer, int64_t r, T* out,
                                        int64_t* idx) {
  const int lane = threadIdx.x & 31;
  const int64_t warps_per_grid = (int64_t)gridDim.x * (blockDim.x >> 5);
  for (int64_t o = blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5); o < outer;
       o += warps_per_grid) {
    RedAcc a = detail::red_identity<OP>();
    const T* row = x + o * r;
    for (int64_t k = lane; k < r; k += 32) detail::red_combine<OP>(a, (double)row[k], k);
    a = warp_reduce<OP>(a);
    if (lane == 0) store<OP, T>(a, r, out, idx, o);
  }
}

template <ReduceOp OP, typename T>
__global__ void reduce_rows_block_kernel(const T* __restrict__ x, int64_t outer, int64_t r, T* out,
                                         int64_t* idx) {
  for (int64_t o = blockIdx.x; o < outer; o += gridDim.x) {
    RedAcc a = detail::red_identity<OP>();
    const T* row = x + o * r;
    for (int64_t k = threadIdx.x; k < r; k += blockDim.x) detail::red_combine<OP>(a, (double)row[k], k);
    a = block_reduce<OP>(a);
    if (threadIdx.x == 0) store<OP, T>(a, r, out, idx, o);
    __syncthreads();  // shared scratch of block_reduce is reused by the next row
  }
}

template <ReduceOp OP, typename T>
__global__ void reduce_cols_kernel(const T* __restrict__ x, int64_t outer, int64_t r, int64_t inner,
                                   T* out, int64_t* idx) {
  const int64_t total = outer * inner;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
       t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t o = t / inner, i = t % inner;
    const T* base = x + o * r * inner + i;
    RedAcc a = detail::red_identity<OP>();
    for (int64_t k = 0; k < r; ++k) detail::red_combine<OP>(a, (double)base[k * inner], k);
    store<OP, T>(a, r, out, idx, t);
  }
}

template <ReduceOp OP, typename T>
void launch(const T* x, int64_t outer, int64_t r, int64_t inner, T* out, int64_t* idx) {
  if (outer * inner == 0) return;
  cudaStream_t s = cuda::stream();
  if (outer == 1 && inner == 1) {
    const int np = static_cast<int>(std::min<int64_t>(kMaxPartials, (r + kBlock * 4 - 1) / (kBlock * 4)));
    const int nblocks = np < 1 ? 1 : np;
    // Partials live in a temporary tensor from the caching allocator.
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    Tensor ws = Tensor::empty({2 * (int64_t)nblocks}, DType::F64, Device::cuda(dev));
    double* pv = ws.data<double>();
    int64_t* pi = reinterpret_cast<int64_t*>(pv + nblocks);
    reduce_partial_kernel<OP, T><<<nblocks, kBlock, 0, s>>>(x, r, pv, pi);
    CUDA_CHECK_LAUNCH("reduce_partial_kernel");
    reduce_final_kernel<OP, T><<<1, kMaxPartials, 0, s>>>(pv, pi, nblocks, r, out, idx);
    CUDA_CHECK_LAUNCH("reduce_final_kernel");
  } else if (inner == 1 && r <= 1024) {
    const int warps = kBlock / 32;
    reduce_rows_warp_kernel<OP, T><<<cuda::grid_for(outer, warps), kBlock, 0, s>>>(x, outer, r, out, idx);
    CUDA_CHECK_LAUNCH("reduce_rows_warp_kernel");
  } else if (inner == 1) {
    const unsigned g = static_cast<unsigned>(std::min<int64_t>(outer, 65535));
    reduce_rows_block_kernel<OP, T><<<g, kBlock, 0, s>>>(x, outer, r, out, idx);
    CUDA_CHECK_LAUNCH("reduce_rows_block_kernel");
  } else {
    reduce_cols_kernel<OP, T><<<cuda::grid_for(outer * inner, kBlock), kBlock, 0, s>>>(x, outer, r, inner, out, idx);
    CUDA_CHECK_LAUNCH("reduce_cols_kernel");
  }
}
}  // namespace

template <typename T>
void reduce_cuda(ReduceOp op, const T* x, int64_t outer, int64_t r, int64_t inner, T* out,
                 int64_t* idx) {
  switch (op) {
    case ReduceOp::Sum: launch<ReduceOp::Sum, T>(x, outer, r, inner, out, idx); break;
    case ReduceOp::Mean: launch<ReduceOp::Mean, T>(x, outer, r, inner, out, idx); break;
    case ReduceOp::Max: launch<ReduceOp::Max, T>(x, outer, r, inner, out, idx); break;
    case ReduceOp::Min: launch<ReduceOp::Min, T>(x, outer, r, inner, out, idx); break;
  }
}

template void reduce_cuda<float>(ReduceOp, const float*, int64_t, int64_t, int64_t, float*, int64_t*);
template void reduce_cuda<double>(ReduceOp, const double*, int64_t, int64_t, int64_t, double*, int64_t*);

}  // namespace mn::kernels
