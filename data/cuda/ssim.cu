// SSIM on the GPU (see data/ssim.h). Version 1 (the only one): one block per
// image pair, each thread walks output pixels of the valid region with a
// grid-stride loop and evaluates the 11x11 Gaussian window directly from
// global memory (the two 105x105 images stay in L1/L2); accumulation in double,
// a fixed-order block reduction, so results are deterministic.
#include "data/ssim.h"
#include "runtime/cuda_check.h"

namespace mn::data {

namespace {
__constant__ double c_w[kSsimWindow];

template <typename T>
__global__ void ssim_pairs_kernel(const T* __restrict__ images, int64_t N, int H, int W,
                                  const int64_t* __restrict__ ia, const int64_t* __restrict__ ib,
                                  double C1, double C2, T* __restrict__ out) {
  constexpr int K = kSsimWindow;
  const int64_t p = blockIdx.x;
  const int64_t a = ia[p], b = ib[p];
  __shared__ double partial[256];
  double acc = 0;
  if (a >= 0 && a < N && b >= 0 && b < N) {
    const T* x = images + a * H * W;
    const T* y = images + b * H * W;
    const int Ho = H - K + 1, Wo = W - K + 1;
    for (int o = threadIdx.x; o < Ho * Wo; o += blockDim.x) {
      const int r = o / Wo, c = o % Wo;
      double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
      for (int i = 0; i < K; ++i) {
        const T* xr = x + (r + i) * W + c;
        const T* yr = y + (r + i) * W + c;
        for (int j = 0; j < K; ++j) {
          const double wt = c_w[i] * c_w[j];
          const double u = xr[j], v = yr[j];
          sx += wt * u;
          sy += wt * v;
          sxx += wt * u * u;
          syy += wt * v * v;
          sxy += wt * u * v;
        }
      }
      const double vx = sxx - sx * sx, vy = syy - sy * sy, cxy = sxy - sx * sy;
      acc += ((2 * sx * sy + C1) * (2 * cxy + C2)) / ((sx * sx + sy * sy + C1) * (vx + vy + C2));
    }
    acc /= static_cast<double>(Ho * Wo);
  } else {
    acc = nan("");  // out-of-range index: visible as NaN rather than a wrong number
  }
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[p] = static_cast<T>(partial[0]);
}
}  // namespace

template <typename T>
void ssim_pairs_cuda(const T* images, int64_t N, int64_t H, int64_t W, const int64_t* ia,
                     const int64_t* ib, int64_t P, double L, T* out) {
  MN_CHECK(H >= kSsimWindow && W >= kSsimWindow, "ssim: images must be at least 11x11, got ", H,
           "x", W);
  double w[kSsimWindow];
  ssim_gaussian_1d(w);
  CUDA_CHECK(cudaMemcpyToSymbolAsync(c_w, w, sizeof w, 0, cudaMemcpyHostToDevice, cuda::stream()));
  const double C1 = (0.01 * L) * (0.01 * L), C2 = (0.03 * L) * (0.03 * L);
  for (int64_t p0 = 0; p0 < P; p0 += 65535) {
    const int64_t n = P - p0 < 65535 ? P - p0 : 65535;
    ssim_pairs_kernel<T><<<static_cast<unsigned>(n), 256, 0, cuda::stream()>>>(
        images, N, static_cast<int>(H), static_cast<int>(W), ia + p0, ib + p0, C1, C2, out + p0);
    CUDA_CHECK_LAUNCH("ssim_pairs_kernel");
  }
}

template void ssim_pairs_cuda<float>(const float*, int64_t, int64_t, int64_t, const int64_t*,
                                     const int64_t*, int64_t, double, float*);
template void ssim_pairs_cuda<double>(const double*, int64_t, int64_t, int64_t, const int64_t*,
                                      const int64_t*, int64_t, double, double*);

}  // namespace mn::data
