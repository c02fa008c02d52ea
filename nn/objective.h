// Objective: distance -> miner -> loss -> reduction, the composition
// pytorch-metric-learning made popular, behind one call a study makes per step:
//
//   nn::Objective obj = nn::Objective::from_names("schroff", "semi-hard", lcfg, mcfg);
//   nn::ObjectiveOutput out = obj(embeddings, labels, &sample_gen);
//   out.loss.backward();
//   for (auto& [k, v] : out.named_stats()) log(k, v);   // one small device->host copy
//
// The miner sees the DETACHED (B, B) distance matrix of the embeddings
// (Loss::mining_embedding(): x L for LMNN) in the
// loss's distance (Loss::distance(): squared L2, L2 or cosine distance), so its
// margin is in the loss's units, unless the miner needs its own
// (Miner::distance(): cosine for the multi-similarity miner); the loss (whose reduction is a named step of
// its fused kernel, LossConfig::reduction) consumes the mined tuples. A batch
// where the miner finds nothing gives a zero loss that still backpropagates
// (zero gradients), with zero stats, so a training loop needs no special case.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/losses/loss.h"
#include "nn/miners/miner.h"

namespace mn::nn {

struct ObjectiveOutput {
  ag::Variable loss;  // scalar
  Tensor stats;       // (5) on the loss device (nn/losses/losses.h)
  int64_t tuples = 0; // mined triplets or pairs; B (B - 1) ordered pairs for whole-batch losses;
                      // -1 with a fixed-size miner (the count is `valid`, on the device)
  Tensor valid;       // MinerConfig::fixed_size: the mined count, one int64 on the device
  // {loss, active, tuples, active_fraction, mean_pos, mean_neg}; reads the stats
  // (one small transfer). mean_pos / mean_neg are distances, or similarities
  // for multi-similarity.
  std::vector<std::pair<std::string, double>> named_stats() const;
};

class Objective {
 public:
  // The miner's output kind must be what the loss consumes (mn::Error otherwise).
  Objective(std::shared_ptr<Miner> miner, std::shared_ptr<Loss> loss);
  static Objective from_names(const std::string& loss, const std::string& miner,
                              const LossConfig& lcfg = {}, const MinerConfig& mcfg = {});
  // emb (B, D), labels (B) int32/int64 on emb's device.
  ObjectiveOutput operator()(const ag::Variable& emb, const Tensor& labels, Generator* gen = nullptr);
  // The detached (B, B) distance matrix the miner sees.
  Tensor mining_distance(const ag::Variable& emb) const;
  Miner& miner() { return *miner_; }
  Loss& loss() { return *loss_; }

 private:
  std::shared_ptr<Miner> miner_;
  std::shared_ptr<Loss> loss_;
};

}  // namespace mn::nn
