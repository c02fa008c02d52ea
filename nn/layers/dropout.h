// nn::Dropout: inverted dropout with rate p in training mode, identity in
// evaluation mode. The mask comes from a Philox Generator (seed, offset) so it is
// bit-identical on CPU and GPU; by default the process-wide default_generator().
#pragma once
#include "autograd/ops_layers.h"
#include "nn/module.h"
#include "runtime/rng.h"

namespace mn::nn {

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5) : Dropout(p, default_generator()) {}
  // The generator must outlive the module.
  Dropout(double p, Generator& gen);
  Variable forward(const Variable& x) override;
  double p() const { return p_; }

 private:
  double p_;
  Generator* gen_;
};

}  // namespace mn::nn
