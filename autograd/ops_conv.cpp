// Tape wrappers for conv2d (also fused with ReLU and max-pooling), max/avg pooling, linear
// and flatten (autograd/ops_conv.h).
#include "autograd/ops_conv.h"

#include "kernels/activation.h"
#include "kernels/linear.h"

namespace mn::ag {

namespace {
// What a convolution node saves and how it turns dL/d(pre-activation) into its inputs'
// gradients (conv2d and conv2d_relu_max_pool2d): the input only for dW, the weight
// only for dX.
struct ConvGrads {
  Tensor xs, ws;
  Shape x_shape, w_shape;
  kernels::Conv2dParams p;  // relu off: the caller applied ReLU's backward already
  bool need_dx = false, need_dw = false, need_db = false, has_b = false;

  ConvGrads(const Variable& x, const Variable& w, const Variable& b, const kernels::Conv2dParams& pc)
      : x_shape(x.shape()), w_shape(w.shape()), p(pc) {
    need_dx = x.requires_grad(), need_dw = w.requires_grad();
    need_db = b.defined() && b.requires_grad();
    has_b = b.defined();
    xs = need_dw ? x.data() : Tensor();
    ws = need_dx ? w.data() : Tensor();
    p.relu = false;
  }
  std::vector<Tensor> operator()(const Tensor& dy) const {
    std::vector<Tensor> g(has_b ? 3 : 2);
    if (need_dx) g[0] = kernels::conv2d_backward_data(dy, ws, x_shape, p);
    if (need_dw) g[1] = kernels::conv2d_backward_weight(dy, xs, w_shape, p);
    if (need_db) g[2] = kernels::conv2d_backward_bias(dy);
    return g;
  }
};
}  // namespace

Variable conv2d(const Variable& x, const Variable& w, const Variable& b,
                const kernels::Conv2dParams& p) {
  MN_CHECK(x.defined() && w.defined(), "conv2d: input and weight must be defined");
  const Tensor bt = b.defined() ? b.data() : Tensor();
  Tensor y = kernels::conv2d_forward(x.data(), w.data(), bt, p);
  std::vector<Variable> inputs{x, w};
  if (b.defined()) inputs.push_back(b);
  if (!any_requires_grad(inputs)) return make_variable(y, inputs, nullptr, "conv2d");
  // With the fused ReLU, the node saves its output (y > 0 exactly where the
  // pre-activation is > 0, so it gives ReLU's gradient).
  Tensor ys = p.relu ? y : Tensor();
  ConvGrads grads(x, w, b, p);
  auto backward = [ys, grads](const Tensor& dy_out) {
    return grads(ys.defined() ? kernels::activation_backward(kernels::Act::ReLU, ys, dy_out) : dy_out);
  };
  return make_variable(y, inputs, backward, "conv2d");
}

Variable conv2d_relu_max_pool2d(const Variable& x, const Variable& w, const Variable& b,
                                const kernels::Conv2dParams& p, const kernels::Pool2dParams& pool) {
  MN_CHECK(x.defined() && w.defined(), "conv2d_relu_max_pool2d: input and weight must be defined");
  kernels::Conv2dParams pc = p;
  pc.relu = true;
  Tensor r = kernels::conv2d_forward(x.data(), w.data(), b.defined() ? b.data() : Tensor(), pc);
  auto [y, am] = kernels::max_pool2d_forward(r, pool);
  std::vector<Variable> inputs{x, w};
  if (b.defined()) inputs.push_back(b);
  if (!any_requires_grad(inputs)) return make_variable(y, inputs, nullptr, "conv2d_relu_max_pool2d");
  // Saved: the pooled output and its argmax (a quarter of the ReLU output each for 2x2),
  // never the full-size activation.
  const Shape r_shape = r.shape();
  ConvGrads grads(x, w, b, pc);
  Tensor ys = y, ams = am;
  auto backward = [ys, ams, r_shape, pool, grads](const Tensor& dy) {
    return grads(kernels::max_pool2d_relu_backward(dy, ys, ams, r_shape, pool));
  };
  return make_variable(y, inputs, backward, "conv2d_relu_max_pool2d");
}

Variable max_pool2d(const Variable& x, const kernels::Pool2dParams& p) {
  auto [y, argmax] = kernels::max_pool2d_forward(x.data(), p);
  if (!any_requires_grad({x})) return make_variable(y, {x}, nullptr, "max_pool2d");
  const Shape x_shape = x.shape();
  Tensor am = argmax;
  return make_variable(
      y, {x},
      [am, x_shape, p](const Tensor& dy) {
        return std::vector<Tensor>{kernels::max_pool2d_backward(dy, am, x_shape, p)};
      },
      "max_pool2d");
}

Variable prelu_max_pool2d(const Variable& x, const Variable& a, const kernels::Pool2dParams& p) {
  MN_CHECK(x.defined() && a.defined(), "prelu_max_pool2d: input and weight must be defined");
  auto [y, argmax] = kernels::prelu_max_pool2d_forward(x.data(), a.data(), p);
  if (!any_requires_grad({x, a})) return make_variable(y, {x, a}, nullptr, "prelu_max_pool2d");
  Tensor xs = x.data(), as = a.data(), am = argmax;
  const bool nx = x.requires_grad(), na = a.requires_grad();
  return make_variable(
      y, {x, a},
      [xs, as, am, p, nx, na](const Tensor& dy) {
        auto g = kernels::prelu_max_pool2d_backward(xs, as, dy, am, p);
        return std::vector<Tensor>{nx ? g.first : Tensor(), na ? g.second : Tensor()};
      },
      "prelu_max_pool2d");
}

Variable avg_pool2d(const Variable& x, const kernels::Pool2dParams& p) {
  Tensor y = kernels::avg_pool2d_forward(x.data(), p);
  if (!any_requires_grad({x})) return make_variable(y, {x}, nullptr, "avg_pool2d");
  const Shape x_shape = x.shape();
  return make_variable(
      y, {x},
      [x_shape, p](const Tensor& dy) {
        return std::vector<Tensor>{kernels::avg_pool2d_backward(dy, x_shape, p)};
      },
      "avg_pool2d");
}

Variable linear(const Variable& x, const Variable& w, const Variable& b) {
  MN_CHECK(x.defined() && w.defined(), "linear: input and weight must be defined");
  Tensor y = kernels::linear_forward(x.data(), w.data(), b.defined() ? b.data() : Tensor());
  std::vector<Variable> inputs{x, w};
  if (b.defined()) inputs.push_back(b);
  if (!any_requires_grad(inputs)) return make_variable(y, inputs, nullptr, "linear");
  const bool need_dx = x.requires_grad(), need_dw = w.requires_grad();
  const bool need_db = b.defined() && b.requires_grad();
  const bool has_b = b.defined();
  Tensor xs = need_dw ? x.data() : Tensor();
  Tensor ws = need_dx ? w.data() : Tensor();
  auto backward = [xs, ws, need_dx, need_dw, need_db, has_b](const Tensor& dy) {
    std::vector<Tensor> g(has_b ? 3 : 2);
    if (need_dx) g[0] = kernels::linear_backward_input(dy, ws);
    if (need_dw) g[1] = kernels::linear_backward_weight(dy, xs);
    if (need_db) g[2] = kernels::linear_backward_bias(dy);
    return g;
  };
  return make_variable(y, inputs, backward, "linear");
}

Variable flatten_batch(const Variable& x) {
  MN_CHECK(x.dim() >= 1, "flatten: input must have a batch dimension, got ",
           shape_str(x.shape()));
  const int64_t n = x.size(0);
  const int64_t rest = n == 0 ? numel_of(x.shape()) : x.numel() / n;
  Tensor y = x.data().reshape({n, rest});
  if (!any_requires_grad({x})) return make_variable(y, {x}, nullptr, "flatten");
  const Shape x_shape = x.shape();
  return make_variable(
      y, {x},
      [x_shape](const Tensor& dy) { return std::vector<Tensor>{dy.reshape(x_shape)}; },
      "flatten");
}

}  // namespace mn::ag
