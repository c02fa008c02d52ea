// Pooling: parameter checks and Tensor-level dispatch to kernels/cpu/pool.cpp
// and kernels/cuda/pool.cu.
#include "kernels/pool.h"

#include <climits>

#include "runtime/dispatch.h"

namespace mn::kernels {

Pool2dGeom pool2d_geometry(const char* op, const Shape& xs, const Pool2dParams& p) {
  MN_CHECK(xs.size() == 4, op, ": input must be (N, C, H, W), got ", shape_str(xs));
  MN_CHECK(p.kernel_h >= 1 && p.kernel_w >= 1, op, ": kernel size must be >= 1, got (",
           p.kernel_h, ", ", p.kernel_w, ") for input ", shape_str(xs));
  Pool2dGeom g{};
  g.N = xs[0], g.C = xs[1], g.H = xs[2], g.W = xs[3];
  g.kh = p.kernel_h, g.kw = p.kernel_w;
  g.sh = p.stride_h > 0 ? p.stride_h : p.kernel_h;
  g.sw = p.stride_w > 0 ? p.stride_w : p.kernel_w;
  MN_CHECK(p.stride_h >= 0 && p.stride_w >= 0, op, ": negative stride (", p.stride_h, ", ",
           p.stride_w, ")");
  g.ph = p.pad_h, g.pw = p.pad_w;
  MN_CHECK(g.ph >= 0 && g.pw >= 0 && 2 * g.ph <= g.kh && 2 * g.pw <= g.kw, op, ": padding (",
           g.ph, ", ", g.pw, ") must be in [0, kernel/2] for kernel (", g.kh, ", ", g.kw, ")");
  MN_CHECK(g.H + 2 * g.ph >= g.kh && g.W + 2 * g.pw >= g.kw, op, ": kernel (", g.kh, ", ", g.kw,
           ") larger than padded input ", shape_str(xs), " + pad (", g.ph, ", ", g.pw, ")");
  MN_CHECK(g.H * g.W < INT_MAX, op, ": input plane too large for int32 argmax: ", shape_str(xs));
  g.P = (g.H + 2 * g.ph - g.kh) / g.sh + 1;
  g.Q = (g.W + 2 * g.pw - g.kw) / g.sw + 1;
  return g;
}

std::pair<Tensor, Tensor> max_pool2d_forward(const Tensor& x_, const Pool2dParams& p) {
  const char* op = "max_pool2d";
  check_defined(op, x_, "input");
  check_floating(op, x_);
  const Pool2dGeom g = pool2d_geometry(op, x_.shape(), p);
  const Tensor x = x_.contiguous();
  Tensor y = Tensor::empty({g.N, g.C, g.P, g.Q}, x.dtype(), x.device());
  Tensor am = Tensor::empty({g.N, g.C, g.P, g.Q}, DType::I32, x.device());
  if (y.numel() == 0) return {y, am};
  MN_DISPATCH_KERNEL(op, x, max_pool2d_forward,
      g, x.data<scalar_t>(), y.data<scalar_t>(), am.data<int32_t>());
  return {y, am};
}

Tensor max_pool2d_backward(const Tensor& dy_, const Tensor& am_, const Shape& x_shape,
                           const Pool2dParams& p) {
  const char* op = "max_pool2d_backward";
  check_defined(op, dy_, "grad_output");
  check_defined(op, am_, "argmax");
  check_same_device(op, dy_, am_);
  const Pool2dGeom g = pool2d_geometry(op, x_shape, p);
  const Shape ys{g.N, g.C, g.P, g.Q};
  MN_CHECK(dy_.shape() == ys && am_.shape() == ys, op, ": grad_output ", shape_str(dy_.shape()),
           " and argmax ", shape_str(am_.shape()), " must be ", shape_str(ys), " for input ",
           shape_str(x_shape));
  MN_CHECK(am_.dtype() == DType::I32, op, ": argmax must be int32, got ", dtype_name(am_.dtype()));
  const Tensor dy = dy_.contiguous(), am = am_.contiguous();
  Tensor dx = Tensor::empty(x_shape, dy.dtype(), dy.device());
  if (dx.numel() == 0) return dx;
  MN_DISPATCH_KERNEL(op, dy, max_pool2d_backward,
      g, dy.data<scalar_t>(), am.data<int32_t>(), dx.data<scalar_t>());
  return dx;
}

Tensor max_pool2d_relu_backward(const Tensor& dy_, const Tensor& y_, const Tensor& am_,
                                const Shape& x_shape, const Pool2dParams& p) {
  const char* op = "max_pool2d_relu_backward";
  check_defined(op, dy_, "grad_output");
  check_defined(op, y_, "output");
  check_defined(op, am_, "argmax");
  check_floating(op, dy_);
  check_same_dtype(op, dy_, y_);
  check_same_device(op, dy_, y_);
  check_same_device(op, dy_, am_);
  const Pool2dGeom g = pool2d_geometry(op, x_shape, p);
  const Shape ys{g.N, g.C, g.P, g.Q};
  MN_CHECK(dy_.shape() == ys && y_.shape() == ys && am_.shape() == ys, op, ": grad_output ",
           shape_str(dy_.shape()), ", output ", shape_str(y_.shape()), " and argmax ",
           shape_str(am_.shape()), " must be ", shape_str(ys), " for input ", shape_str(x_shape));
  MN_CHECK(am_.dtype() == DType::I32, op, ": argmax must be int32, got ", dtype_name(am_.dtype()));
  const Tensor dy = dy_.contiguous(), y = y_.contiguous(), am = am_.contiguous();
  Tensor dx = Tensor::empty(x_shape, dy.dtype(), dy.device());
  if (dx.numel() == 0) return dx;
  MN_DISPATCH_KERNEL(op, dy, max_pool2d_relu_backward,
      g, dy.data<scalar_t>(), y.data<scalar_t>(), am.data<int32_t>(), dx.data<scalar_t>());
  return dx;
}

Tensor avg_pool2d_forward(const Tensor& x_, const Pool2dParams& p) {
  const char* op = "avg_pool2d";
  check_defined(op, x_, "input");
  check_floating(op, x_);
  const Pool2dGeom g = pool2d_geometry(op, x_.shape(), p);
  const Tensor x = x_.contiguous();
  Tensor y = Tensor::empty({g.N, g.C, g.P, g.Q}, x.dtype(), x.device());
  if (y.numel() == 0) return y;
  MN_DISPATCH_KERNEL(op, x, avg_pool2d_forward,
      g, x.data<scalar_t>(), y.data<scalar_t>(), p.count_include_pad);
  return y;
}

Tensor avg_pool2d_backward(const Tensor& dy_, const Shape& x_shape, const Pool2dParams& p) {
  const char* op = "avg_pool2d_backward";
  check_defined(op, dy_, "grad_output");
  const Pool2dGeom g = pool2d_geometry(op, x_shape, p);
  const Shape ys{g.N, g.C, g.P, g.Q};
  MN_CHECK(dy_.shape() == ys, op, ": grad_output ", shape_str(dy_.shape()), " must be ",
           shape_str(ys), " for input ", shape_str(x_shape));
  const Tensor dy = dy_.contiguous();
  Tensor dx = Tensor::empty(x_shape, dy.dtype(), dy.device());
  if (dx.numel() == 0) return dx;
  MN_DISPATCH_KERNEL(op, dy, avg_pool2d_backward,
      g, dy.data<scalar_t>(), dx.data<scalar_t>(), p.count_include_pad);
  return dx;
}

}  // namespace mn::kernels
