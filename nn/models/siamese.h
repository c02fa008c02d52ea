// Siamese network over any trunk module: both inputs through the trunk (shared
// weights, one batch of 2N) or through two trunks ("branch.*" and
// "second_branch.*", disjoint weights), then optionally Koch's head:
// |e1 - e2| -> weighted sum + bias -> logit (the sigmoid is applied inside the
// BCE loss, from the logit, for stability).
//
// The Koch constructor builds the KochBranch and the head exactly as before
// (branch, then head.weight (1, E) and head.bias (1) drawn from the same
// generator), so names and initial values are unchanged.
#pragma once
#include <memory>
#include <vector>

#include "nn/layers/linear.h"
#include "nn/models/koch_branch.h"
#include "nn/module.h"
#include "nn/optim/optimizer.h"

namespace mn::nn {

class SiameseNet : public Module {
 public:
  // Koch's net: KochBranch + head initialised with o.init's dense N(mean, std).
  SiameseNet(const KochBranchOptions& o, Generator& g);
  // Any trunk. head_features > 0 adds the head (1, head_features) with PyTorch's
  // Linear initialisation drawn from g; 0 = no head (embeddings only, for
  // contrastive-style losses). second_trunk non-null = disjoint weights.
  SiameseNet(std::shared_ptr<Module> trunk, int64_t head_features, Generator& g,
             std::shared_ptr<Module> second_trunk = nullptr);

  // Embeds both sides; returns (e1, e2).
  std::vector<Variable> embed_pairs(const Variable& x1, const Variable& x2);
  Variable embed(const Variable& x);
  // Similarity logits (N) from embeddings (needs the head).
  Variable logits(const Variable& e1, const Variable& e2);
  Variable forward(const Variable& x) override { return embed(x); }
  bool has_head() const { return head_ != nullptr; }
  bool shared() const { return second_ == nullptr; }
  const Variable& head_weight() const;  // (1, E)
  const Variable& head_bias() const;    // (1)
  Module& trunk() { return *branch_; }
  Module& second_trunk() { return second_ ? *second_ : *branch_; }
  // The Koch branch (mn::Error when the trunk is not a KochBranch).
  KochBranch& branch();
  // Koch trunk only: one group per layer (conv1..4, dense, head) with Koch's per-layer decay.
  std::vector<ParamGroup> param_groups(double lr, double momentum, const std::vector<double>& decays) const;

 private:
  std::shared_ptr<Module> branch_, second_;
  std::shared_ptr<Linear> head_;
};

}  // namespace mn::nn
