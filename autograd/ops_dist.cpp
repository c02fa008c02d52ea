// Differentiable collectives (autograd/ops_dist.h).
#include "autograd/ops_dist.h"

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

}  // namespace mn::ag
