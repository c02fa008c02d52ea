// Losses as objects chosen by name (loss_registry()), with one signature so a
// study can swap them by a flag: compute(embeddings (B, D), labels (B), mined
// tuples) -> LossOutput (the loss Variable and the (5) stats, nn/losses/losses.h).
// Each loss says which tuples it consumes (TupleKind); the Objective
// (nn/objective.h) pairs it with a miner that emits them.
//
// Built-in names (loss_registry().help() gives one line each):
//   triplets: schroff, kumar, margin-l2, soft-margin, softmax, global, global-triplet
//   pairs:    contrastive-hadsell, contrastive-sampling, koch-siamese (needs the head)
//   k-miner triplets + pull pairs: lmnn (needs the metric L; emb are the inputs x)
//   whole batch: multi-similarity (Wang et al. 2019; cosine similarity of the
//                L2-normalised embeddings, its miner fused, epsilon < 0 disables it)
// Adding a loss: docs/extending.md.
#pragma once
#include <limits>
#include <memory>
#include <string>

#include "kernels/distance.h"
#include "nn/losses/losses.h"
#include "nn/miners/miner.h"
#include "nn/registry.h"

namespace mn::nn {

// The union of the built-in losses' hyperparameters; each loss reads its own.
struct LossConfig {
  // NaN: the loss's own default (0.2 for the triplet kinds, 1.0 contrastive).
  double margin = std::numeric_limits<double>::quiet_NaN();
  Reduction reduction = Reduction::Mean;
  int squared = -1;  // triplet kinds: -1 the paper's distance, 0 plain L2, 1 squared
  double global_l = 0.8, global_t = 0.4, global_g = 1.0;
  bool unbiased_var = false;
  // multi-similarity (pytorch-metric-learning's defaults)
  double ms_alpha = 2.0, ms_beta = 50.0, ms_base = 0.5, ms_epsilon = 0.1;
  // koch-siamese: the head's weight (1, E) and bias (1)
  ag::Variable head_weight, head_bias;
  // lmnn: the linear metric L (Din, K) and the push weight c
  ag::Variable lmnn_metric;
  double lmnn_c = 1.0;
  // batch-all: only the (a, p) pairs with a < p (the sampling study's all-triplet selector)
  bool unordered_positives = false;
};

class Loss {
 public:
  virtual ~Loss() = default;
  // The tuples compute() needs from the miner.
  virtual TupleKind tuples() const = 0;
  // The distance the loss (and so a miner's margin) is measured in.
  virtual kernels::Pairwise distance() const { return kernels::Pairwise::SqEuclidean; }
  // The embeddings a miner should measure (detached); LMNN mines in the
  // transformed space x L, every other loss in the embedding space.
  virtual Tensor mining_embedding(const ag::Variable& emb) const { return emb.data(); }
  // emb (B, D) on the labels' device; `mined` from a miner of kind tuples().
  virtual LossOutput compute(const ag::Variable& emb, const Tensor& labels, const Mined& mined) = 0;
  const std::string& name() const { return name_; }
  void set_name(const std::string& n) { name_ = n; }

 private:
  std::string name_;
};

using LossFactory = std::function<std::shared_ptr<Loss>(const LossConfig&)>;
Registry<LossFactory>& loss_registry();
// loss_registry().get(name)(cfg) with the loss's name set.
std::shared_ptr<Loss> make_loss(const std::string& name, const LossConfig& cfg = {});

}  // namespace mn::nn
