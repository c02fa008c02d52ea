// Bilinear affine warp on the GPU (see data/augment.h). Version 1: one thread per
// output pixel over (N, H, W), parameters per image read from a (N, 6) float
// array; the float expression order matches affine_warp_cpu.
#include "data/augment.h"
#include "runtime/cuda_check.h"

namespace mn::data {

namespace {
template <typename T>
__global__ void affine_warp_kernel(const T* __restrict__ in, int64_t N, int H, int W,
                                   const Affine2D* __restrict__ P, T fill, T* __restrict__ out) {
  const int64_t total = N * H * W;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = i / (static_cast<int64_t>(H) * W);
    const int y = static_cast<int>((i / W) % H), x = static_cast<int>(i % W);
    const float* m = P[n].m;
    const T* src = in + n * H * W;
    const float xf = static_cast<float>(x), yf = static_cast<float>(y);
    // __fmul_rn/__fadd_rn keep nvcc from contracting to FMA, as on the CPU.
    const float sx = __fadd_rn(__fadd_rn(__fmul_rn(m[0], xf), __fmul_rn(m[1], yf)), m[2]);
    const float sy = __fadd_rn(__fadd_rn(__fmul_rn(m[3], xf), __fmul_rn(m[4], yf)), m[5]);
    const float fx = floorf(sx), fy = floorf(sy);
    const int x0 = static_cast<int>(fx), y0 = static_cast<int>(fy);
    const float ax = sx - fx, ay = sy - fy;
    auto at = [&](int yy, int xx) -> float {
      return (yy >= 0 && yy < H && xx >= 0 && xx < W) ? static_cast<float>(src[yy * W + xx])
                                                      : static_cast<float>(fill);
    };
    const float top = __fadd_rn(__fmul_rn(at(y0, x0), 1.f - ax), __fmul_rn(at(y0, x0 + 1), ax));
    const float bot = __fadd_rn(__fmul_rn(at(y0 + 1, x0), 1.f - ax), __fmul_rn(at(y0 + 1, x0 + 1), ax));
    out[i] = static_cast<T>(__fadd_rn(__fmul_rn(top, 1.f - ay), __fmul_rn(bot, ay)));
  }
}
}  // namespace

template <typename T>
void affine_warp_cuda(const T* in, int64_t N, int64_t H, int64_t W, const Affine2D* P, T fill, T* out) {
  affine_warp_kernel<T><<<cuda::grid_for(N * H * W), 256, 0, cuda::stream()>>>(
      in, N, static_cast<int>(H), static_cast<int>(W), P, fill, out);
  CUDA_CHECK_LAUNCH("affine_warp_kernel");
}

template void affine_warp_cuda<float>(const float*, int64_t, int64_t, int64_t, const Affine2D*, float, float*);
template void affine_warp_cuda<double>(const double*, int64_t, int64_t, int64_t, const Affine2D*, double,
                                       double*);

}  // namespace mn::data
