// Tape wrappers for LRN, batch-norm, dropout, activations and distance layers
// (autograd/ops_layers.h).
#include "autograd/ops_layers.h"

#include "kernels/batchnorm.h"
#include "kernels/dropout.h"
#include "kernels/prelu.h"

namespace mn::ag {

Variable lrn(const Variable& x, const kernels::LrnOptions& o) {
  MN_CHECK(x.defined(), "lrn: input must be defined");
  auto r = kernels::lrn_forward(x.data(), o);
  if (!any_requires_grad({x})) return make_variable(r.y, {x}, nullptr, "lrn");
  Tensor xs = x.data(), ys = r.y, ss = r.scale;
  return make_variable(
      r.y, {x},
      [xs, ys, ss, o](const Tensor& gy) {
        return std::vector<Tensor>{kernels::lrn_backward(xs, ys, ss, gy, o)};
      },
      "lrn");
}

Variable batch_norm(const Variable& x, const Variable& gamma, const Variable& beta,
                    Tensor running_mean, Tensor running_var, bool training, double momentum,
                    double eps) {
  MN_CHECK(x.defined(), "batch_norm: input must be defined");
  MN_CHECK(gamma.defined() == beta.defined(),
           "batch_norm: gamma and beta must both be given or both be omitted");
  const Tensor gt = gamma.defined() ? gamma.data() : Tensor();
  const Tensor bt = beta.defined() ? beta.data() : Tensor();
  auto r = kernels::batchnorm_forward(x.data(), gt, bt, running_mean, running_var, training,
                                      momentum, eps);
  std::vector<Variable> inputs{x};
  if (gamma.defined()) {
    inputs.push_back(gamma);
    inputs.push_back(beta);
  }
  if (!any_requires_grad(inputs)) return make_variable(r.y, inputs, nullptr, "batch_norm");
  const bool affine = gamma.defined();
  Tensor xs = x.data(), mean = r.mean, invstd = r.invstd;
  return make_variable(
      r.y, inputs,
      [xs, mean, invstd, gt, affine, training](const Tensor& gy) {
        auto g = kernels::batchnorm_backward(xs, gy, mean, invstd, gt, training);
        std::vector<Tensor> out{g.dx};
        if (affine) {
          out.push_back(g.dgamma);
          out.push_back(g.dbeta);
        }
        return out;
      },
      "batch_norm");
}

Variable dropout(const Variable& x, double p, bool training, Generator& gen) {
  MN_CHECK(x.defined(), "dropout: input must be defined");
  MN_CHECK(p >= 0.0 && p <= 1.0, "dropout: p must be in [0, 1], got ", p);
  if (!training || p == 0.0) return x;
  auto r = kernels::dropout_forward(x.data(), p, gen);
  if (!any_requires_grad({x})) return make_variable(r.y, {x}, nullptr, "dropout");
  Tensor mask = r.mask;
  return make_variable(
      r.y, {x},
      [mask, p](const Tensor& gy) {
        return std::vector<Tensor>{kernels::dropout_backward(gy, mask, p)};
      },
      "dropout");
}

Variable dropout(const Variable& x, double p, bool training) {
  return dropout(x, p, training, default_generator());
}

Variable activation(const Variable& x, kernels::Act a, const kernels::ActParams& p) {
  const char* name = kernels::act_name(a);
  MN_CHECK(x.defined(), name, ": input must be defined");
  Tensor y = kernels::activation_forward(a, x.data(), p);
  if (!any_requires_grad({x})) return make_variable(y, {x}, nullptr, name);
  Tensor saved = kernels::act_backward_uses_output(a) ? y : x.data();
  return make_variable(
      y, {x},
      [saved, a, p](const Tensor& gy) {
        return std::vector<Tensor>{kernels::activation_backward(a, saved, gy, p)};
      },
      name);
}

Variable relu(const Variable& x) { return activation(x, kernels::Act::ReLU); }
Variable elu(const Variable& x, double alpha) {
  kernels::ActParams p;
  p.alpha = alpha;
  return activation(x, kernels::Act::ELU, p);
}
Variable selu(const Variable& x) { return activation(x, kernels::Act::SELU); }
Variable softplus(const Variable& x, double beta, double threshold) {
  kernels::ActParams p;
  p.beta = beta;
  p.threshold = threshold;
  return activation(x, kernels::Act::Softplus, p);
}
Variable sigmoid_act(const Variable& x) { return activation(x, kernels::Act::Sigmoid); }
Variable tanh_act(const Variable& x) { return activation(x, kernels::Act::Tanh); }

namespace {
// Gradient for a when it requires it, else undefined (saves nothing extra).
std::vector<Tensor> pick(const std::pair<Tensor, Tensor>& g, bool need_a, bool need_b) {
  return {need_a ? g.first : Tensor(), need_b ? g.second : Tensor()};
}
}  // namespace

Variable abs_diff(const Variable& a, const Variable& b) {
  MN_CHECK(a.defined() && b.defined(), "abs_diff: inputs must be defined");
  Tensor y = kernels::abs_diff_forward(a.data(), b.data());
  if (!any_requires_grad({a, b})) return make_variable(y, {a, b}, nullptr, "abs_diff");
  Tensor as = a.data(), bs = b.data();
  const bool na = a.requires_grad(), nb = b.requires_grad();
  return make_variable(
      y, {a, b},
      [as, bs, na, nb](const Tensor& gy) {
        return pick(kernels::abs_diff_backward(as, bs, gy), na, nb);
      },
      "abs_diff");
}

Variable prelu(const Variable& x, const Variable& a) {
  MN_CHECK(x.defined() && a.defined(), "prelu: input and weight must be defined");
  Tensor y = kernels::prelu_forward(x.data(), a.data());
  if (!any_requires_grad({x, a})) return make_variable(y, {x, a}, nullptr, "prelu");
  Tensor xs = x.data(), as = a.data();
  const bool nx = x.requires_grad(), na = a.requires_grad();
  return make_variable(
      y, {x, a},
      [xs, as, nx, na](const Tensor& gy) { return pick(kernels::prelu_backward(xs, as, gy), nx, na); },
      "prelu");
}

namespace {
Variable row_distance(const Variable& a, const Variable& b, kernels::RowDist k, const char* name) {
  MN_CHECK(a.defined() && b.defined(), name, ": inputs must be defined");
  Tensor y = kernels::row_distance_forward(k, a.data(), b.data());
  if (!any_requires_grad({a, b})) return make_variable(y, {a, b}, nullptr, name);
  Tensor as = a.data(), bs = b.data();
  Tensor ys = k == kernels::RowDist::L2 ? y : Tensor();
  const bool na = a.requires_grad(), nb = b.requires_grad();
  return make_variable(
      y, {a, b},
      [as, bs, ys, k, na, nb](const Tensor& gy) {
        Tensor out = ys.defined() ? ys : gy;  // out is read only for plain L2
        return pick(kernels::row_distance_backward(k, as, bs, out, gy), na, nb);
      },
      name);
}
}  // namespace

Variable l1_distance(const Variable& a, const Variable& b) {
  return row_distance(a, b, kernels::RowDist::L1, "l1_distance");
}
Variable l2_distance(const Variable& a, const Variable& b, bool squared) {
  return squared ? row_distance(a, b, kernels::RowDist::L2Squared, "l2_distance_squared")
                 : row_distance(a, b, kernels::RowDist::L2, "l2_distance");
}

Variable pairwise_distance(const Variable& a, const Variable& b, kernels::Pairwise metric) {
  const char* name = kernels::pairwise_name(metric);
  MN_CHECK(a.defined() && b.defined(), name, ": inputs must be defined");
  auto r = kernels::pairwise_distance_forward(metric, a.data(), b.data());
  if (!any_requires_grad({a, b})) return make_variable(r.out, {a, b}, nullptr, name);
  Tensor as = a.data(), bs = b.data();
  const bool na = a.requires_grad(), nb = b.requires_grad();
  return make_variable(
      r.out, {a, b},
      [as, bs, r, metric, na, nb](const Tensor& gy) {
        return pick(kernels::pairwise_distance_backward(metric, as, bs, r, gy), na, nb);
      },
      name);
}

}  // namespace mn::ag
