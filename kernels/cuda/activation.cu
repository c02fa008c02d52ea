// CUDA activations: grid-stride elementwise kernels templated on the activation
// kind, so each launch is a branch-free loop. Same scalar formulas as the CPU
// (kernels/activation.h, act_math).
#include "kernels/activation.h"
#include "runtime/cuda_check.h"

namespace mn::kernels {
namespace {

template <Act A, typename T>
__global__ void act_fwd_kernel(int64_t n, const T* __restrict__ x, T* __restrict__ y, T al, T be,
                               T th) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    y[i] = act_math::forward<T>(A, x[i], al, be, th);
}

template <Act A, typename T>
__global__ void act_bwd_kernel(int64_t n, const T* __restrict__ s, const T* __restrict__ gy,
                               T* __restrict__ gx, T al, T be, T th) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    gx[i] = act_math::backward<T>(A, s[i], gy[i], al, be, th);
}

template <Act A, typename T>
void launch_fwd(const ActParams& p, int64_t n, const T* x, T* y) {
  act_fwd_kernel<A, T><<<cuda::grid_for(n), 256, 0, cuda::stream()>>>(n, x, y, T(p.alpha),
                                                                      T(p.beta), T(p.threshold));
  CUDA_CHECK_LAUNCH("act_fwd_kernel");
}
template <Act A, typename T>
void launch_bwd(const ActParams& p, int64_t n, const T* s, const T* gy, T* gx) {
  act_bwd_kernel<A, T><<<cuda::grid_for(n), 256, 0, cuda::stream()>>>(
      n, s, gy, gx, T(p.alpha), T(p.beta), T(p.threshold));
  CUDA_CHECK_LAUNCH("act_bwd_kernel");
}
}  // namespace

template <typename T>
void activation_forward_cuda(Act a, const ActParams& p, int64_t n, const T* x, T* y) {
  switch (a) {
    case Act::ReLU: return launch_fwd<Act::ReLU>(p, n, x, y);
    case Act::ELU: return launch_fwd<Act::ELU>(p, n, x, y);
    case Act::SELU: return launch_fwd<Act::SELU>(p, n, x, y);
    case Act::Softplus: return launch_fwd<Act::Softplus>(p, n, x, y);
    case Act::Sigmoid: return launch_fwd<Act::Sigmoid>(p, n, x, y);
    case Act::Tanh: return launch_fwd<Act::Tanh>(p, n, x, y);
  }
}

template <typename T>
void activation_backward_cuda(Act a, const ActParams& p, int64_t n, const T* s, const T* gy,
                              T* gx) {
  switch (a) {
    case Act::ReLU: return launch_bwd<Act::ReLU>(p, n, s, gy, gx);
    case Act::ELU: return launch_bwd<Act::ELU>(p, n, s, gy, gx);
    case Act::SELU: return launch_bwd<Act::SELU>(p, n, s, gy, gx);
    case Act::Softplus: return launch_bwd<Act::Softplus>(p, n, s, gy, gx);
    case Act::Sigmoid: return launch_bwd<Act::Sigmoid>(p, n, s, gy, gx);
    case Act::Tanh: return launch_bwd<Act::Tanh>(p, n, s, gy, gx);
  }
}

template void activation_forward_cuda<float>(Act, const ActParams&, int64_t, const float*, float*);
template void activation_forward_cuda<double>(Act, const ActParams&, int64_t, const double*,
                                              double*);
template void activation_backward_cuda<float>(Act, const ActParams&, int64_t, const float*,
                                              const float*, float*);
template void activation_backward_cuda<double>(Act, const ActParams&, int64_t, const double*,
                                               const double*, double*);

}  // namespace mn::kernels
