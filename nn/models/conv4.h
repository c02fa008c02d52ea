// The 4-block convolutional embedding used widely for few-shot Omniglot
// (Vinyals et al. 2016, Snell et al. 2017): each block is
//
//   conv 3x3 (padding 1) -> [batch-norm] -> activation -> max-pool 2
//        -> [LRN] -> [batch-norm after pooling] -> [dropout]
//
// so 28x28 inputs end at 1x1 x channels (64 features); bigger inputs end at
// (S / 16)^2 x channels. An optional dense layer maps the flattened features to
// `embedding` outputs (0: no dense layer, the flattened features are the
// embedding), with dropout before it and a sigmoid after it when asked.
// The bracketed parts after pooling, the activation, the dropout and the sigmoid
// are the Koch branch's options (koch_branch.h) in the same places, so the
// Omniglot study's ablations have the same meaning on this trunk (its CPU scale);
// by default (ReLU, conv batch-norm, nothing else) it is the literature's conv4.
// With ReLU the pooling runs before the activation (the same values and gradients,
// on a quarter of the elements: conv4.cpp).
//
// Parameter names: block{1..B}.conv.{weight,bias}, block{1..B}.bn.{weight,bias,
// running_mean,running_var}, block{1..B}.pool_bn.* and dense.{weight,bias}. Weights
// use the layers' default (PyTorch) initialisation drawn from the generator, block
// by block; a dropout generator is drawn after them, and only when dropout > 0 (so
// the default trunk's initial weights do not depend on this option).
#pragma once
#include <memory>
#include <vector>

#include "kernels/activation.h"
#include "nn/layers/activation.h"
#include "nn/layers/batchnorm.h"
#include "nn/layers/conv2d.h"
#include "nn/layers/dropout.h"
#include "nn/layers/linear.h"
#include "nn/layers/lrn.h"
#include "nn/layers/pool.h"
#include "nn/module.h"

namespace mn::nn {

struct Conv4Options {
  int64_t in_channels = 1;
  int64_t input_size = 28;  // square input side
  int64_t channels = 64;    // every block's width
  int64_t blocks = 4;
  bool batchnorm = true;        // after each convolution (conv4's own)
  int64_t embedding = 0;        // > 0: a dense layer to this size after flattening
  kernels::Act activation = kernels::Act::ReLU;
  bool lrn = false;             // local response normalisation after each pooling
  bool pool_batchnorm = false;  // batch-norm after each pooling (Koch's --batchnorm)
  double dropout = 0;           // after each pooling and before the dense layer
  bool sigmoid_embedding = false;  // sigmoid after the dense layer (needs embedding > 0)
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
  // The dropout masks' generator (null without dropout): checkpoints save its state.
  Generator* dropout_generator() const { return dropout_gen_.get(); }

 private:
  Conv4Options opt_;
  std::vector<std::shared_ptr<Conv2d>> convs_;
  std::vector<std::shared_ptr<BatchNorm>> bns_, pool_bns_;
  std::vector<std::shared_ptr<Dropout>> drops_;
  std::unique_ptr<Generator> dropout_gen_;
  std::shared_ptr<Activation> act_;
  std::shared_ptr<LRN> lrn_;
  std::shared_ptr<MaxPool2d> pool_;
  std::shared_ptr<Linear> dense_;
  int64_t flat_ = 0;
};

}  // namespace mn::nn
