// Koch et al.'s branch (see koch_branch.h).
#include "nn/models/koch_branch.h"

#include <cmath>

#include "autograd/ops.h"
#include "autograd/ops_conv.h"
#include "autograd/ops_layers.h"
#include "nn/init.h"

namespace mn::nn {

namespace {
int64_t scaled(int64_t c, double w) { return std::max<int64_t>(1, std::llround(c * w)); }

void init_normal(const Variable& v, double mean, double std, Generator& g) {
  if (!v.defined()) return;
  Tensor t = v.data();
  init::normal_(t, mean, std, g);
}
}  // namespace

KochBranch::KochBranch(const KochBranchOptions& o, Generator& g) : opt_(o) {
  MN_CHECK(o.width > 0, "KochBranch: width must be positive, got ", o.width);
  MN_CHECK(o.dropout >= 0 && o.dropout < 1, "KochBranch: dropout must be in [0, 1), got ", o.dropout);
  const int64_t ks[4] = {10, 7, 4, 4};
  const int64_t cs[4] = {scaled(64, o.width), scaled(128, o.width), scaled(128, o.width),
                         scaled(256, o.width)};
  dropout_gen_ = std::make_unique<Generator>(g.next_u32() * 0x9E3779B97F4A7C15ull + 1, 0);
  int64_t side = o.input_size, in = 1;
  for (int i = 0; i < 4; ++i) {
    Conv2dOptions co(in, cs[i], ks[i]);
    co.dtype = o.dtype;
    co.device = o.device;
    auto conv = register_module("conv" + std::to_string(i + 1), std::make_shared<Conv2d>(co, g));
    init_normal(conv->weight(), 0.0, o.init.conv_w_std, g);
    init_normal(conv->bias(), o.init.conv_b_mean, o.init.conv_b_std, g);
    convs_.push_back(conv);
    side = side - ks[i] + 1;
    MN_CHECK(side > 0, "KochBranch: input size ", o.input_size, " is too small for the Koch branch");
    if (i < 3) {
      side /= 2;
      if (o.batchnorm) {
        BatchNormOptions bo(cs[i]);
        bo.dtype = o.dtype;
        bo.device = o.device;
        bns_.push_back(register_module("bn" + std::to_string(i + 1), std::make_shared<BatchNorm>(bo)));
      }
    }
    in = cs[i];
  }
  flat_ = in * side * side;
  if (o.dropout > 0)
    for (int i = 0; i < 4; ++i) drops_.push_back(std::make_shared<Dropout>(o.dropout, *dropout_gen_));
  LinearOptions lo(flat_, o.embedding);
  lo.dtype = o.dtype;
  lo.device = o.device;
  dense_ = register_module("dense", std::make_shared<Linear>(lo, g));
  init_normal(dense_->weight(), 0.0, o.init.dense_w_std, g);
  init_normal(dense_->bias(), o.init.dense_b_mean, o.init.dense_b_std, g);
  pool_ = std::make_shared<MaxPool2d>(2, 2);
  if (o.lrn) lrn_ = std::make_shared<LRN>();
  act_ = std::make_shared<Activation>(o.activation);
}

Variable KochBranch::forward(const Variable& x) {
  MN_CHECK(x.dim() == 4 && x.size(1) == 1 && x.size(2) == opt_.input_size && x.size(3) == opt_.input_size,
           "KochBranch: expected input (N, 1, ", opt_.input_size, ", ", opt_.input_size, "), got ",
           x.data().desc());
  Variable h = x;
  for (size_t i = 0; i < convs_.size(); ++i) {
    // ReLU (the paper's) rides in the convolution's node (fused on CUDA's tensor cores);
    // with the pool that follows, one node whose backward applies ReLU's inside the
    // pool's (ag::conv2d_relu_max_pool2d: no pass over the full-size activation).
    const bool relu = act_->kind() == kernels::Act::ReLU;
    if (relu && i < 3) h = convs_[i]->forward_relu_max_pool(h, pool_->params());
    else h = relu ? convs_[i]->forward_relu(h) : act_->forward(convs_[i]->forward(h));
    if (i < 3) {
      if (!relu) h = pool_->forward(h);
      if (lrn_) h = lrn_->forward(h);
      if (!bns_.empty()) {
        bns_[i]->train(is_training());
        h = bns_[i]->forward(h);
      }
      if (!drops_.empty()) {
        drops_[i]->train(is_training());
        h = drops_[i]->forward(h);
      }
    }
  }
  h = ag::flatten_batch(h);
  if (!drops_.empty()) {
    drops_[3]->train(is_training());
    h = drops_[3]->forward(h);
  }
  h = dense_->forward(h);
  if (opt_.sigmoid_embedding) h = ag::sigmoid(h);
  return h;
}

std::vector<Variable> KochBranch::conv_parameters() const {
  std::vector<Variable> out;
  for (auto& c : convs_) {
    out.push_back(c->weight());
    if (c->bias().defined()) out.push_back(c->bias());
  }
  for (auto& b : bns_) {
    if (b->weight().defined()) out.push_back(b->weight());
    if (b->bias().defined()) out.push_back(b->bias());
  }
  return out;
}

std::vector<Variable> KochBranch::dense_parameters() const {
  std::vector<Variable> out{dense_->weight()};
  if (dense_->bias().defined()) out.push_back(dense_->bias());
  return out;
}

}  // namespace mn::nn
