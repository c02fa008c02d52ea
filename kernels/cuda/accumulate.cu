// y += alpha * x on the GPU (grid-stride loop).
#include "kernels/accumulate.h"
#include "runtime/cuda_check.h"

namespace mn::kernels {

template <typename T>
__global__ void axpy_kernel(int64_t n, T alpha, const T* __restrict__ x, T* __restrict__ y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] += alpha * x[i];
}

template <typename T>
void axpy_cuda(int64_t n, T alpha, const T* x, T* y) {
  if (n == 0) return;
  axpy_kernel<T><<<cuda::grid_for(n), 256, 0, cuda::stream()>>>(n, alpha, x, y);
  CUDA_CHECK_LAUNCH("axpy_kernel");
}
template void axpy_cuda<float>(int64_t, float, const float*, float*);
template void axpy_cuda<double>(int64_t, double, const double*, double*);

}  // namespace mn::kernels
