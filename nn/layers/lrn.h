// nn::LRN: local response normalisation across channels (no parameters).
// Defaults k = 2, n = 5, alpha = 1e-4, beta = 0.75 with alpha multiplying the plain
// sum of squares (Krizhevsky; Omniglot study eq. 10); set alpha_over_n for the
// Caffe / PyTorch convention. See kernels/lrn.h for both formulas.
#pragma once
#include "autograd/ops_layers.h"
#include "nn/module.h"

namespace mn::nn {

class LRN : public Module {
 public:
  explicit LRN(const kernels::LrnOptions& o = {}) : opt_(o) {}
  LRN(int64_t size, double alpha, double beta, double k, bool alpha_over_n = false);
  // (N, C, H, W) -> (N, C, H, W)
  Variable forward(const Variable& x) override;
  const kernels::LrnOptions& options() const { return opt_; }

 private:
  kernels::LrnOptions opt_;
};

}  // namespace mn::nn
