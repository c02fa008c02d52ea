// CUDA LRN across channels (v1): one thread per element of (N, C, HW), adjacent
// threads adjacent in HW so every window read is coalesced; the n-fold re-reads
// of neighbouring channel planes are served by L1/L2.
#include "kernels/lrn.h"
#include "runtime/cuda_check.h"

namespace mn::kernels {
namespace {

template <typename T>
__global__ void lrn_fwd_kernel(int64_t N, int64_t C, int64_t HW, int64_t size, T alpha, T beta,
                               T k, const T* __restrict__ x, T* __restrict__ y,
                               T* __restrict__ scale) {
  const int64_t total = N * C * HW;
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total;
       idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = idx % HW, nc = idx / HW, c = nc % C, n = nc / C;
    int64_t lo = c - (size - 1) / 2, hi = c + size / 2;
    lo = lo < 0 ? 0 : lo;
    hi = hi > C - 1 ? C - 1 : hi;
    const T* base = x + n * C * HW + i;
    T acc = T(0);
    for (int64_t cc = lo; cc <= hi; ++cc) {
      const T v = base[cc * HW];
      acc += v * v;
    }
    const T s = k + alpha * acc;
    scale[idx] = s;
    y[idx] = x[idx] * pow(s, -beta);
  }
}

template <typename T>
__global__ void lrn_bwd_kernel(int64_t N, int64_t C, int64_t HW, int64_t size, T coef, T beta,
                               const T* __restrict__ x, const T* __restrict__ y,
                               const T* __restrict__ scale, const T* __restrict__ gy,
                               T* __restrict__ gx) {
  const int64_t total = N * C * HW;
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total;
       idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = idx % HW, nc = idx / HW, c = nc % C, n = nc / C;
    int64_t lo = c - size / 2, hi = c + (size - 1) / 2;
    lo = lo < 0 ? 0 : lo;
    hi = hi > C - 1 ? C - 1 : hi;
    const int64_t base = n * C * HW + i;
    T acc = T(0);
    for (int64_t j = lo; j <= hi; ++j) {
      const int64_t o = base + j * HW;
      acc += gy[o] * y[o] / scale[o];
    }
    gx[idx] = gy[idx] * pow(scale[idx], -beta) - coef * x[idx] * acc;
  }
}
}  // namespace

template <typename T>
void lrn_forward_cuda(const LrnOptions& o, int64_t N, int64_t C, int64_t HW, const T* x, T* y,
                      T* scale) {
  const int64_t total = N * C * HW;
  lrn_fwd_kernel<T><<<cuda::grid_for(total), 256, 0, cuda::stream()>>>(
      N, C, HW, o.size, T(o.effective_alpha()), T(o.beta), T(o.k), x, y, scale);
  CUDA_CHECK_LAUNCH("lrn_fwd_kernel");
}

template <typename T>
void lrn_backward_cuda(const LrnOptions& o, int64_t N, int64_t C, int64_t HW, const T* x,
                       const T* y, const T* scale, const T* gy, T* gx) {
  const int64_t total = N * C * HW;
  lrn_bwd_kernel<T><<<cuda::grid_for(total), 256, 0, cuda::stream()>>>(
      N, C, HW, o.size, T(2.0 * o.effective_alpha() * o.beta), T(o.beta), x, y, scale, gy, gx);
  CUDA_CHECK_LAUNCH("lrn_bwd_kernel");
}

template void lrn_forward_cuda<float>(const LrnOptions&, int64_t, int64_t, int64_t, const float*,
                                      float*, float*);
template void lrn_forward_cuda<double>(const LrnOptions&, int64_t, int64_t, int64_t,
                                       const double*, double*, double*);
template void lrn_backward_cuda<float>(const LrnOptions&, int64_t, int64_t, int64_t, const float*,
                                       const float*, const float*, const float*, float*);
template void lrn_backward_cuda<double>(const LrnOptions&, int64_t, int64_t, int64_t,
                                        const double*, const double*, const double*,
                                        const double*, double*);

}  // namespace mn::kernels
