// nn::Linear (y = x W^T + b, W (out, in), b (out)) and nn::Flatten
// ((N, ...) -> (N, prod(...))). Linear's default initialisation is PyTorch's:
// W ~ kaiming_uniform_(a = sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in)), b ~ U(same bound).
#pragma once
#include <cstdint>

#include "autograd/ops_conv.h"
#include "nn/module.h"
#include "runtime/rng.h"

namespace mn::nn {

struct LinearOptions {
  int64_t in_features = 1, out_features = 1;
  bool bias = true;
  DType dtype = DType::F32;
  Device device = Device::cpu();
  LinearOptions() = default;
  LinearOptions(int64_t in, int64_t out) : in_features(in), out_features(out) {}
  LinearOptions& with_bias(bool b) { bias = b; return *this; }
  LinearOptions& on(Device d) { device = d; return *this; }
  LinearOptions& of(DType t) { dtype = t; return *this; }
};

class Linear : public Module {
 public:
  explicit Linear(const LinearOptions& o, Generator& g = default_generator());
  Linear(int64_t in, int64_t out, Generator& g = default_generator())
      : Linear(LinearOptions(in, out), g) {}
  // (N, in) -> (N, out)
  Variable forward(const Variable& x) override;
  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }
  const LinearOptions& options() const { return opt_; }
  void share_parameters_from(const Linear& other);

 private:
  LinearOptions opt_;
  Variable weight_, bias_;
};

class Flatten : public Module {
 public:
  Variable forward(const Variable& x) override { return ag::flatten_batch(x); }
};

}  // namespace mn::nn
