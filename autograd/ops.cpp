// Differentiable elementwise, reduction, indexing and join ops (autograd/ops.h).
// View ops live in autograd/ops_views.cpp.
#include "autograd/ops.h"

#include "kernels/elementwise.h"
#include "kernels/indexing.h"
#include "kernels/join.h"
#include "kernels/reduce.h"

namespace mn::ag {

namespace K = mn::kernels;
using K::BinaryOp;
using K::UnaryOp;

namespace {
Variable unary_op(UnaryOp op, const Variable& x, double p0 = 0, double p1 = 0) {
  Tensor y = K::unary(op, x.data(), p0, p1);
  Tensor sx = K::unary_backward_needs_input(op) ? x.data() : Tensor();
  Tensor sy = K::unary_backward_needs_output(op) ? y : Tensor();
  return make_variable(
      y, {x},
      [op, sx, sy, p0, p1](const Tensor& g) -> std::vector<Tensor> {
        return {K::unary_backward(op, g, sx, sy, p0, p1)};
      },
      K::unary_name(op));
}

Variable binary_op(BinaryOp op, const Variable& a, const Variable& b) {
  Tensor out = K::binary(op, a.data(), b.data());
  const bool na = a.requires_grad(), nb = b.requires_grad();
  const bool linear = op == BinaryOp::Add || op == BinaryOp::Sub;
  Tensor ta = linear ? Tensor() : a.data(), tb = linear ? Tensor() : b.data();
  Shape sa = a.shape(), sb = b.shape();
  return make_variable(
      out, {a, b},
      [=](const Tensor& g) -> std::vector<Tensor> {
        Tensor ga, gb;
        if (linear) {
          if (na) ga = g;
          if (nb) gb = op == BinaryOp::Sub ? K::neg(g) : g;
        } else {
          auto p = K::binary_backward(op, g, ta, tb, na, nb);
          ga = p.first;
          gb = p.second;
        }
        if (ga.defined()) ga = K::sum_to_shape(ga, sa);
        if (gb.defined()) gb = K::sum_to_shape(gb, sb);
        return {ga, gb};
      },
      K::binary_name(op));
}

// x (op) s, or s (op) x when scalar_left.
Variable scalar_op(BinaryOp op, const Variable& x, double s, bool left) {
  Tensor out = K::binary_scalar(op, x.data(), s, left);
  Tensor tx = (op == BinaryOp::Div && left) || op == BinaryOp::Maximum || op == BinaryOp::Minimum
                  ? x.data() : Tensor();
  return make_variable(
      out, {x},
      [=](const Tensor& g) -> std::vector<Tensor> {
        switch (op) {
          case BinaryOp::Add: return {g};
          case BinaryOp::Sub: return {left ? K::neg(g) : g};
          case BinaryOp::Mul: return {K::mul_scalar(g, s)};
          case BinaryOp::Div:
            if (!left) return {K::mul_scalar(g, 1.0 / s)};
            // d(s / x)/dx = -s / x^2
            return {K::div(K::mul_scalar(g, -s), K::square(tx))};
          default: {
            Tensor st = Tensor::full({}, s, tx.dtype(), tx.device());
            return {K::binary_backward(op, g, tx, st, true, false).first};
          }
        }
      },
      K::binary_name(op));
}

// g (reduced shape, keepdim or not) broadcast back to `shape` over `dims`.
Tensor expand_back(const Tensor& g, const Shape& shape, const std::vector<int64_t>& dims) {
  return g.reshape(K::reduced_shape(shape, dims, true)).expand(shape).contiguous();
}
}  // namespace

Variable neg(const Variable& x) { return unary_op(UnaryOp::Neg, x); }
Variable exp(const Variable& x) { return unary_op(UnaryOp::Exp, x); }
Variable log(const Variable& x) { return unary_op(UnaryOp::Log, x); }
Variable sqrt(const Variable& x) { return unary_op(UnaryOp::Sqrt, x); }
Variable abs(const Variable& x) { return unary_op(UnaryOp::Abs, x); }
Variable square(const Variable& x) { return unary_op(UnaryOp::Square, x); }
Variable pow(const Variable& x, double e) { return unary_op(UnaryOp::Pow, x, e); }
Variable clamp(const Variable& x, double lo, double hi) {
  MN_CHECK(lo <= hi, "clamp: lo ", lo, " > hi ", hi);
  return unary_op(UnaryOp::Clamp, x, lo, hi);
}
Variable sigmoid(const Variable& x) { return unary_op(UnaryOp::Sigmoid, x); }
Variable tanh(const Variable& x) { return unary_op(UnaryOp::Tanh, x); }

Variable add(const Variable& a, const Variable& b) { return binary_op(BinaryOp::Add, a, b); }
Variable sub(const Variable& a, const Variable& b) { return binary_op(BinaryOp::Sub, a, b); }
Variable mul(const Variable& a, const Variable& b) { return binary_op(BinaryOp::Mul, a, b); }
Variable div(const Variable& a, const Variable& b) { return binary_op(BinaryOp::Div, a, b); }
Variable maximum(const Variable& a, const Variable& b) { return binary_op(BinaryOp::Maximum, a, b); }
Variable minimum(const Variable& a, const Variable& b) { return binary_op(BinaryOp::Minimum, a, b); }
Variable add(const Variable& a, double s) { return scalar_op(BinaryOp::Add, a, s, false); }
Variable sub(const Variable& a, double s) { return scalar_op(BinaryOp::Sub, a, s, false); }
Variable mul(const Variable& a, double s) { return scalar_op(BinaryOp::Mul, a, s, false); }
Variable div(const Variable& a, double s) { return scalar_op(BinaryOp::Div, a, s, false); }
Variable maximum(const Variable& a, double s) { return scalar_op(BinaryOp::Maximum, a, s, false); }
Variable minimum(const Variable& a, double s) { return scalar_op(BinaryOp::Minimum, a, s, false); }
Variable add(double s, const Variable& b) { return scalar_op(BinaryOp::Add, b, s, true); }
Variable sub(double s, const Variable& b) { return scalar_op(BinaryOp::Sub, b, s, true); }
Variable mul(double s, const Variable& b) { return scalar_op(BinaryOp::Mul, b, s, true); }
Variable div(double s, const Variable& b) { return scalar_op(BinaryOp::Div, b, s, true); }
Variable maximum(double s, const Variable& b) { return scalar_op(BinaryOp::Maximum, b, s, true); }
Variable minimum(double s, const Variable& b) { return scalar_op(BinaryOp::Minimum, b, s, true); }

// ---- reductions ---------------------------------------------------------------
Variable sum(const Variable& x, const std::vector<int64_t>& dims_in, bool keepdim) {
  auto dims = K::normalize_dims(dims_in, x.dim(), "sum");
  Shape xs = x.shape();
  return make_variable(
      K::sum(x.data(), dims, keepdim), {x},
      [xs, dims](const Tensor& g) -> std::vector<Tensor> { return {expand_back(g, xs, dims)}; },
      "sum");
}

Variable mean(const Variable& x, const std::vector<int64_t>& dims_in, bool keepdim) {
  auto dims = K::normalize_dims(dims_in, x.dim(), "mean");
  Shape xs = x.shape();
  int64_t n = 1;
  for (int64_t d : dims) n *= xs[d];
  return make_variable(
      K::mean(x.data(), dims, keepdim), {x},
      [xs, dims, n](const Tensor& g) -> std::vector<Tensor> {
        return {K::mul_scalar(expand_back(g, xs, dims), 1.0 / static_cast<double>(n))};
      },
      "mean");
}

Variable var(const Variable& x, const std::vector<int64_t>& dims_in, bool unbiased, bool keepdim) {
  auto dims = K::normalize_dims(dims_in, x.dim(), "var");
  int64_t n = 1;
  for (int64_t d : dims) n *= x.size(d);
  Variable d = sub(x, mean(x, dims, true));
  return div(sum(square(d), dims, keepdim), static_cast<double>(n - (unbiased ? 1 : 0)));
}

namespace {
Variable extreme_dim(const Variable& x, int64_t dim_in, bool keepdim, bool is_max) {
  const char* name = is_max ? "max" : "min";
  check_defined(name, x.data(), "x");
  const int dim = wrap_dim(dim_in, x.dim(), name);
  K::ValuesIndices r = is_max ? K::max_dim(x.data(), dim, true) : K::min_dim(x.data(), dim, true);
  Tensor vals = keepdim ? r.values : r.values.squeeze(dim);
  Shape xs = x.shape();
  Tensor idx = r.indices;  // keepdim shape
  return make_variable(
      vals, {x},
      [xs, dim, idx](const Tensor& g) -> std::vector<Tensor> {
        Tensor z = Tensor::zeros(xs, g.dtype(), g.device());
        return {K::scatter_add(z, dim, idx, g.reshape(idx.shape()))};
      },
      name);
}

Variable extreme_all(const Variable& x, bool is_max) {
  const char* name = is_max ? "max" : "min";
  K::ValuesIndices r = is_max ? K::max_all(x.data()) : K::min_all(x.data());
  Shape xs = x.shape();
  Tensor idx = r.indices.reshape({1});
  return make_variable(
      r.values, {x},
      [xs, idx](const Tensor& g) -> std::vector<Tensor> {
        Tensor z = Tensor::zeros({numel_of(xs)}, g.dtype(), g.device());
        return {K::scatter_add(z, 0, idx, g.reshape({1})).reshape(xs)};
      },
      name);
}
}  // namespace

Variable max(const Variable& x, int64_t dim, bool keepdim) { return extreme_dim(x, dim, keepdim, true); }
Variable min(const Variable& x, int64_t dim, bool keepdim) { return extreme_dim(x, dim, keepdim, false); }
Variable max(const Variable& x) { return extreme_all(x, true); }
Variable min(const Variable& x) { return extreme_all(x, false); }
Tensor argmax(const Variable& x, int64_t dim, bool keepdim) { return K::argmax(x.data(), dim, keepdim); }
Tensor argmin(const Variable& x, int64_t dim, bool keepdim) { return K::argmin(x.data(), dim, keepdim); }

// ---- indexing -------------------------------------------------------------------
Variable index_select(const Variable& x, int64_t dim, const Tensor& idx) {
  Shape xs = x.shape();
  return make_variable(
      K::index_select(x.data(), dim, idx), {x},
      [xs, dim, idx](const Tensor& g) -> std::vector<Tensor> { return {K::index_add(xs, dim, idx, g)}; },
      "index_select");
}

Variable gather(const Variable& x, int64_t dim, const Tensor& idx) {
  Shape xs = x.shape();
  return make_variable(
      K::gather(x.data(), dim, idx), {x},
      [xs, dim, idx](const Tensor& g) -> std::vector<Tensor> {
        return {K::scatter_add(Tensor::zeros(xs, g.dtype(), g.device()), dim, idx, g)};
      },
      "gather");
}

Variable scatter_add(const Variable& self, int64_t dim, const Tensor& idx, const Variable& src) {
  Shape ss = src.shape();
  const bool need_src = src.requires_grad();
  return make_variable(
      K::scatter_add(self.data(), dim, idx, src.data()), {self, src},
      [ss, dim, idx, need_src](const Tensor& g) -> std::vector<Tensor> {
        Tensor gs;
        if (need_src) {
          gs = K::gather(g, dim, idx);  // idx's shape; src may be larger
          if (gs.shape() != ss) {
            Tensor z = Tensor::zeros(ss, g.dtype(), g.device());
            Tensor corner = z;
            for (int64_t d = 0; d < z.dim(); ++d) corner = corner.narrow(d, 0, gs.size(d));
            corner.copy_(gs);
            gs = z;
          }
        }
        return {g, gs};
      },
      "scatter_add");
}

Variable where(const Tensor& cond, const Variable& a, const Variable& b) {
  Shape sa = a.shape(), sb = b.shape();
  const bool na = a.requires_grad(), nb = b.requires_grad();
  return make_variable(
      K::where(cond, a.data(), b.data()), {a, b},
      [cond, sa, sb, na, nb](const Tensor& g) -> std::vector<Tensor> {
        Tensor zero = Tensor::zeros({}, g.dtype(), g.device());
        Tensor ga, gb;
        if (na) ga = K::sum_to_shape(K::where(cond, g, zero), sa);
        if (nb) gb = K::sum_to_shape(K::where(cond, zero, g), sb);
        return {ga, gb};
      },
      "where");
}

Variable masked_select(const Variable& x, const Tensor& mask) {
  Shape xs = x.shape();
  Shape s = broadcast_shapes(xs, mask.shape(), "masked_select");
  return make_variable(
      K::masked_select(x.data(), mask), {x},
      [xs, s, mask](const Tensor& g) -> std::vector<Tensor> {
        return {K::sum_to_shape(K::masked_scatter(mask.expand(s), g), xs)};
      },
      "masked_select");
}

// ---- joining --------------------------------------------------------------------
Variable concat(const std::vector<Variable>& xs, int64_t dim_in) {
  MN_CHECK(!xs.empty(), "concat: empty list of Variables");
  std::vector<Tensor> ts;
  std::vector<int64_t> sizes;
  const int dim = wrap_dim(dim_in, xs[0].dim(), "concat");
  for (const Variable& v : xs) {
    ts.push_back(v.data());
    sizes.push_back(v.data().dim() > dim ? v.size(dim) : 0);
  }
  Tensor out = K::concat(ts, dim);
  return make_variable(
      out, xs,
      [sizes, dim](const Tensor& g) -> std::vector<Tensor> { return K::split(g, sizes, dim); },
      "concat");
}

std::vector<Variable> split(const Variable& x, const std::vector<int64_t>& sizes, int64_t dim_in) {
  const int dim = wrap_dim(dim_in, x.dim(), "split");
  K::split(x.data(), sizes, dim);  // validates the sizes
  std::vector<Variable> out;
  int64_t off = 0;
  for (int64_t s : sizes) {
    out.push_back(narrow(x, dim, off, s));
    off += s;
  }
  return out;
}

Variable stack(const std::vector<Variable>& xs, int64_t dim_in) {
  MN_CHECK(!xs.empty(), "stack: empty list of Variables");
  const int dim = wrap_dim(dim_in, xs[0].dim() + 1, "stack");
  std::vector<Variable> us;
  for (size_t i = 0; i < xs.size(); ++i) {
    MN_CHECK(xs[i].shape() == xs[0].shape(), "stack: Variable ", i, " ", shape_str(xs[i].shape()),
             " differs from Variable 0 ", shape_str(xs[0].shape()));
    us.push_back(unsqueeze(xs[i], dim));
  }
  return concat(us, dim);
}

}  // namespace mn::ag
