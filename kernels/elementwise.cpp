// Tensor-level dispatch of the elementwise ops (kernels/elementwise.h): argument
// checks with shapes in the messages, dtype dispatch, fast contiguous path vs
// strided/broadcast path, CPU vs CUDA (never a silent fallback).
#include "kernels/elementwise.h"

#include "runtime/dispatch.h"

namespace mn::kernels {

const char* unary_name(UnaryOp op) {
  static const char* names[] = {"neg", "exp", "log", "sqrt", "abs", "square", "pow", "clamp", "sigmoid", "tanh"};
  return names[static_cast<int>(op)];
}
const char* binary_name(BinaryOp op) {
  static const char* names[] = {"add", "sub", "mul", "div", "maximum", "minimum"};
  return names[static_cast<int>(op)];
}
bool unary_backward_needs_input(UnaryOp op) {
  return op == UnaryOp::Log || op == UnaryOp::Abs || op == UnaryOp::Square || op == UnaryOp::Pow ||
         op == UnaryOp::Clamp;
}
bool unary_backward_needs_output(UnaryOp op) {
  return op == UnaryOp::Exp || op == UnaryOp::Sqrt || op == UnaryOp::Sigmoid || op == UnaryOp::Tanh;
}

Tensor unary(UnaryOp op, const Tensor& x_in, double p0, double p1) {
  const char* name = unary_name(op);
  check_defined(name, x_in, "x");
  check_floating(name, x_in);
  Tensor x = x_in.contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  const int64_t n = x.numel();
  MN_DISPATCH_KERNEL(name, x, unary_forward,
      op, n, x.data<scalar_t>(), y.data<scalar_t>(), scalar_t(p0), scalar_t(p1));
  return y;
}

Tensor unary_backward(UnaryOp op, const Tensor& g_in, const Tensor& x_in, const Tensor& y_in,
                      double p0, double p1) {
  const char* name = unary_name(op);
  check_defined(name, g_in, "grad_out");
  check_floating(name, g_in);
  Tensor g = g_in.contiguous(), x, y;
  if (unary_backward_needs_input(op)) {
    check_defined(name, x_in, "x");
    check_same_shape(name, g, x_in);
    check_same_dtype(name, g, x_in);
    check_same_device(name, g, x_in);
    x = x_in.contiguous();
  }
  if (unary_backward_needs_output(op)) {
    check_defined(name, y_in, "y");
    check_same_shape(name, g, y_in);
    check_same_dtype(name, g, y_in);
    check_same_device(name, g, y_in);
    y = y_in.contiguous();
  }
  Tensor gx = Tensor::empty(g.shape(), g.dtype(), g.device());
  const int64_t n = g.numel();
  MN_DISPATCH_FLOAT(g.dtype(), name, [&] {
    const scalar_t* xp = x.defined() ? x.data<scalar_t>() : nullptr;
    const scalar_t* yp = y.defined() ? y.data<scalar_t>() : nullptr;
    MN_DEVICE_CALL(name, g.device(), unary_backward,
        op, n, g.data<scalar_t>(), xp, yp, gx.data<scalar_t>(), scalar_t(p0), scalar_t(p1));
  });
  return gx;
}

namespace {
void check_binary_args(const char* name, const Tensor& a, const Tensor& b) {
  check_defined(name, a, "a");
  check_defined(name, b, "b");
  MN_CHECK(a.device() == b.device(), name, ": operands on different devices: a ", a.desc(),
           ", b ", b.desc());
  MN_CHECK(a.dtype() == b.dtype(), name, ": operands of different dtypes: a ", a.desc(), ", b ",
           b.desc());
  check_floating(name, a);
}
}  // namespace

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = binary_name(op);
  check_binary_args(name, a, b);
  Shape out_shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = Tensor::empty(out_shape, a.dtype(), a.device());
  const int64_t n = out.numel();
  const bool fast = a.shape() == b.shape() && a.is_contiguous() && b.is_contiguous();
  StridedIndexer ia, ib;
  if (!fast) {
    MN_CHECK(static_cast<int>(out_shape.size()) <= kMaxDims, name, ": at most ", kMaxDims,
             " dimensions, got ", shape_str(out_shape));
    ia = make_indexer(a, out_shape);
    ib = make_indexer(b, out_shape);
  }
  MN_DISPATCH_FLOAT(a.dtype(), name, [&] {
    const scalar_t* ap = a.data<scalar_t>();
    const scalar_t* bp = b.data<scalar_t>();
    scalar_t* op_ = out.data<scalar_t>();
    if (a.is_cuda()) {
      MN_CUDA_BRANCH(name, a.device(), a.dtype(), {
        if (fast) binary_forward_cuda<scalar_t>(op, n, ap, bp, op_);
        else binary_forward_strided_cuda<scalar_t>(op, n, ap, ia, bp, ib, op_);
      });
    } else {
      if (fast) binary_forward_cpu<scalar_t>(op, n, ap, bp, op_);
      else binary_forward_strided_cpu<scalar_t>(op, n, ap, ia, bp, ib, op_);
    }
  });
  return out;
}

std::pair<Tensor, Tensor> binary_backward(BinaryOp op, const Tensor& g_in, const Tensor& a,
                                          const Tensor& b, bool need_a, bool need_b) {
  const char* name = binary_name(op);
  check_binary_args(name, a, b);
  Shape out_shape = broadcast_shapes(a.shape(), b.shape(), name);
  MN_CHECK(g_in.shape() == out_shape, name, " backward: grad ", shape_str(g_in.shape()),
           " does not match the broadcast output ", shape_str(out_shape));
  check_same_dtype(name, g_in, a);
  check_same_device(name, g_in, a);
  Tensor g = g_in.contiguous();
  Tensor ga, gb;
  if (need_a) ga = Tensor::empty(out_shape, a.dtype(), a.device());
  if (need_b) gb = Tensor::empty(out_shape, a.dtype(), a.device());
  if (!need_a && !need_b) return {ga, gb};
  StridedIndexer ia = make_indexer(a, out_shape), ib = make_indexer(b, out_shape);
  const int64_t n = g.numel();
  MN_DISPATCH_FLOAT(a.dtype(), name, [&] {
    scalar_t* gap = need_a ? ga.data<scalar_t>() : nullptr;
    scalar_t* gbp = need_b ? gb.data<scalar_t>() : nullptr;
    MN_DEVICE_CALL(name, a.device(), binary_backward_strided,
        op, n, g.data<scalar_t>(), a.data<scalar_t>(), ia, b.data<scalar_t>(), ib, gap, gbp);
  });
  return {ga, gb};
}

Tensor binary_scalar(BinaryOp op, const Tensor& x_in, double s, bool scalar_left) {
  const char* name = binary_name(op);
  check_defined(name, x_in, "x");
  check_floating(name, x_in);
  Tensor x = x_in.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  const int64_t n = x.numel();
  MN_DISPATCH_KERNEL(name, x, binary_scalar,
      op, n, x.data<scalar_t>(), scalar_t(s), scalar_left, out.data<scalar_t>());
  return out;
}

}  // namespace mn::kernels
