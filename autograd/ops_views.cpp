// Differentiable view ops (autograd/ops.h): the forward shares storage with the
// input; the backward maps the output gradient back to the input's layout
// (reshape back, inverse permutation, or zeros with the viewed region filled).
#include "autograd/ops.h"

#include "kernels/reduce.h"

namespace mn::ag {

namespace {
// A view whose gradient is just g reshaped to the input shape.
Variable reshaping(const Variable& x, Tensor out, const char* name) {
  Shape xs = x.shape();
  return make_variable(
      std::move(out), {x}, [xs](const Tensor& g) -> std::vector<Tensor> { return {g.reshape(xs)}; },
      name);
}

// A view of a sub-region: gradient = zeros with `region(z)` filled with g.
template <typename F>
Variable region(const Variable& x, Tensor out, F region_of, const char* name) {
  Shape xs = x.shape();
  return make_variable(
      std::move(out), {x},
      [xs, region_of](const Tensor& g) -> std::vector<Tensor> {
        Tensor z = Tensor::zeros(xs, g.dtype(), g.device());
        region_of(z).copy_(g);
        return {z};
      },
      name);
}
}  // namespace

Variable reshape(const Variable& x, const Shape& shape) {
  return reshaping(x, x.data().reshape(shape), "reshape");
}
Variable view(const Variable& x, const Shape& shape) { return reshaping(x, x.data().view(shape), "view"); }
Variable unsqueeze(const Variable& x, int64_t dim) {
  return reshaping(x, x.data().unsqueeze(dim), "unsqueeze");
}
Variable squeeze(const Variable& x, int64_t dim) { return reshaping(x, x.data().squeeze(dim), "squeeze"); }
Variable flatten(const Variable& x, int64_t s, int64_t e) {
  return reshaping(x, x.data().flatten(s, e), "flatten");
}
Variable contiguous(const Variable& x) { return reshaping(x, x.data().contiguous(), "contiguous"); }

Variable transpose(const Variable& x, int64_t d0, int64_t d1) {
  return make_variable(
      x.data().transpose(d0, d1), {x},
      [d0, d1](const Tensor& g) -> std::vector<Tensor> { return {g.transpose(d0, d1)}; }, "transpose");
}

Variable permute(const Variable& x, const std::vector<int64_t>& order) {
  Tensor out = x.data().permute(order);  // validates the order
  std::vector<int64_t> inv(order.size());
  for (size_t i = 0; i < order.size(); ++i)
    inv[wrap_dim(order[i], static_cast<int64_t>(order.size()), "permute")] = static_cast<int64_t>(i);
  return make_variable(
      out, {x}, [inv](const Tensor& g) -> std::vector<Tensor> { return {g.permute(inv)}; }, "permute");
}

Variable narrow(const Variable& x, int64_t dim, int64_t start, int64_t length) {
  return region(x, x.data().narrow(dim, start, length),
                [=](const Tensor& z) { return z.narrow(dim, start, length); }, "narrow");
}
Variable slice(const Variable& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return region(x, x.data().slice(dim, start, end, step),
                [=](const Tensor& z) { return z.slice(dim, start, end, step); }, "slice");
}
Variable select(const Variable& x, int64_t dim, int64_t index) {
  return region(x, x.data().select(dim, index),
                [=](const Tensor& z) { return z.select(dim, index); }, "select");
}

Variable expand(const Variable& x, const Shape& shape) {
  Shape xs = x.shape();
  return make_variable(
      x.data().expand(shape), {x},
      [xs](const Tensor& g) -> std::vector<Tensor> { return {kernels::sum_to_shape(g, xs)}; }, "expand");
}

}  // namespace mn::ag
