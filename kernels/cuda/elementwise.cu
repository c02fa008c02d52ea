// CUDA elementwise kernels: grid-stride loops over contiguous buffers (the
// same-shape fast path) and over the output of a broadcast, where each operand
// is read through a StridedIndexer. The formulas are the ones of the CPU oracle
// (kernels/elementwise_math.h). Versions: v1 = grid-stride loop, one element per
// thread per iteration (the only version so far; memory-bound ops reach most of
// the bandwidth with it, see bench/bench_elementwise.cpp).
#include "kernels/elementwise.h"
#include "kernels/elementwise_math.h"
#include "runtime/cuda_check.h"

namespace mn::kernels {

namespace {
constexpr int kThreads = 256;

template <UnaryOp OP, typename T>
__global__ void unary_fwd_kernel(int64_t n, const T* __restrict__ x, T* __restrict__ y, T p0, T p1) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    y[i] = detail::unary_fwd<OP, T>(x[i], p0, p1);
}

template <UnaryOp OP, typename T>
__global__ void unary_bwd_kernel(int64_t n, const T* __restrict__ gy, const T* __restrict__ x,
                                 const T* __restrict__ y, T* __restrict__ gx, T p0, T p1) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    gx[i] = detail::unary_bwd<OP, T>(gy[i], x ? x[i] : T(0), y ? y[i] : T(0), p0, p1);
}

template <BinaryOp OP, typename T>
__global__ void binary_fwd_kernel(int64_t n, const T* __restrict__ a, const T* __restrict__ b,
                                  T* __restrict__ out) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[i] = detail::binary_fwd<OP, T>(a[i], b[i]);
}

template <BinaryOp OP, typename T>
__global__ void binary_fwd_strided_kernel(int64_t n, const T* __restrict__ a, StridedIndexer ia,
                                          const T* __restrict__ b, StridedIndexer ib,
                                          T* __restrict__ out) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[i] = detail::binary_fwd<OP, T>(a[ia.offset(i)], b[ib.offset(i)]);
}

template <BinaryOp OP, typename T>
__global__ void binary_bwd_strided_kernel(int64_t n, const T* __restrict__ g, const T* __restrict__ a,
                                          StridedIndexer ia, const T* __restrict__ b,
                                          StridedIndexer ib, T* __restrict__ ga, T* __restrict__ gb) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    T da, db;
    detail::binary_bwd<OP, T>(g[i], a[ia.offset(i)], b[ib.offset(i)], da, db);
    if (ga) ga[i] = da;
    if (gb) gb[i] = db;
  }
}

template <BinaryOp OP, typename T>
__global__ void binary_scalar_kernel(int64_t n, const T* __restrict__ x, T s, bool scalar_left,
                                     T* __restrict__ out) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[i] = scalar_left ? detail::binary_fwd<OP, T>(s, x[i]) : detail::binary_fwd<OP, T>(x[i], s);
}
}  // namespace

template <typename T>
void unary_forward_cuda(UnaryOp op, int64_t n, const T* x, T* y, T p0, T p1) {
  if (n == 0) return;
  MN_UNARY_SWITCH(op, unary_fwd_kernel<OP_, T><<<cuda::grid_for(n, kThreads), kThreads, 0, cuda::stream()>>>(n, x, y, p0, p1));
  CUDA_CHECK_LAUNCH("unary_fwd_kernel");
}

template <typename T>
void unary_backward_cuda(UnaryOp op, int64_t n, const T* gy, const T* x, const T* y, T* gx, T p0,
                         T p1) {
  if (n == 0) return;
  MN_UNARY_SWITCH(op, unary_bwd_kernel<OP_, T><<<cuda::grid_for(n, kThreads), kThreads, 0, cuda::stream()>>>(n, gy, x, y, gx, p0, p1));
  CUDA_CHECK_LAUNCH("unary_bwd_kernel");
}

template <typename T>
void binary_forward_cuda(BinaryOp op, int64_t n, const T* a, const T* b, T* out) {
  if (n == 0) return;
  MN_BINARY_SWITCH(op, binary_fwd_kernel<OP_, T><<<cuda::grid_for(n, kThreads), kThreads, 0, cuda::stream()>>>(n, a, b, out));
  CUDA_CHECK_LAUNCH("binary_fwd_kernel");
}

template <typename T>
void binary_forward_strided_cuda(BinaryOp op, int64_t n, const T* a, const StridedIndexer& ia,
                                 const T* b, const StridedIndexer& ib, T* out) {
  if (n == 0) return;
  MN_BINARY_SWITCH(op, binary_fwd_strided_kernel<OP_, T><<<cuda::grid_for(n, kThreads), kThreads, 0, cuda::stream()>>>(n, a, ia, b, ib, out));
  CUDA_CHECK_LAUNCH("binary_fwd_strided_kernel");
}

template <typename T>
void binary_backward_strided_cuda(BinaryOp op, int64_t n, const T* g, const T* a,
                                  const StridedIndexer& ia, const T* b, const StridedIndexer& ib,
                                  T* ga, T* gb) {
  if (n == 0) return;
  MN_BINARY_SWITCH(op, binary_bwd_strided_kernel<OP_, T><<<cuda::grid_for(n, kThreads), kThreads, 0, cuda::stream()>>>(n, g, a, ia, b, ib, ga, gb));
  CUDA_CHECK_LAUNCH("binary_bwd_strided_kernel");
}

template <typename T>
void binary_scalar_cuda(BinaryOp op, int64_t n, const T* x, T s, bool scalar_left, T* out) {
  if (n == 0) return;
  MN_BINARY_SWITCH(op, binary_scalar_kernel<OP_, T><<<cuda::grid_for(n, kThreads), kThreads, 0, cuda::stream()>>>(n, x, s, scalar_left, out));
  CUDA_CHECK_LAUNCH("binary_scalar_kernel");
}

#define MN_INSTANTIATE(T)                                                                       \
  template void unary_forward_cuda<T>(UnaryOp, int64_t, const T*, T*, T, T);                    \
  template void unary_backward_cuda<T>(UnaryOp, int64_t, const T*, const T*, const T*, T*, T, T); \
  template void binary_forward_cuda<T>(BinaryOp, int64_t, const T*, const T*, T*);              \
  template void binary_forward_strided_cuda<T>(BinaryOp, int64_t, const T*, const StridedIndexer&, \
                                               const T*, const StridedIndexer&, T*);            \
  template void binary_backward_strided_cuda<T>(BinaryOp, int64_t, const T*, const T*,          \
                                                const StridedIndexer&, const T*,                \
                                                const StridedIndexer&, T*, T*);                 \
  template void binary_scalar_cuda<T>(BinaryOp, int64_t, const T*, T, bool, T*);
MN_INSTANTIATE(float)
MN_INSTANTIATE(double)
#undef MN_INSTANTIATE

}  // namespace mn::kernels
