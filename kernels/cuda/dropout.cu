// CUDA dropout: one thread per Philox block (four elements), the same rounds and
// the same float compare as the CPU (runtime/philox.h), so masks match bit for bit.
#include "kernels/dropout.h"
#include "runtime/cuda_check.h"
#include "runtime/philox.h"

namespace mn::kernels {
namespace {

template <typename T>
__global__ void dropout_fwd_kernel(int64_t n, const T* __restrict__ x, float pf, T keep,
                                   uint64_t seed, uint64_t offset, uint8_t* __restrict__ mask,
                                   T* __restrict__ y) {
  const int64_t blocks = (n + 3) / 4;
  for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < blocks;
       j += (int64_t)gridDim.x * blockDim.x) {
    const Philox4 r = philox4x32_10(seed, offset + static_cast<uint64_t>(j));
    const int64_t base = j * 4;
    const int cnt = n - base < 4 ? static_cast<int>(n - base) : 4;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if (k < cnt) {
        const bool kept = philox_uniform_float(r.v[k]) >= pf;
        mask[base + k] = kept ? 1 : 0;
        y[base + k] = kept ? x[base + k] / keep : T(0);
      }
    }
  }
}

template <typename T>
__global__ void dropout_bwd_kernel(int64_t n, const T* __restrict__ gy,
                                   const uint8_t* __restrict__ mask, T keep, T* __restrict__ gx) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    gx[i] = mask[i] ? gy[i] / keep : T(0);
}
}  // namespace

template <typename T>
void dropout_forward_cuda(int64_t n, const T* x, double p, uint64_t seed, uint64_t offset,
                          uint8_t* mask, T* y) {
  const int64_t blocks = (n + 3) / 4;
  dropout_fwd_kernel<T><<<cuda::grid_for(blocks), 256, 0, cuda::stream()>>>(
      n, x, static_cast<float>(p), T(1.0 - p), seed, offset, mask, y);
  CUDA_CHECK_LAUNCH("dropout_fwd_kernel");
}

template <typename T>
void dropout_backward_cuda(int64_t n, const T* gy, const uint8_t* mask, double p, T* gx) {
  dropout_bwd_kernel<T><<<cuda::grid_for(n), 256, 0, cuda::stream()>>>(n, gy, mask, T(1.0 - p),
                                                                       gx);
  CUDA_CHECK_LAUNCH("dropout_bwd_kernel");
}

template void dropout_forward_cuda<float>(int64_t, const float*, double, uint64_t, uint64_t,
                                          uint8_t*, float*);
template void dropout_forward_cuda<double>(int64_t, const double*, double, uint64_t, uint64_t,
                                           uint8_t*, double*);
template void dropout_backward_cuda<float>(int64_t, const float*, const uint8_t*, double, float*);
template void dropout_backward_cuda<double>(int64_t, const double*, const uint8_t*, double,
                                            double*);

}  // namespace mn::kernels
