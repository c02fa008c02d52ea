// Miners at the module level (pytorch-metric-learning's split: distance ->
// miner -> loss -> reducer). A Miner turns a (B, B) distance matrix of a batch
// and its (B) labels into index lists (kernels/miners.h does the arithmetic, on
// the CPU or the GPU, never materialising B x B x B):
//   TripletMiner   (T, 3) triplets (a, p, n); the k-miners also give pull pairs
//   PairMiner      (P, 2) pairs (i, j) with is_pos: all positive pairs plus as
//                  many random or hardest negative pairs (kernels::mine_pairs)
//   AllPairsMiner  every unordered pair i < j with is_pos
//   MultiSimilarityMiner  pml's MultiSimilarityMiner(epsilon): ordered pairs
//                  (anchor, j) kept by the MS rule on cosine similarity
//                  (kernels/multi_similarity.h), for any pair loss
// Miners are chosen by name from miner_registry() (the names are listed by
// miner_registry().help()); margins are in the units of the distance the
// caller passes (the Objective uses the loss's distance: squared L2 for the
// Schroff / Kumar / global kinds, plain L2 for the others) unless the miner
// names its own (Miner::distance(), e.g. cosine for multi-similarity).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "autograd/variable.h"
#include "kernels/distance.h"
#include "kernels/miners.h"
#include "nn/registry.h"

namespace mn::nn {

// What a miner emits and a loss consumes. None: the loss uses the whole batch
// (e.g. Multi-Similarity, which mines its pairs inside its fused kernel).
enum class TupleKind { Triplets, Pairs, None };
const char* tuple_kind_name(TupleKind k);

struct Mined {
  TupleKind kind = TupleKind::None;
  Tensor triplets;  // (T, 3) int64 (a, p, n)               [Triplets]
  Tensor pairs;     // (P, 2) int64: the pair list [Pairs]; the k-miners' pull pairs [Triplets]
  Tensor is_pos;    // (P) int64, 1 = same class            [Pairs]
  // MinerConfig::fixed_size: one int64 on the device, the rows that are tuples
  // (the rest padding the losses skip); undefined: every row is one.
  Tensor valid;
  Tensor pairs_valid;  // the same for the k-miners' pull pairs
  int64_t workspace_bytes = 0;
  // Number of rows (triplets or pairs; with `valid`, the capacity); 0 for None.
  int64_t count() const;
};

struct MinerConfig {
  double margin = 0.2;  // semi-hard / violating thresholds (distance units)
  int k = 3;            // k-miners: positives and negatives per anchor
  int dw_dim = 128;     // k-ns, distance-weighted: embedding dimension
  double dw_lambda = 1.4, dw_cutoff = 0.5;  // k-ns: weight cap; both: distance clamp (Wu et al.: 0.5)
  double dw_nonzero_cutoff = 1.4;           // distance-weighted: weight 0 at D >= this (pml default)
  double epsilon = 0.1; // multi-similarity miner margin (pml default)
  // Triplet and pair miners: a fixed-size output sized from the batch size
  // alone, its count left on the device (Mined::valid), so a GPU step makes no
  // host read for it and can run as a CUDA graph (runtime/graph.h). The losses
  // over per-term sums take it (triplet kinds except the global ones,
  // contrastive, lmnn); the pair, multi-similarity and k-miners have it too
  // (all-pairs needs none: its list depends on B only).
  bool fixed_size = false;
};

class Miner {
 public:
  virtual ~Miner() = default;
  // dist (B, B) float/double, labels (B) int32/int64, same device. `gen` drives
  // the random miners (default_generator() when null).
  virtual Mined mine(const Tensor& dist, const Tensor& labels, Generator* gen = nullptr) = 0;
  virtual TupleKind output() const = 0;
  // The distance the miner needs whatever the loss (none: the loss's).
  virtual std::optional<kernels::Pairwise> distance() const { return std::nullopt; }
  const std::string& name() const { return name_; }
  void set_name(const std::string& n) { name_ = n; }

 private:
  std::string name_;
};

class TripletMiner : public Miner {
 public:
  explicit TripletMiner(const kernels::MinerParams& p, bool fixed_size = false) : p_(p), fixed_(fixed_size) {}
  Mined mine(const Tensor& dist, const Tensor& labels, Generator* gen = nullptr) override;
  TupleKind output() const override { return TupleKind::Triplets; }
  const kernels::MinerParams& params() const { return p_; }

 private:
  kernels::MinerParams p_;
  bool fixed_;
};

class PairMiner : public Miner {
 public:
  explicit PairMiner(kernels::PairNegatives neg, bool fixed_size = false) : neg_(neg), fixed_(fixed_size) {}
  Mined mine(const Tensor& dist, const Tensor& labels, Generator* gen = nullptr) override;
  TupleKind output() const override { return TupleKind::Pairs; }

 private:
  kernels::PairNegatives neg_;
  bool fixed_;
};

// Every unordered pair i < j. The (B(B-1)/2, 2) index list depends only on B; it
// is built on the host once per B and copied to the labels' device explicitly
// (cached, so the steady state makes no transfer); is_pos is computed on the device.
class AllPairsMiner : public Miner {
 public:
  Mined mine(const Tensor& dist, const Tensor& labels, Generator* gen = nullptr) override;
  TupleKind output() const override { return TupleKind::Pairs; }

 private:
  Tensor pairs_;  // cached (P, 2) for the last B and device
};

// pml's MultiSimilarityMiner: `dist` must be the COSINE DISTANCE matrix 1 - S
// (distance() asks the Objective for it); keeps negatives with S + eps > the
// anchor's least similar positive and positives with S - eps < its most similar
// negative, as ordered pairs (anchor, j) in row-major order.
class MultiSimilarityMiner : public Miner {
 public:
  explicit MultiSimilarityMiner(double epsilon = 0.1, bool fixed_size = false) : eps_(epsilon), fixed_(fixed_size) {}
  Mined mine(const Tensor& dist, const Tensor& labels, Generator* gen = nullptr) override;
  TupleKind output() const override { return TupleKind::Pairs; }
  std::optional<kernels::Pairwise> distance() const override { return kernels::Pairwise::Cosine; }

 private:
  double eps_;
  bool fixed_;
};

// Returns nothing; for losses that use the whole batch (TupleKind::None).
class NoMiner : public Miner {
 public:
  Mined mine(const Tensor&, const Tensor&, Generator* = nullptr) override { return {}; }
  TupleKind output() const override { return TupleKind::None; }
};

using MinerFactory = std::function<std::shared_ptr<Miner>(const MinerConfig&)>;
// all-triplets, violating-triplets, batch-hard, semi-hard, semi-hard-or-hardest,
// random-violating, random-semi-hard, k-bh, k-bsh, k-epen, k-ephn, k-hpen,
// k-hphn, k-ns, distance-weighted, pairs-random, pairs-hard-negative, all-pairs, multi-similarity, none.
Registry<MinerFactory>& miner_registry();
// miner_registry().get(name)(cfg) with the miner's name set.
std::shared_ptr<Miner> make_miner(const std::string& name, const MinerConfig& cfg = {});

}  // namespace mn::nn
