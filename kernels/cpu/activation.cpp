// CPU activations: one flat loop per op over contiguous data, split across the
// thread pool. The switch on the activation kind sits outside the loop so each
// inner loop is a straight-line (vectorisable) expression.
#include "kernels/activation.h"

#include "runtime/dispatch.h"
#include "runtime/parallel.h"
#ifdef MN_WITH_CUDA
#include "runtime/cuda_check.h"
#endif

namespace mn::kernels {

const char* act_name(Act a) {
  switch (a) {
    case Act::ReLU: return "relu";
    case Act::ELU: return "elu";
    case Act::SELU: return "selu";
    case Act::Softplus: return "softplus";
    case Act::Sigmoid: return "sigmoid";
    case Act::Tanh: return "tanh";
  }
  return "activation";
}

namespace {
constexpr int64_t kGrain = 1 << 15;

template <Act A, typename T>
void fwd_loop(const ActParams& p, int64_t n, const T* x, T* y) {
  const T al = T(p.alpha), be = T(p.beta), th = T(p.threshold);
  parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = act_math::forward<T>(A, x[i], al, be, th);
  });
}
template <Act A, typename T>
void bwd_loop(const ActParams& p, int64_t n, const T* s, const T* gy, T* gx) {
  const T al = T(p.alpha), be = T(p.beta), th = T(p.threshold);
  parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) gx[i] = act_math::backward<T>(A, s[i], gy[i], al, be, th);
  });
}
}  // namespace

template <typename T>
void activation_forward_cpu(Act a, const ActParams& p, int64_t n, const T* x, T* y) {
  switch (a) {
    case Act::ReLU: return fwd_loop<Act::ReLU>(p, n, x, y);
    case Act::ELU: return fwd_loop<Act::ELU>(p, n, x, y);
    case Act::SELU: return fwd_loop<Act::SELU>(p, n, x, y);
    case Act::Softplus: return fwd_loop<Act::Softplus>(p, n, x, y);
    case Act::Sigmoid: return fwd_loop<Act::Sigmoid>(p, n, x, y);
    case Act::Tanh: return fwd_loop<Act::Tanh>(p, n, x, y);
  }
}

template <typename T>
void activation_backward_cpu(Act a, const ActParams& p, int64_t n, const T* s, const T* gy, T* gx) {
  switch (a) {
    case Act::ReLU: return bwd_loop<Act::ReLU>(p, n, s, gy, gx);
    case Act::ELU: return bwd_loop<Act::ELU>(p, n, s, gy, gx);
    case Act::SELU: return bwd_loop<Act::SELU>(p, n, s, gy, gx);
    case Act::Softplus: return bwd_loop<Act::Softplus>(p, n, s, gy, gx);
    case Act::Sigmoid: return bwd_loop<Act::Sigmoid>(p, n, s, gy, gx);
    case Act::Tanh: return bwd_loop<Act::Tanh>(p, n, s, gy, gx);
  }
}

template void activation_forward_cpu<float>(Act, const ActParams&, int64_t, const float*, float*);
template void activation_forward_cpu<double>(Act, const ActParams&, int64_t, const double*, double*);
template void activation_backward_cpu<float>(Act, const ActParams&, int64_t, const float*,
                                             const float*, float*);
template void activation_backward_cpu<double>(Act, const ActParams&, int64_t, const double*,
                                              const double*, double*);

Tensor activation_forward(Act a, const Tensor& x_in, const ActParams& p) {
  const char* op = act_name(a);
  check_defined(op, x_in, "x");
  check_floating(op, x_in);
  Tensor x = x_in.contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.numel() == 0) return y;
  MN_DISPATCH_KERNEL(op, x, activation_forward,
      a, p, x.numel(), x.data<scalar_t>(), y.data<scalar_t>());
  return y;
}

Tensor activation_backward(Act a, const Tensor& saved_in, const Tensor& gy_in, const ActParams& p) {
  const char* op = act_name(a);
  check_defined(op, saved_in, "saved");
  check_defined(op, gy_in, "grad_output");
  check_same_shape(op, saved_in, gy_in);
  check_same_dtype(op, saved_in, gy_in);
  check_same_device(op, saved_in, gy_in);
  Tensor s = saved_in.contiguous(), gy = gy_in.contiguous();
  Tensor gx = Tensor::empty(s.shape(), s.dtype(), s.device());
  if (s.numel() == 0) return gx;
  MN_DISPATCH_KERNEL(op, s, activation_backward,
      a, p, s.numel(), s.data<scalar_t>(), gy.data<scalar_t>(), gx.data<scalar_t>());
  return gx;
}

}  // namespace mn::kernels
