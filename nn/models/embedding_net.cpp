// The sampling study's embedding network (see embedding_net.h).
#include "nn/models/embedding_net.h"

#include "autograd/ops_conv.h"
#include "autograd/ops_layers.h"

namespace mn::nn {

EmbeddingNet::EmbeddingNet(const EmbeddingNetOptions& o, Generator& g) : opt_(o) {
  MN_CHECK(o.in_channels >= 1 && o.conv1 >= 1 && o.conv2 >= 1 && o.hidden >= 1 && o.embedding >= 1,
           "EmbeddingNet: in_channels, conv1, conv2, hidden and embedding must be >= 1, got ", o.in_channels, ", ",
           o.conv1, ", ", o.conv2, ", ", o.hidden, ", ", o.embedding);
  // conv 5x5 (no padding) takes 4 off the side, pooling halves it (floor), twice.
  const int64_t s1 = o.input_size - 4, s2 = s1 / 2 - 4;
  MN_CHECK(s1 >= 2 && s2 >= 2, "EmbeddingNet: a ", o.input_size, "x", o.input_size, " input is too small for two "
           "5x5 convolutions and two 2x2 poolings; use 16x16 or bigger");
  const int64_t side = s2 / 2;
  flat_ = o.conv2 * side * side;
  auto conv = [&](int64_t in, int64_t out) {
    Conv2dOptions co(in, out, 5);
    co.on(o.device).of(o.dtype);
    return std::make_shared<Conv2d>(co, g);
  };
  auto dense = [&](int64_t in, int64_t out) {
    LinearOptions lo(in, out);
    lo.dtype = o.dtype;
    lo.device = o.device;
    return std::make_shared<Linear>(lo, g);
  };
  auto prelu = [&] {
    PReLUOptions po;
    po.dtype = o.dtype;
    po.device = o.device;
    return std::make_shared<PReLU>(po);
  };
  conv1_ = register_module("conv1", conv(o.in_channels, o.conv1));
  p1_ = register_module("prelu1", prelu());
  conv2_ = register_module("conv2", conv(o.conv1, o.conv2));
  p2_ = register_module("prelu2", prelu());
  fc1_ = register_module("fc1", dense(flat_, o.hidden));
  p3_ = register_module("prelu3", prelu());
  fc2_ = register_module("fc2", dense(o.hidden, o.hidden));
  p4_ = register_module("prelu4", prelu());
  fc3_ = register_module("fc3", dense(o.hidden, o.embedding));
  pool_ = std::make_shared<MaxPool2d>(2);
}

Variable EmbeddingNet::forward(const Variable& x) {
  MN_CHECK(x.dim() == 4 && x.size(1) == opt_.in_channels && x.size(2) == opt_.input_size &&
               x.size(3) == opt_.input_size,
           "EmbeddingNet: expected input (N, ", opt_.in_channels, ", ", opt_.input_size, ", ", opt_.input_size,
           "), got ", x.data().desc());
  // PReLU then 2x2 max-pool as one op (autograd/ops_conv.h): the same values and
  // gradients as p1_ then pool_, without the full-size PReLU activation.
  const kernels::Pool2dParams& pp = pool_->params();
  Variable h = ag::prelu_max_pool2d(conv1_->forward(x), p1_->weight(), pp);
  h = ag::prelu_max_pool2d(conv2_->forward(h), p2_->weight(), pp);
  h = ag::flatten_batch(h);
  h = p3_->forward(fc1_->forward(h));
  h = p4_->forward(fc2_->forward(h));
  return fc3_->forward(h);
}

}  // namespace mn::nn
