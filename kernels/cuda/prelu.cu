// CUDA PReLU (see kernels/prelu.h). Forward and input gradient: one thread per
// element. Slope gradient: one block per channel, each thread summing a fixed
// strided subset of the channel's N*S elements, then a fixed shared-memory tree;
// a shared slope uses one block that walks the channels in order. No atomics,
// so the result is the same on every run.
#include "kernels/prelu.h"
#include <algorithm>

#include "runtime/cuda_check.h"

namespace mn::kernels {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void prelu_fwd_kernel(int64_t n, int64_t C, int64_t S, const T* __restrict__ x, const T* __restrict__ a,
                                 int64_t na, T* __restrict__ y) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const T v = x[i];
    y[i] = v > T(0) ? v : a[na == 1 ? 0 : (i / S) % C] * v;
  }
}

template <typename T>
__global__ void prelu_bwd_x_kernel(int64_t n, int64_t C, int64_t S, const T* __restrict__ x, const T* __restrict__ a,
                                   int64_t na, const T* __restrict__ gy, T* __restrict__ gx) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    gx[i] = x[i] > T(0) ? gy[i] : a[na == 1 ? 0 : (i / S) % C] * gy[i];
}

// Sum over channel c's elements of gy * x where x <= 0, by the whole block;
// thread 0 gets the result.
template <typename T>
__device__ T channel_sum(int64_t N, int64_t C, int64_t S, int64_t c, const T* __restrict__ x,
                         const T* __restrict__ gy, T* sh) {
  T acc = T(0);
  const int64_t m = N * S;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const int64_t i = ((j / S) * C + c) * S + j % S;
    const T v = x[i];
    if (!(v > T(0))) acc += gy[i] * v;
  }
  sh[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  const T out = sh[0];
  __syncthreads();  // sh is reused by the caller's next channel
  return out;
}

template <typename T>
__global__ void prelu_bwd_a_kernel(int64_t N, int64_t C, int64_t S, const T* __restrict__ x, const T* __restrict__ gy,
                                   int64_t na, T* __restrict__ ga) {
  __shared__ T sh[kThreads];
  if (na == 1) {  // one block: the channels in order
    T total = T(0);
    for (int64_t c = 0; c < C; ++c) total += channel_sum(N, C, S, c, x, gy, sh);
    if (threadIdx.x == 0) ga[0] = total;
    return;
  }
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    const T s = channel_sum(N, C, S, c, x, gy, sh);
    if (threadIdx.x == 0) ga[c] = s;
  }
}

}  // namespace

template <typename T>
void prelu_forward_cuda(int64_t N, int64_t C, int64_t S, const T* x, const T* a, int64_t na, T* y) {
  const int64_t n = N * C * S;
  prelu_fwd_kernel<T><<<cuda::grid_for(n), kThreads, 0, cuda::stream()>>>(n, C, S, x, a, na, y);
  CUDA_CHECK_LAUNCH("prelu_fwd_kernel");
}

template <typename T>
void prelu_backward_cuda(int64_t N, int64_t C, int64_t S, const T* x, const T* a, int64_t na, const T* gy, T* gx,
                         T* ga) {
  const int64_t n = N * C * S;
  prelu_bwd_x_kernel<T><<<cuda::grid_for(n), kThreads, 0, cuda::stream()>>>(n, C, S, x, a, na, gy, gx);
  CUDA_CHECK_LAUNCH("prelu_bwd_x_kernel");
  const unsigned blocks = na == 1 ? 1u : static_cast<unsigned>(std::min<int64_t>(C, 65535));
  prelu_bwd_a_kernel<T><<<blocks, kThreads, 0, cuda::stream()>>>(N, C, S, x, gy, na, ga);
  CUDA_CHECK_LAUNCH("prelu_bwd_a_kernel");
}

template void prelu_forward_cuda<float>(int64_t, int64_t, int64_t, const float*, const float*, int64_t, float*);
template void prelu_forward_cuda<double>(int64_t, int64_t, int64_t, const double*, const double*, int64_t, double*);
template void prelu_backward_cuda<float>(int64_t, int64_t, int64_t, const float*, const float*, int64_t,
                                         const float*, float*, float*);
template void prelu_backward_cuda<double>(int64_t, int64_t, int64_t, const double*, const double*, int64_t,
                                          const double*, double*, double*);

}  // namespace mn::kernels
