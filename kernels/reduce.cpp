// Tensor-level reductions (kernels/reduce.h): plan the (outer, r, inner) view,
// dispatch on dtype and device; var and sum_to_shape are composed from them.
#include "kernels/reduce.h"

#include <algorithm>

#include "kernels/elementwise.h"
#include "runtime/dispatch.h"

namespace mn::kernels {

std::vector<int64_t> normalize_dims(const std::vector<int64_t>& dims, int64_t ndim, const char* op) {
  std::vector<int64_t> d;
  if (dims.empty()) {
    for (int64_t i = 0; i < ndim; ++i) d.push_back(i);
    return d;
  }
  for (int64_t x : dims) d.push_back(wrap_dim(x, std::max<int64_t>(ndim, 1), op));
  std::sort(d.begin(), d.end());
  d.erase(std::unique(d.begin(), d.end()), d.end());
  if (ndim == 0) d.clear();  // dim 0 / -1 of a 0-d tensor: the element itself
  return d;
}

Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    bool red = std::find(dims.begin(), dims.end(), i) != dims.end();
    if (!red) out.push_back(shape[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

namespace {
struct Plan {
  Tensor x;  // contiguous (outer, r, inner)
  int64_t outer = 1, r = 1, inner = 1;
  Shape out_shape;
};

Plan plan(const Tensor& x_in, const std::vector<int64_t>& dims_in, bool keepdim, const char* op) {
  check_defined(op, x_in, "x");
  check_floating(op, x_in);
  std::vector<int64_t> dims = normalize_dims(dims_in, x_in.dim(), op);
  Plan p;
  p.out_shape = reduced_shape(x_in.shape(), dims, keepdim);
  const Shape& s = x_in.shape();
  if (dims.empty()) {  // 0-d tensor
    p.x = x_in.contiguous();
    return p;
  }
  const bool adjacent = dims.back() - dims.front() + 1 == static_cast<int64_t>(dims.size());
  if (adjacent) {
    p.x = x_in.contiguous();
    for (int64_t i = 0; i < dims.front(); ++i) p.outer *= s[i];
    for (int64_t i : dims) p.r *= s[i];
    for (int64_t i = dims.back() + 1; i < x_in.dim(); ++i) p.inner *= s[i];
  } else {
    std::vector<int64_t> perm;
    for (int64_t i = 0; i < x_in.dim(); ++i)
      if (!std::binary_search(dims.begin(), dims.end(), i)) { perm.push_back(i); p.outer *= s[i]; }
    for (int64_t i : dims) { perm.push_back(i); p.r *= s[i]; }
    p.x = x_in.permute(perm).contiguous();
  }
  return p;
}

ValuesIndices run(ReduceOp op, const Tensor& x_in, const std::vector<int64_t>& dims, bool keepdim,
                  const char* name, bool want_idx) {
  Plan p = plan(x_in, dims, keepdim, name);
  if (op == ReduceOp::Max || op == ReduceOp::Min)
    MN_CHECK(p.r > 0, name, ": cannot reduce an empty dimension of ", shape_str(x_in.shape()));
  ValuesIndices res;
  res.values = Tensor::empty(p.out_shape, p.x.dtype(), p.x.device());
  if (want_idx) res.indices = Tensor::empty(p.out_shape, DType::I64, p.x.device());
  int64_t* ip = want_idx ? res.indices.data<int64_t>() : nullptr;
  MN_DISPATCH_KERNEL(name, p.x, reduce,
      op, p.x.data<scalar_t>(), p.outer, p.r, p.inner, res.values.data<scalar_t>(), ip);
  return res;
}
}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return run(ReduceOp::Sum, x, dims, keepdim, "sum", false).values;
}
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return run(ReduceOp::Mean, x, dims, keepdim, "mean", false).values;
}

Tensor var(const Tensor& x, const std::vector<int64_t>& dims_in, bool unbiased, bool keepdim) {
  check_defined("var", x, "x");
  std::vector<int64_t> dims = normalize_dims(dims_in, x.dim(), "var");
  int64_t n = 1;
  for (int64_t d : dims) n *= x.size(d);
  Tensor m = mean(x, dims, /*keepdim=*/true);
  Tensor d = binary(BinaryOp::Sub, x, m);
  Tensor ss = sum(unary(UnaryOp::Square, d), dims, keepdim);
  const double denom = static_cast<double>(n - (unbiased ? 1 : 0));
  return binary_scalar(BinaryOp::Div, ss, denom);  // denom 0 gives inf/nan, as in NumPy
}

ValuesIndices max_dim(const Tensor& x, int64_t dim, bool keepdim) {
  return run(ReduceOp::Max, x, {dim}, keepdim, "max", true);
}
ValuesIndices min_dim(const Tensor& x, int64_t dim, bool keepdim) {
  return run(ReduceOp::Min, x, {dim}, keepdim, "min", true);
}
ValuesIndices max_all(const Tensor& x) {
  check_defined("max", x, "x");
  return run(ReduceOp::Max, x.reshape({x.numel()}), {}, false, "max", true);
}
ValuesIndices min_all(const Tensor& x) {
  check_defined("min", x, "x");
  return run(ReduceOp::Min, x.reshape({x.numel()}), {}, false, "min", true);
}

Tensor sum_to_shape(const Tensor& g, const Shape& shape) {
  check_defined("sum_to_shape", g, "grad");
  if (g.shape() == shape) return g;
  const int64_t lead = g.dim() - static_cast<int64_t>(shape.size());
  MN_CHECK(lead >= 0, "sum_to_shape: cannot reduce ", shape_str(g.shape()), " to ", shape_str(shape));
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < g.dim(); ++d) {
    if (d < lead) { dims.push_back(d); continue; }
    const int64_t want = shape[d - lead];
    MN_CHECK(want == g.size(d) || want == 1, "sum_to_shape: ", shape_str(shape),
             " does not broadcast to ", shape_str(g.shape()));
    if (want == 1 && g.size(d) != 1) dims.push_back(d);
  }
  if (dims.empty()) return g.reshape(shape);
  return sum(g, dims, /*keepdim=*/true).reshape(shape);
}

}  // namespace mn::kernels
