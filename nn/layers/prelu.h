// nn::PReLU: y = x for x > 0, a * x otherwise, with a learnable slope per
// channel (num_parameters = C, dim 1 of the input) or one shared slope
// (num_parameters = 1), initialised to `init` (PyTorch's nn.PReLU: 0.25).
// Parameter name: weight (num_parameters). Kernels: kernels/prelu.h.
#pragma once
#include <cstdint>

#include "autograd/ops_layers.h"
#include "nn/module.h"

namespace mn::nn {

struct PReLUOptions {
  int64_t num_parameters = 1;
  double init = 0.25;
  DType dtype = DType::F32;
  Device device = Device::cpu();
};

class PReLU : public Module {
 public:
  explicit PReLU(const PReLUOptions& o = {});
  // (N, C, ...) or (N, C) -> same shape
  Variable forward(const Variable& x) override { return ag::prelu(x, weight_); }
  const Variable& weight() const { return weight_; }

 private:
  Variable weight_;
};

}  // namespace mn::nn
