// Activation modules (no parameters): ReLU, ELU(alpha), SELU, Softplus(beta,
// threshold), Sigmoid, Tanh. Each is one fused kernel (kernels/activation.h).
#pragma once
#include "autograd/ops_layers.h"
#include "nn/module.h"

namespace mn::nn {

class Activation : public Module {
 public:
  explicit Activation(kernels::Act a, const kernels::ActParams& p = {}) : act_(a), p_(p) {}
  Variable forward(const Variable& x) override { return ag::activation(x, act_, p_); }
  kernels::Act kind() const { return act_; }

 private:
  kernels::Act act_;
  kernels::ActParams p_;
};

class ReLU : public Activation {
 public:
  ReLU() : Activation(kernels::Act::ReLU) {}
};
class ELU : public Activation {
 public:
  explicit ELU(double alpha = 1.0) : Activation(kernels::Act::ELU, params(alpha)) {}

 private:
  static kernels::ActParams params(double alpha) {
    kernels::ActParams p;
    p.alpha = alpha;
    return p;
  }
};
class SELU : public Activation {
 public:
  SELU() : Activation(kernels::Act::SELU) {}
};
class Softplus : public Activation {
 public:
  explicit Softplus(double beta = 1.0, double threshold = 20.0)
      : Activation(kernels::Act::Softplus, params(beta, threshold)) {}

 private:
  static kernels::ActParams params(double beta, double threshold) {
    kernels::ActParams p;
    p.beta = beta;
    p.threshold = threshold;
    return p;
  }
};
class Sigmoid : public Activation {
 public:
  Sigmoid() : Activation(kernels::Act::Sigmoid) {}
};
class Tanh : public Activation {
 public:
  Tanh() : Activation(kernels::Act::Tanh) {}
};

}  // namespace mn::nn
