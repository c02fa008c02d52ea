// MLP trunk: dense layers with an activation and optional dropout between them,
// e.g. the pair-selection study's 784 -> 300 -> 300 -> 300, ReLU, dropout 0.2:
//
//   fc1 -> act -> [dropout] -> fc2 -> act -> [dropout] -> ... -> fcL [-> act]
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
