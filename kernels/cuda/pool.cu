// CUDA max / average pooling (semantics in kernels/pool.h). The per-thread bodies
// and their index maths are in kernels/pool_index.h (host + device, run thread by
// thread on the CPU by tests/kernels/test_pool_index.cpp); this file only launches
// them over slabs of planes whose indices fit 32 bits (pool_index::for_pool_slabs).
//
// Versions:
//   1  one thread per element with 64-bit `/` and `%` decodes; the max-pool backward
//      gathered per input element (about 1.4 ms of a Koch step on an H100, 2026-11-27).
//      Replaced: its arithmetic is exactly version 2's gather, which stays.
//   2  (this) 32-bit flat indices decoded with FastDiv. Max-pool backward:
//        scatter  windows that do not overlap (stride >= kernel): one thread per
//                 OUTPUT writes its whole cell (dy at the argmax, 0 elsewhere), no
//                 fill, no atomics; off with MN_POOL_SCATTER=0 (CudaSpeedups::
//                 pool_scatter: the gather below then runs, same bits).
//        gather   overlapping windows: one thread per input element sums the
//                 outputs that picked it, deterministic.
//      Both in a ReLU-masked form for max_pool2d_relu_backward.
#include "kernels/gemm_config.h"
#include "kernels/pool.h"
#include "kernels/pool_index.h"
#include "runtime/cuda_check.h"

namespace mn::kernels {
namespace {

using pool_index::PoolDev;
constexpr int kThreads = 256;

// Threads stride over [0, total) in uint32: total < 2^31 and the stride < 2^28, so
// i + stride never wraps.
#define MN_POOL_THREADS(i, total)                                                     \
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < (total); i += gridDim.x * blockDim.x)

template <typename T>
__global__ void max_pool_fwd(PoolDev g, const T* __restrict__ x, T* __restrict__ y,
                             int32_t* __restrict__ am, uint32_t total) {
  MN_POOL_THREADS(o, total) pool_index::max_pool_fwd_thread<T>(g, o, x, y, am);
}

template <typename T, bool Relu>
__global__ void max_pool_bwd_scatter(PoolDev g, const T* __restrict__ dy, const T* __restrict__ y,
                                     const int32_t* __restrict__ am, T* __restrict__ dx,
                                     uint32_t total) {
  MN_POOL_THREADS(o, total) pool_index::max_pool_bwd_scatter_thread<T, Relu>(g, o, dy, y, am, dx);
}

template <typename T, bool Relu>
__global__ void max_pool_bwd_gather(PoolDev g, const T* __restrict__ dy, const T* __restrict__ y,
                                    const int32_t* __restrict__ am, T* __restrict__ dx,
                                    uint32_t total) {
  MN_POOL_THREADS(i, total) pool_index::max_pool_bwd_gather_thread<T, Relu>(g, i, dy, y, am, dx);
}

template <typename T>
__global__ void avg_pool_fwd(PoolDev g, const T* __restrict__ x, T* __restrict__ y, bool cip,
                             uint32_t total) {
  MN_POOL_THREADS(o, total) pool_index::avg_pool_fwd_thread<T>(g, o, x, y, cip);
}

template <typename T>
__global__ void avg_pool_bwd(PoolDev g, const T* __restrict__ dy, T* __restrict__ dx, bool cip,
                             uint32_t total) {
  MN_POOL_THREADS(i, total) pool_index::avg_pool_bwd_thread<T>(g, i, dy, dx, cip);
}
#undef MN_POOL_THREADS

// Runs launch(d, in_off, out_off, count_in, count_out) per slab: the slab's element
// offsets into the (N, C, H, W) and (N, C, P, Q) buffers and its element counts.
template <typename F>
void over_slabs(const char* op, const Pool2dGeom& g, F&& launch) {
  const PoolDev d = pool_index::make_pool_dev(g);
  pool_index::for_pool_slabs(op, g, INT32_MAX, [&](int64_t p0, int64_t n) {
    launch(d, p0 * g.H * g.W, p0 * g.P * g.Q, static_cast<uint32_t>(n * g.H * g.W),
           static_cast<uint32_t>(n * g.P * g.Q));
  });
}

template <typename T, bool Relu>
void max_pool_backward(const char* op, const Pool2dGeom& g, const T* dy, const T* y,
                       const int32_t* am, T* dx) {
  const bool scatter = pool_index::windows_disjoint(int(g.kh), int(g.kw), int(g.sh), int(g.sw)) &&
                       cuda_speedups().pool_scatter;
  over_slabs(op, g, [&](const PoolDev& d, int64_t in, int64_t out, uint32_t nin, uint32_t nout) {
    const T* ys = Relu ? y + out : nullptr;
    if (scatter) {
      max_pool_bwd_scatter<T, Relu><<<cuda::grid_for(nout, kThreads), kThreads, 0, cuda::stream()>>>(
          d, dy + out, ys, am + out, dx + in, nout);
      CUDA_CHECK_LAUNCH("max_pool_bwd_scatter");
    } else {
      max_pool_bwd_gather<T, Relu><<<cuda::grid_for(nin, kThreads), kThreads, 0, cuda::stream()>>>(
          d, dy + out, ys, am + out, dx + in, nin);
      CUDA_CHECK_LAUNCH("max_pool_bwd_gather");
    }
  });
}

}  // namespace

template <typename T>
void max_pool2d_forward_cuda(const Pool2dGeom& g, const T* x, T* y, int32_t* argmax) {
  over_slabs("max_pool2d", g, [&](const PoolDev& d, int64_t in, int64_t out, uint32_t, uint32_t n) {
    max_pool_fwd<T><<<cuda::grid_for(n, kThreads), kThreads, 0, cuda::stream()>>>(d, x + in, y + out,
                                                                                 argmax + out, n);
    CUDA_CHECK_LAUNCH("max_pool_fwd");
  });
}
template <typename T>
void max_pool2d_backward_cuda(const Pool2dGeom& g, const T* dy, const int32_t* argmax, T* dx) {
  max_pool_backward<T, false>("max_pool2d_backward", g, dy, nullptr, argmax, dx);
}
template <typename T>
void max_pool2d_relu_backward_cuda(const Pool2dGeom& g, const T* dy, const T* y,
                                   const int32_t* argmax, T* dx) {
  max_pool_backward<T, true>("max_pool2d_relu_backward", g, dy, y, argmax, dx);
}
template <typename T>
void avg_pool2d_forward_cuda(const Pool2dGeom& g, const T* x, T* y, bool cip) {
  over_slabs("avg_pool2d", g, [&](const PoolDev& d, int64_t in, int64_t out, uint32_t, uint32_t n) {
    avg_pool_fwd<T><<<cuda::grid_for(n, kThreads), kThreads, 0, cuda::stream()>>>(d, x + in, y + out,
                                                                                 cip, n);
    CUDA_CHECK_LAUNCH("avg_pool_fwd");
  });
}
template <typename T>
void avg_pool2d_backward_cuda(const Pool2dGeom& g, const T* dy, T* dx, bool cip) {
  over_slabs("avg_pool2d_backward", g,
             [&](const PoolDev& d, int64_t in, int64_t out, uint32_t n, uint32_t) {
               avg_pool_bwd<T><<<cuda::grid_for(n, kThreads), kThreads, 0, cuda::stream()>>>(
                   d, dy + out, dx + in, cip, n);
               CUDA_CHECK_LAUNCH("avg_pool_bwd");
             });
}

#define MN_POOL_CUDA_INSTANTIATE(T)                                                             \
  template void max_pool2d_forward_cuda<T>(const Pool2dGeom&, const T*, T*, int32_t*);          \
  template void max_pool2d_backward_cuda<T>(const Pool2dGeom&, const T*, const int32_t*, T*);   \
  template void max_pool2d_relu_backward_cuda<T>(const Pool2dGeom&, const T*, const T*,         \
                                                 const int32_t*, T*);                           \
  template void avg_pool2d_forward_cuda<T>(const Pool2dGeom&, const T*, T*, bool);              \
  template void avg_pool2d_backward_cuda<T>(const Pool2dGeom&, const T*, T*, bool);
MN_POOL_CUDA_INSTANTIATE(float)
MN_POOL_CUDA_INSTANTIATE(double)
#undef MN_POOL_CUDA_INSTANTIATE

}  // namespace mn::kernels
