// CUDA element copy with dtype conversion over arbitrary strides (broadcast
// sources have stride 0), and fill. One kernel per (src, dst) dtype pair.
#include "runtime/copy_kernels.h"
#include "runtime/cuda_check.h"
#include "runtime/dispatch.h"
#include "runtime/strided.h"

namespace mn::detail {
namespace {

template <typename S, typename D>
__global__ void copy_kernel(const S* src, D* dst, int64_t n, StridedIndexer si, StridedIndexer di,
                            bool contiguous) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    if (contiguous) {
      dst[i] = static_cast<D>(src[i]);
    } else {
      dst[di.offset(i)] = static_cast<D>(src[si.offset(i)]);
    }
  }
}

template <typename D>
__global__ void fill_kernel(D* dst, int64_t n, StridedIndexer di, bool contiguous, D v) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    dst[contiguous ? i : di.offset(i)] = v;
  }
}

}  // namespace

void strided_copy_cuda(const Tensor& src, const Tensor& dst) {
  int64_t n = dst.numel();
  if (n == 0) return;
  CUDA_CHECK(cudaSetDevice(dst.device().index));
  bool contiguous = src.is_contiguous() && dst.is_contiguous() && src.numel() == n;
  if (contiguous && src.dtype() == dst.dtype()) {
    CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), dst.nbytes(),
                               cudaMemcpyDeviceToDevice, cuda::stream()));
    return;
  }
  StridedIndexer si = make_indexer(src, dst.shape()), di = make_indexer(dst);
  MN_DISPATCH_ALL(src.dtype(), "copy_", [&] {
    using S = scalar_t;
    MN_DISPATCH_ALL(dst.dtype(), "copy_", [&] {
      copy_kernel<S, scalar_t><<<cuda::grid_for(n), 256, 0, cuda::stream()>>>(
          src.data<S>(), dst.data<scalar_t>(), n, si, di, contiguous);
      CUDA_CHECK_LAUNCH("copy_kernel");
    });
  });
}

void fill_cuda(const Tensor& dst, double value) {
  int64_t n = dst.numel();
  if (n == 0) return;
  CUDA_CHECK(cudaSetDevice(dst.device().index));
  StridedIndexer di = make_indexer(dst);
  MN_DISPATCH_ALL(dst.dtype(), "fill_", [&] {
    fill_kernel<scalar_t><<<cuda::grid_for(n), 256, 0, cuda::stream()>>>(
        dst.data<scalar_t>(), n, di, dst.is_contiguous(), static_cast<scalar_t>(value));
    CUDA_CHECK_LAUNCH("fill_kernel");
  });
}

}  // namespace mn::detail
