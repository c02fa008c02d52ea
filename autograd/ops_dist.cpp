// Differentiable collectives (autograd/ops_dist.h).
#include "autograd/ops_dist.h"

#include <vector>

#include "autograd/ops.h"
#include "kernels/elementwise.h"

namespace mn::ag {

Variable all_gather_rows(const Variable& x, Communicator& comm) {
  MN_CHECK(x.defined() && x.dim() >= 1, "all_gather_rows: needs a defined tensor with rows, got ",
           x.defined() ? x.data().desc() : std::string("(undefined)"));
  Tensor in = x.data().contiguous();
  Shape out_shape = in.shape();
  out_shape[0] *= comm.size();
  Tensor out = Tensor::empty(out_shape, in.dtype(), in.device());
  comm.all_gather(in, out);
  Shape xs = in.shape();
  Communicator* c = &comm;  // outlives the graph: the study or test owns it for the run
  return make_variable(
      std::move(out), {x},
      [c, xs](const Tensor& g) -> std::vector<Tensor> {
        Tensor mine = Tensor::empty(xs, g.dtype(), g.device());
        c->reduce_scatter(g.contiguous(), mine);
        return {mine};
      },
      "all_gather_rows");
}

Variable all_reduce_sum(const Variable& v, Communicator& comm) {
  MN_CHECK(v.defined(), "all_reduce_sum: undefined input");
  Tensor out = v.data().contiguous().clone();
  comm.all_reduce(out, ReduceOp::Sum);
  Communicator* c = &comm;  // outlives the graph, as for all_gather_rows
  return make_variable(
      std::move(out), {v},
      [c](const Tensor& g) -> std::vector<Tensor> {
        Tensor sum = g.contiguous().clone();
        c->all_reduce(sum, ReduceOp::Sum);
        return {sum};
      },
      "all_reduce_sum");
}

Variable sync_batch_norm(const Variable& x, const Variable& gamma, const Variable& beta, Tensor running_mean,
                         Tensor running_var, double momentum, double eps, Communicator& comm) {
  MN_CHECK(x.defined() && x.dim() >= 2, "sync_batch_norm: expected an (N, C, ...) input, got ",
           x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  MN_CHECK(gamma.defined() == beta.defined(), "sync_batch_norm: gamma and beta must both be given or both be omitted");
  const int64_t C = x.size(1);
  std::vector<int64_t> over{0};  // every dimension but the channels'
  for (int64_t d = 2; d < x.dim(); ++d) over.push_back(d);
  Shape per_channel(static_cast<size_t>(x.dim()), 1);
  per_channel[1] = C;
  // Rows of every rank (their counts may differ).
  Tensor n = Tensor::full({1}, static_cast<double>(x.numel() / std::max<int64_t>(C, 1)), DType::F64, x.device());
  comm.all_reduce(n, ReduceOp::Sum);
  const double total = n.to(Device::cpu()).to_double_vector()[0];
  MN_CHECK(total > 1, "sync_batch_norm: ", total, " value(s) per channel over all ranks; training needs more than 1");
  const Variable mean = mul(all_reduce_sum(sum(x, over), comm), 1.0 / total);
  const Variable xc = sub(x, reshape(mean, per_channel));
  const Variable var = mul(all_reduce_sum(sum(mul(xc, xc), over), comm), 1.0 / total);
  Variable y = mul(xc, reshape(pow(add(var, eps), -0.5), per_channel));
  if (gamma.defined()) y = add(mul(y, reshape(gamma, per_channel)), reshape(beta, per_channel));
  if (running_mean.defined())
    running_mean.copy_(kernels::add(kernels::mul_scalar(running_mean, 1.0 - momentum),
                                    kernels::mul_scalar(mean.data(), momentum)));
  if (running_var.defined())
    running_var.copy_(kernels::add(kernels::mul_scalar(running_var, 1.0 - momentum),
                                   kernels::mul_scalar(var.data(), momentum * total / (total - 1.0))));
  return y;
}

}  // namespace mn::ag
