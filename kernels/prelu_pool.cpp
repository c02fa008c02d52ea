// PReLU + max pooling: argument checks and dispatch. CPU: the fused kernels of
// kernels/cpu/prelu_pool.cpp. CUDA: the existing PReLU and max-pool kernels one
// after the other (see kernels/prelu_pool.h).
#include "kernels/prelu_pool.h"

#include "kernels/prelu.h"
#include "runtime/dispatch.h"

namespace mn::kernels {
namespace {
Pool2dGeom check_args(const char* op, const Tensor& x, const Tensor& a, const Pool2dParams& p) {
  check_defined(op, x, "input");
  check_defined(op, a, "weight");
  check_floating(op, x);
  check_same_dtype(op, x, a);
  check_same_device(op, x, a);
  const Pool2dGeom g = pool2d_geometry(op, x.shape(), p);
  MN_CHECK(a.dim() == 1 && (a.numel() == 1 || a.numel() == g.C), op,
           ": weight must have 1 element or one per channel (", g.C, ", dim 1 of x ", x.desc(),
           "), got ", a.desc());
  return g;
}
}  // namespace

std::pair<Tensor, Tensor> prelu_max_pool2d_forward(const Tensor& x_, const Tensor& a_,
                                                   const Pool2dParams& p) {
  const char* op = "prelu_max_pool2d";
  const Pool2dGeom g = check_args(op, x_, a_, p);
  if (x_.device().is_cuda()) return max_pool2d_forward(prelu_forward(x_, a_), p);
  const Tensor x = x_.contiguous(), a = a_.contiguous();
  Tensor y = Tensor::empty({g.N, g.C, g.P, g.Q}, x.dtype(), x.device());
  Tensor am = Tensor::empty({g.N, g.C, g.P, g.Q}, DType::I32, x.device());
  if (y.numel() == 0) return {y, am};
  MN_DISPATCH_FLOAT(x.dtype(), op, [&] {
    prelu_max_pool2d_forward_cpu<scalar_t>(g, x.data<scalar_t>(), a.data<scalar_t>(), a.numel(),
                                           y.data<scalar_t>(), am.data<int32_t>());
  });
  return {y, am};
}

std::pair<Tensor, Tensor> prelu_max_pool2d_backward(const Tensor& x_, const Tensor& a_,
                                                    const Tensor& gy_, const Tensor& am_,
                                                    const Pool2dParams& p) {
  const char* op = "prelu_max_pool2d_backward";
  const Pool2dGeom g = check_args(op, x_, a_, p);
  check_defined(op, gy_, "grad_output");
  check_defined(op, am_, "argmax");
  check_same_dtype(op, x_, gy_);
  check_same_device(op, x_, gy_);
  check_same_device(op, x_, am_);
  const Shape ys{g.N, g.C, g.P, g.Q};
  MN_CHECK(gy_.shape() == ys && am_.shape() == ys, op, ": grad_output ", shape_str(gy_.shape()),
           " and argmax ", shape_str(am_.shape()), " must be ", shape_str(ys), " for input ",
           shape_str(x_.shape()));
  MN_CHECK(am_.dtype() == DType::I32, op, ": argmax must be int32, got ", dtype_name(am_.dtype()));
  if (x_.device().is_cuda()) return prelu_backward(x_, a_, max_pool2d_backward(gy_, am_, x_.shape(), p));
  const Tensor x = x_.contiguous(), a = a_.contiguous(), gy = gy_.contiguous(), am = am_.contiguous();
  Tensor gx = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor ga = Tensor::zeros(a.shape(), a.dtype(), a.device());
  if (x.numel() == 0) return {gx, ga};
  MN_DISPATCH_FLOAT(x.dtype(), op, [&] {
    prelu_max_pool2d_backward_cpu<scalar_t>(g, x.data<scalar_t>(), a.data<scalar_t>(), a.numel(),
                                            gy.data<scalar_t>(), am.data<int32_t>(),
                                            gx.data<scalar_t>(), ga.data<scalar_t>());
  });
  return {gx, ga};
}

}  // namespace mn::kernels
