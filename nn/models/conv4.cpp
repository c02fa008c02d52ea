// The conv4 trunk (see conv4.h).
#include "nn/models/conv4.h"

#include "autograd/ops.h"
#include "autograd/ops_layers.h"
#include "autograd/ops_conv.h"

namespace mn::nn {

Conv4::Conv4(const Conv4Options& o, Generator& g) : opt_(o) {
  MN_CHECK(o.in_channels >= 1 && o.channels >= 1 && o.blocks >= 1, "Conv4: in_channels, channels and blocks must be "
           ">= 1, got ", o.in_channels, ", ", o.channels, ", ", o.blocks);
  MN_CHECK(o.embedding >= 0, "Conv4: embedding must be >= 0 (0: no dense layer), got ", o.embedding);
  MN_CHECK(o.dropout >= 0 && o.dropout < 1, "Conv4: dropout must be in [0, 1), got ", o.dropout);
  MN_CHECK(!o.sigmoid_embedding || o.embedding > 0, "Conv4: a sigmoid embedding needs a dense layer (embedding > 0)");
  int64_t side = o.input_size;
  for (int64_t b = 0; b < o.blocks; ++b) {
    MN_CHECK(side >= 2, "Conv4: a ", o.input_size, "x", o.input_size, " input is too small for ", o.blocks,
             " blocks (each halves the side); use a bigger image or fewer blocks");
    side /= 2;  // conv 3x3 with padding 1 keeps the side; pooling halves it (floor)
  }
  flat_ = o.channels * side * side;
  for (int64_t b = 0; b < o.blocks; ++b) {
    const std::string name = "block" + std::to_string(b + 1);
    Conv2dOptions co(b == 0 ? o.in_channels : o.channels, o.channels, 3);
    co.padding(1).on(o.device).of(o.dtype);
    convs_.push_back(register_module(name + ".conv", std::make_shared<Conv2d>(co, g)));
    if (o.batchnorm)
      bns_.push_back(register_module(name + ".bn", std::make_shared<BatchNorm>(
                                                       BatchNormOptions(o.channels).on(o.device).of(o.dtype))));
    if (o.pool_batchnorm)
      pool_bns_.push_back(register_module(
          name + ".pool_bn", std::make_shared<BatchNorm>(BatchNormOptions(o.channels).on(o.device).of(o.dtype))));
  }
  pool_ = std::make_shared<MaxPool2d>(2);
  if (o.embedding > 0) {
    LinearOptions lo(flat_, o.embedding);
    lo.dtype = o.dtype;
    lo.device = o.device;
    dense_ = register_module("dense", std::make_shared<Linear>(lo, g));
  }
  act_ = std::make_shared<Activation>(o.activation);
  if (o.lrn) lrn_ = std::make_shared<LRN>();
  if (o.dropout > 0) {
    dropout_gen_ = std::make_unique<Generator>(g.next_u32() * 0x9E3779B97F4A7C15ull + 1, 0);
    for (int64_t b = 0; b <= o.blocks; ++b) drops_.push_back(std::make_shared<Dropout>(o.dropout, *dropout_gen_));
  }
}

Variable Conv4::forward(const Variable& x) {
  MN_CHECK(x.dim() == 4 && x.size(1) == opt_.in_channels && x.size(2) == opt_.input_size &&
               x.size(3) == opt_.input_size,
           "Conv4: expected input (N, ", opt_.in_channels, ", ", opt_.input_size, ", ", opt_.input_size, "), got ",
           x.data().desc());
  Variable h = x;
  for (size_t b = 0; b < convs_.size(); ++b) {
    h = convs_[b]->forward(h);
    if (!bns_.empty()) {
      bns_[b]->train(is_training());
      h = bns_[b]->forward(h);
    }
    if (opt_.activation == kernels::Act::ReLU) {
      // Max-pooling commutes with ReLU: max(relu(a), relu(b)) = relu(max(a, b)), and the
      // gradient reaches the same input element (or none, when the window's maximum is
      // <= 0), bit for bit (tests/nn/test_generic_nets.cpp). ReLU on the pooled tensor
      // touches a quarter of the elements: ~5 % of the grid's conv4 step (2026-12-02).
      h = ag::relu(pool_->forward(h));
    } else {
      h = pool_->forward(act_->forward(h));
    }
    if (lrn_) h = lrn_->forward(h);
    if (!pool_bns_.empty()) {
      pool_bns_[b]->train(is_training());
      h = pool_bns_[b]->forward(h);
    }
    if (!drops_.empty()) {
      drops_[b]->train(is_training());
      h = drops_[b]->forward(h);
    }
  }
  h = ag::flatten_batch(h);
  if (!drops_.empty() && dense_) {
    drops_.back()->train(is_training());
    h = drops_.back()->forward(h);
  }
  if (!dense_) return h;
  h = dense_->forward(h);
  return opt_.sigmoid_embedding ? ag::sigmoid(h) : h;
}

}  // namespace mn::nn
