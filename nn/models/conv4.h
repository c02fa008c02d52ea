// The 4-block convolutional embedding used widely for few-shot Omniglot
// (Vinyals et al. 2016, Snell et al. 2017): each block is
//
//   conv 3x3 (padding 1) -> [batch-norm] -> ReLU -> max-pool 2
//
// so 28x28 inputs end at 1x1 x channels (64 features); bigger inputs end at
// (S / 16)^2 x channels. An optional dense layer maps the flattened features to
// `embedding` outputs (0: no dense layer, the flattened features are the
// embedding).
//
// Parameter names: block{1..B}.conv.{weight,bias}, block{1..B}.bn.{weight,bias,
// running_mean,running_var} and dense.{weight,bias}. Weights use the layers'
// default (PyTorch) initialisation drawn from the generator, block by block.
#pragma once
#include <memory>
#include <vector>

#include "nn/layers/batchnorm.h"
#include "nn/layers/conv2d.h"
#include "nn/layers/linear.h"
#include "nn/layers/pool.h"
#include "nn/module.h"

namespace mn::nn {

struct Conv4Options {
  int64_t in_channels = 1;
  int64_t input_size = 28;  // square input side
  int64_t channels = 64;    // every block's width
  int64_t blocks = 4;
  bool batchnorm = true;
  int64_t embedding = 0;    // > 0: a dense layer to this size after flattening
  DType dtype = DType::F32;
  Device device = Device::cpu();
};

class Conv4 : public Module {
 public:
  Conv4(const Conv4Options& o, Generator& g);
  // (N, in_channels, S, S) -> (N, embedding or flat_features())
  Variable forward(const Variable& x) override;
  const Conv4Options& options() const { return opt_; }
  int64_t flat_features() const { return flat_; }
  int64_t output_features() const { return opt_.embedding > 0 ? opt_.embedding : flat_; }

 private:
  Conv4Options opt_;
  std::vector<std::shared_ptr<Conv2d>> convs_;
  std::vector<std::shared_ptr<BatchNorm>> bns_;
  std::shared_ptr<MaxPool2d> pool_;
  std::shared_ptr<Linear> dense_;
  int64_t flat_ = 0;
};

}  // namespace mn::nn
