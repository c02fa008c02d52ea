// Koch et al.'s convolutional branch: the trunk of the Omniglot study's siamese
// and triplet networks (the nets themselves, over any trunk: nn/models/siamese.h,
// nn/models/triplet.h; nn/models/koch.h includes all three).
//
// Branch, on (N, 1, 105, 105) inputs (channel widths scale with `width`):
//   conv 64@10x10 -> act -> max-pool 2 -> [LRN] [BN] [dropout]
//   conv 128@7x7  -> act -> max-pool 2 -> [LRN] [BN] [dropout]
//   conv 128@4x4  -> act -> max-pool 2 -> [LRN] [BN] [dropout]
//   conv 256@4x4  -> act -> flatten (9216) -> [dropout] -> dense 4096 -> [sigmoid]
// LRN and batch-norm sit after each pooling layer (FaceNet's placement, as the
// study chose); dropout after each pooling layer and before the dense layer.
//
// Parameter names (also the tensor names in checkpoints):
//   branch.conv{1..4}.{weight,bias}, branch.dense.{weight,bias},
//   branch.bn{1..3}.{weight,bias,running_mean,running_var} (with batch-norm);
//   the triplet net's disjoint anchor branch is "anchor_branch.*";
//   the siamese head is head.weight (1, E) and head.bias (1).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nn/layers/activation.h"
#include "nn/layers/batchnorm.h"
#include "nn/layers/conv2d.h"
#include "nn/layers/dropout.h"
#include "nn/layers/linear.h"
#include "nn/layers/lrn.h"
#include "nn/layers/pool.h"
#include "nn/module.h"

namespace mn::nn {

// N(mean, std) initialisation of weights and biases, per layer kind.
struct KochInit {
  double conv_w_std = 0.002, conv_b_mean = 0.5, conv_b_std = 0.01;
  double dense_w_std = 0.2, dense_b_mean = 0.5, dense_b_std = 0.01;
  // Koch et al. (siamese): conv N(0, 1e-2), biases N(0.5, 1e-2), dense N(0, 2e-1).
  static KochInit koch() { return {0.01, 0.5, 0.01, 0.2, 0.5, 0.01}; }
  // The Omniglot triplet study: weights N(0, 0.002), dense N(0, 0.2), biases N(0.5, 0.01).
  static KochInit study() { return {}; }
};

struct KochBranchOptions {
  int64_t input_size = 105;  // square input side
  double width = 1.0;        // channel multiplier (1: 64/128/128/256, dense 4096)
  int64_t embedding = 4096;  // dense output size
  kernels::Act activation = kernels::Act::ReLU;
  bool lrn = false;
  bool batchnorm = false;
  double dropout = 0.0;
  bool sigmoid_embedding = true;  // sigmoid after the dense layer (Koch)
  KochInit init = KochInit::study();
  DType dtype = DType::F32;
  Device device = Device::cpu();
};

class KochBranch : public Module {
 public:
  KochBranch(const KochBranchOptions& o, Generator& g);
  // (N, 1, S, S) -> (N, embedding)
  Variable forward(const Variable& x) override;
  const KochBranchOptions& options() const { return opt_; }
  // Convolution parameters and dense parameters, for per-layer optimizer groups.
  std::vector<Variable> conv_parameters() const;
  std::vector<Variable> dense_parameters() const;
  int64_t flat_features() const { return flat_; }
  // The generator behind this branch's dropout masks (saved in checkpoints).
  Generator& dropout_generator() { return *dropout_gen_; }

 private:
  KochBranchOptions opt_;
  std::unique_ptr<Generator> dropout_gen_;
  std::vector<std::shared_ptr<Conv2d>> convs_;
  std::vector<std::shared_ptr<BatchNorm>> bns_;
  std::vector<std::shared_ptr<Dropout>> drops_;
  std::shared_ptr<Linear> dense_;
  std::shared_ptr<MaxPool2d> pool_;
  std::shared_ptr<LRN> lrn_;
  std::shared_ptr<Activation> act_;
  int64_t flat_ = 0;
};

}  // namespace mn::nn
