// CUDA row-block copy used by concat/stack (kernels/join.h): a grid-stride loop
// over the rows * row_len elements of one input (v1, the only version).
#include "kernels/join.h"
#include "runtime/cuda_check.h"

namespace mn::kernels {

namespace {
template <typename E>
__global__ void copy_rows_kernel(const E* __restrict__ src, int64_t total, int64_t row_len,
                                 E* __restrict__ dst, int64_t dst_stride) {
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
       t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = t / row_len, j = t % row_len;
    dst[r * dst_stride + j] = src[t];
  }
}
}  // namespace

template <typename E>
void copy_rows_cuda(const E* src, int64_t rows, int64_t row_len, E* dst, int64_t dst_stride) {
  const int64_t total = rows * row_len;
  if (total == 0) return;
  copy_rows_kernel<E><<<cuda::grid_for(total, 256), 256, 0, cuda::stream()>>>(src, total, row_len, dst, dst_stride);
  CUDA_CHECK_LAUNCH("copy_rows_kernel");
}

template void copy_rows_cuda<uint8_t>(const uint8_t*, int64_t, int64_t, uint8_t*, int64_t);
template void copy_rows_cuda<uint32_t>(const uint32_t*, int64_t, int64_t, uint32_t*, int64_t);
template void copy_rows_cuda<uint64_t>(const uint64_t*, int64_t, int64_t, uint64_t*, int64_t);

}  // namespace mn::kernels
