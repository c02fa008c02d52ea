// Gather of uint8 images into a float batch on the GPU (see data/loader.h).
// Version 1: a grid-stride loop over (B, H*W) output elements; one thread per
// pixel, reading the source row through idx[b]. Out-of-range indices write NaN
// (checked on the host side only for the CPU path, to avoid a sync).
#include "data/loader.h"
#include "runtime/cuda_check.h"

namespace mn::data {

namespace {
template <typename T>
__global__ void gather_images_kernel(const uint8_t* __restrict__ src, int64_t N, int64_t plane,
                                     const int64_t* __restrict__ idx, int64_t B, bool ink,
                                     T* __restrict__ out) {
  const int64_t total = B * plane;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = i / plane, k = i % plane;
    const int64_t s = idx[b];
    if (s < 0 || s >= N) {
      out[i] = static_cast<T>(nan(""));
      continue;
    }
    const T v = static_cast<T>(src[s * plane + k]) / T(255);
    out[i] = ink ? T(1) - v : v;
  }
}
}  // namespace

template <typename T>
void gather_images_cuda(const uint8_t* src, int64_t N, int64_t plane, const int64_t* idx, int64_t B,
                        bool ink, T* out) {
  gather_images_kernel<T><<<cuda::grid_for(B * plane), 256, 0, cuda::stream()>>>(src, N, plane, idx, B,
                                                                                ink, out);
  CUDA_CHECK_LAUNCH("gather_images_kernel");
}

template void gather_images_cuda<float>(const uint8_t*, int64_t, int64_t, const int64_t*, int64_t, bool,
                                        float*);
template void gather_images_cuda<double>(const uint8_t*, int64_t, int64_t, const int64_t*, int64_t, bool,
                                         double*);

}  // namespace mn::data
