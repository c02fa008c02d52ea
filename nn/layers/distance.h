// Distance modules merging two branches (two inputs, no parameters):
//   AbsDiff           elementwise |a - b| (Koch et al.'s siamese merge)
//   L1Distance        (N, D) x (N, D) -> (N)
//   L2Distance        (N, D) x (N, D) -> (N), squared or plain (zero subgradient at d <= 1e-12)
//   PairwiseDistance  (M, D) x (N, D) -> (M, N): L1, squared L2 (the default),
//                     L2 or cosine distance; PairwiseDistance(m)(x, x) is the
//                     self case (exact zeros on the diagonal, as the miners see)
// All of them run the one distance implementation of kernels/distance.h, which
// also states the conventions at zero distance.
#pragma once
#include "autograd/ops_layers.h"
#include "nn/module.h"

namespace mn::nn {

// Single-input forward is not meaningful for these; use forward(a, b).
class DistanceModule : public Module {
 public:
  virtual Variable forward(const Variable& a, const Variable& b) = 0;
  Variable operator()(const Variable& a, const Variable& b) { return forward(a, b); }
  Variable forward(const Variable& x) override;
};

class AbsDiff : public DistanceModule {
 public:
  using DistanceModule::forward;
  Variable forward(const Variable& a, const Variable& b) override { return ag::abs_diff(a, b); }
};
class L1Distance : public DistanceModule {
 public:
  using DistanceModule::forward;
  Variable forward(const Variable& a, const Variable& b) override { return ag::l1_distance(a, b); }
};
class L2Distance : public DistanceModule {
 public:
  explicit L2Distance(bool squared = false) : squared_(squared) {}
  using DistanceModule::forward;
  Variable forward(const Variable& a, const Variable& b) override {
    return ag::l2_distance(a, b, squared_);
  }

 private:
  bool squared_;
};
class PairwiseDistance : public DistanceModule {
 public:
  explicit PairwiseDistance(kernels::Pairwise m = kernels::Pairwise::SqEuclidean) : m_(m) {}
  using DistanceModule::forward;
  Variable forward(const Variable& a, const Variable& b) override {
    return ag::pairwise_distance(a, b, m_);
  }

 private:
  kernels::Pairwise m_;
};

}  // namespace mn::nn
