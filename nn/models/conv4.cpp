// The conv4 trunk (see conv4.h).
#include "nn/models/conv4.h"

#include "autograd/ops_layers.h"
#include "autograd/ops_conv.h"

namespace mn::nn {

Conv4::Conv4(const Conv4Options& o, Generator& g) : opt_(o) {
  MN_CHECK(o.in_channels >= 1 && o.channels >= 1 && o.blocks >= 1, "Conv4: in_channels, channels and blocks must be "
           ">= 1, got ", o.in_channels, ", ", o.channels, ", ", o.blocks);
  MN_CHECK(o.embedding >= 0, "Conv4: embedding must be >= 0 (0: no dense layer), got ", o.embedding);
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
  }
  pool_ = std::make_shared<MaxPool2d>(2);
  if (o.embedding > 0) {
    LinearOptions lo(flat_, o.embedding);
    lo.dtype = o.dtype;
    lo.device = o.device;
    dense_ = register_module("dense", std::make_shared<Linear>(lo, g));
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
    if (!bns_.empty()) h = bns_[b]->forward(h);
    h = ag::relu(h);
    h = pool_->forward(h);
  }
  h = ag::flatten_batch(h);
  return dense_ ? dense_->forward(h) : h;
}

}  // namespace mn::nn
