// MLP trunk: dense layers with an activation and optional dropout between them:
//
//   fc1 -> act -> [dropout] -> fc2 -> act -> [dropout] -> ... -> fcL [-> act]
//
// MLPOptions::pair_selection() is the pair-selection study's network (its
// public LMRD code: Dense(300, ReLU) -> Dropout(0.2) -> Dense(300, ReLU) ->
// Dropout(0.2) -> Dense(300, ReLU), here on 784-d MNIST inputs): note the
// activation after the LAST layer too (activate_output), unlike the default.
//
// Parameter names: fc{1..L}.{weight,bias}. Weights use Linear's default
// (PyTorch) initialisation drawn from the generator, layer by layer. Dropout
// masks come from the MLP's own Philox generator (seeded from the construction
// generator, like KochBranch), so masks are reproducible and the same on CPU and GPU.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kernels/activation.h"
#include "nn/layers/activation.h"
#include "nn/layers/dropout.h"
#include "nn/layers/linear.h"
#include "nn/module.h"

namespace mn::nn {

struct MLPOptions {
  std::vector<int64_t> sizes{784, 300, 300, 300};  // input, hidden..., output
  kernels::Act activation = kernels::Act::ReLU;
  kernels::ActParams act_params;
  double dropout = 0.0;           // between layers (after the activation)
  bool activate_output = false;   // activation after the last layer too
  DType dtype = DType::F32;
  Device device = Device::cpu();

  // 784 -> 300 -> 300 -> 300, ReLU after every layer, dropout 0.2 between.
  static MLPOptions pair_selection(int64_t input = 784) {
    MLPOptions o;
    o.sizes = {input, 300, 300, 300};
    o.activation = kernels::Act::ReLU;
    o.dropout = 0.2;
    o.activate_output = true;
    return o;
  }
};

class MLP : public Module {
 public:
  MLP(const MLPOptions& o, Generator& g);
  // (N, sizes[0]) or (N, ...) with prod(...) == sizes[0] -> (N, sizes.back())
  Variable forward(const Variable& x) override;
  const MLPOptions& options() const { return opt_; }
  Generator& dropout_generator() { return *dropout_gen_; }
  const std::vector<std::shared_ptr<Linear>>& layers() const { return fcs_; }

 private:
  MLPOptions opt_;
  std::unique_ptr<Generator> dropout_gen_;
  std::vector<std::shared_ptr<Linear>> fcs_;
  std::vector<std::shared_ptr<Dropout>> drops_;
  std::shared_ptr<Activation> act_;
};

}  // namespace mn::nn
