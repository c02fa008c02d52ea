// Triplet network over any trunk module (Koch's branch, an MLP, a small conv
// net): embeds anchors, positives and negatives.
//
// Weight sharing (TripletShare):
//   Full            one trunk ("branch.*") for all three inputs; they go through
//                   it as one batch of 3N.
//   DisjointAnchor  a separate anchor trunk ("anchor_branch.*") and one trunk
//                   ("branch.*") shared by positives and negatives.
// Shared inputs use the very same Variables (one optimizer update); disjoint
// trunks hold different ones.
//
// The Koch constructor builds KochBranch trunks exactly as before (branch first,
// then the anchor branch, from the same generator), so parameter names and
// initial values are unchanged.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "nn/models/koch_branch.h"
#include "nn/module.h"
#include "nn/optim/optimizer.h"

namespace mn::nn {

enum class TripletShare { Full, DisjointAnchor };

class TripletNet : public Module {
 public:
  // Koch branches (the Omniglot study).
  TripletNet(const KochBranchOptions& o, TripletShare share, Generator& g);
  // Any trunk: `make_trunk` is called once (Full) or twice (DisjointAnchor: the
  // shared branch first, then the anchor branch), so initial draws follow that order.
  TripletNet(const std::function<std::shared_ptr<Module>()>& make_trunk, TripletShare share);
  // Given trunks: anchor_trunk null = Full sharing.
  explicit TripletNet(std::shared_ptr<Module> trunk, std::shared_ptr<Module> anchor_trunk = nullptr);

  // Embeds anchors (N,...), positives and negatives (N,...); returns (a, p, n) embeddings.
  // With full sharing the three go through the branch as one batch of 3N.
  std::vector<Variable> embed_triplets(const Variable& anchors, const Variable& positives,
                                       const Variable& negatives);
  // Embedding of query/anchor images (the anchor branch when disjoint).
  Variable embed_anchor(const Variable& x);
  // Embedding of candidate images (the shared/positive branch).
  Variable embed_candidate(const Variable& x);
  Variable forward(const Variable& x) override { return embed_candidate(x); }
  TripletShare share() const { return share_; }
  Module& trunk() { return *branch_; }
  Module& anchor_trunk() { return anchor_branch_ ? *anchor_branch_ : *branch_; }
  // The Koch branch (mn::Error when the trunk is not a KochBranch).
  KochBranch& branch();
  // Koch trunks only: convolutions (all branches) and dense layers.
  std::vector<ParamGroup> param_groups(double lr, double conv_decay, double dense_decay) const;

 private:
  TripletShare share_;
  std::shared_ptr<Module> branch_, anchor_branch_;
};

}  // namespace mn::nn
