// Linear layer, Tensor level: matmul (kernels/gemm.h) plus the bias helpers.
#include "kernels/linear.h"

#include "kernels/gemm.h"
#include "runtime/dispatch.h"

namespace mn::kernels {

Tensor linear_forward(const Tensor& x, const Tensor& w, const Tensor& b) {
  const char* op = "linear";
  check_defined(op, x, "input");
  check_defined(op, w, "weight");
  check_dim(op, x, 2, "input");
  check_dim(op, w, 2, "weight");
  MN_CHECK(x.size(1) == w.size(1), op, ": input ", shape_str(x.shape()),
           " has ", x.size(1), " features but weight ", shape_str(w.shape()), " expects ",
           w.size(1));
  check_same_device(op, x, w);
  check_same_dtype(op, x, w);
  Tensor y = matmul(x, w, false, true);  // (N, out), contiguous
  if (!b.defined()) return y;
  check_same_device(op, x, b);
  check_same_dtype(op, x, b);
  MN_CHECK(b.dim() == 1 && b.size(0) == w.size(0), op, ": bias ", shape_str(b.shape()),
           " must be (", w.size(0), ") for weight ", shape_str(w.shape()));
  const Tensor bc = b.contiguous();
  if (y.numel() == 0) return y;
  MN_DISPATCH_KERNEL(op, y, bias_add_rows,
      y.size(0), y.size(1), bc.data<scalar_t>(), y.data<scalar_t>());
  return y;
}

Tensor linear_backward_input(const Tensor& dy, const Tensor& w) { return matmul(dy, w); }

Tensor linear_backward_weight(const Tensor& dy, const Tensor& x) {
  return matmul(dy, x, true, false);
}

Tensor linear_backward_bias(const Tensor& dy_) {
  const char* op = "linear_backward_bias";
  check_defined(op, dy_, "grad_output");
  check_dim(op, dy_, 2, "grad_output");
  const Tensor dy = dy_.contiguous();
  Tensor db = Tensor::empty({dy.size(1)}, dy.dtype(), dy.device());
  if (db.numel() == 0) return db;
  if (dy.size(0) == 0) return db.zero_();
  MN_DISPATCH_KERNEL(op, dy, sum_rows,
      dy.size(0), dy.size(1), dy.data<scalar_t>(), db.data<scalar_t>());
  return db;
}

}  // namespace mn::kernels
