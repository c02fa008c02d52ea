// The sampling study's embedding network (Bielski's `EmbeddingNet` from
// adambielski/siamese-triplet, which the study's code uses for all seven
// strategies):
//
//   conv 1->32 5x5 -> PReLU -> max-pool 2 -> conv 32->64 5x5 -> PReLU -> max-pool 2
//   -> flatten (64 x 4 x 4 = 1024 for 28x28 inputs) -> dense 1024->256 -> PReLU
//   -> dense 256->256 -> PReLU -> dense 256->E   (E = 2: the study's 2-d embedding)
//
// Each PReLU has one shared slope (PyTorch's nn.PReLU() default, 0.25).
// Parameter names: conv1.{weight,bias}, prelu1.weight, conv2.{weight,bias},
// prelu2.weight, fc1.{weight,bias}, prelu3.weight, fc2.{weight,bias},
// prelu4.weight, fc3.{weight,bias}. Weights use the layers' default (PyTorch)
// initialisation drawn from the generator, layer by layer.
#pragma once
#include <memory>

#include "nn/layers/conv2d.h"
#include "nn/layers/linear.h"
#include "nn/layers/pool.h"
#include "nn/layers/prelu.h"
#include "nn/module.h"

namespace mn::nn {

struct EmbeddingNetOptions {
  int64_t in_channels = 1;
  int64_t input_size = 28;  // square input side
  int64_t conv1 = 32, conv2 = 64;
  int64_t hidden = 256;
  int64_t embedding = 2;
  DType dtype = DType::F32;
  Device device = Device::cpu();
};

class EmbeddingNet : public Module {
 public:
  EmbeddingNet(const EmbeddingNetOptions& o, Generator& g);
  // (N, in_channels, S, S) -> (N, embedding)
  Variable forward(const Variable& x) override;
  const EmbeddingNetOptions& options() const { return opt_; }
  int64_t flat_features() const { return flat_; }

 private:
  EmbeddingNetOptions opt_;
  int64_t flat_ = 0;
  std::shared_ptr<Conv2d> conv1_, conv2_;
  std::shared_ptr<PReLU> p1_, p2_, p3_, p4_;
  std::shared_ptr<MaxPool2d> pool_;
  std::shared_ptr<Linear> fc1_, fc2_, fc3_;
};

}  // namespace mn::nn
