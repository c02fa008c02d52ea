// CUDA fills of the Philox generator: one thread per Philox block, grid-stride,
// running the very same fill_block as the CPU (runtime/philox.h), so uniform,
// normal, Bernoulli and integer fills are bit-identical to the CPU's for the
// same (seed, offset). Launched on mn::cuda::stream().
#include <cstdint>

#include "runtime/cuda_check.h"
#include "runtime/philox.h"

namespace mn::rng_detail {
namespace {

template <typename T>
__global__ void philox_fill_kernel(T* out, FillArgs f, int64_t nblocks) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < nblocks;
       j += int64_t(gridDim.x) * blockDim.x) {
    fill_block<T>(out, f, j);
  }
}

}  // namespace

template <typename T>
void fill_cuda(T* out, const FillArgs& f, int device) {
  if (f.n <= 0) return;
  const int per = elems_per_block(f.kind);
  const int64_t nblocks = (f.n + per - 1) / per;
  CUDA_CHECK(cudaSetDevice(device));
  const int threads = 256;
  philox_fill_kernel<T><<<cuda::grid_for(nblocks, threads), threads, 0, cuda::stream()>>>(
      out, f, nblocks);
  CUDA_CHECK_LAUNCH("philox_fill_kernel");
}

template void fill_cuda<float>(float*, const FillArgs&, int);
template void fill_cuda<double>(double*, const FillArgs&, int);
template void fill_cuda<int32_t>(int32_t*, const FillArgs&, int);
template void fill_cuda<int64_t>(int64_t*, const FillArgs&, int);
template void fill_cuda<uint8_t>(uint8_t*, const FillArgs&, int);

}  // namespace mn::rng_detail
