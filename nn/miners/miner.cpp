// Miner modules over kernels/miners.h and the built-in miner names (nn/miners/miner.h).
#include "nn/miners/miner.h"

#include <algorithm>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/indexing.h"
#include "kernels/multi_similarity.h"

namespace mn::nn {

const char* tuple_kind_name(TupleKind k) {
  switch (k) {
    case TupleKind::Triplets: return "triplets";
    case TupleKind::Pairs: return "pairs";
    case TupleKind::None: return "none (the whole batch)";
  }
  return "?";
}

int64_t Mined::count() const {
  if (kind == TupleKind::Triplets) return triplets.defined() ? triplets.size(0) : 0;
  if (kind == TupleKind::Pairs) return pairs.defined() ? pairs.size(0) : 0;
  return 0;
}

namespace {
// MinerConfig::fixed_size: the most tuples any labelling of B embeddings gives.
int64_t batch_capacity(const kernels::MinerParams& p, int64_t B) {
  const int64_t pairs = p.unordered_positives ? B * (B - 1) / 2 : B * (B - 1);
  switch (p.kind) {
    case kernels::MinerKind::AllTriplets: return pairs * std::max<int64_t>(B - 2, 0);
    case kernels::MinerKind::BatchHard: return B;
    case kernels::MinerKind::KTriplets: {  // k positives x k negatives per anchor
      const int64_t k = std::min<int64_t>(std::max(p.k, 1), std::max<int64_t>(B - 1, 0));
      return B * k * k;
    }
    default: return pairs;  // at most one negative per (a, p)
  }
}
}  // namespace

Mined TripletMiner::mine(const Tensor& dist, const Tensor& labels, Generator* gen) {
  kernels::MinerParams p = p_;
  if (fixed_) p.capacity = std::max<int64_t>(batch_capacity(p, dist.size(0)), 1);
  kernels::MinedTriplets m = kernels::mine_triplets(dist, labels, p, gen);
  Mined out;
  out.kind = TupleKind::Triplets;
  if (fixed_) {
    out.valid = m.count;
    out.pairs_valid = m.pair_count;
  }
  out.triplets = m.triplets;
  out.pairs = m.pairs;
  out.workspace_bytes = m.workspace_bytes;
  return out;
}

Mined PairMiner::mine(const Tensor& dist, const Tensor& labels, Generator* gen) {
  const int64_t B = dist.dim() == 2 ? dist.size(0) : 0;
  kernels::MinedPairs m = kernels::mine_pairs(dist, labels, neg_, gen, fixed_ ? std::max<int64_t>(B * (B - 1), 1) : 0);
  Mined out;
  out.kind = TupleKind::Pairs;
  if (fixed_) out.valid = m.count;
  out.pairs = m.pairs;
  out.is_pos = m.is_pos;
  out.workspace_bytes = m.workspace_bytes;
  return out;
}

Mined AllPairsMiner::mine(const Tensor& dist, const Tensor& labels, Generator*) {
  MN_CHECK(dist.dim() == 2 && dist.size(0) == dist.size(1), "all-pairs miner: dist must be (B, B), got ",
           shape_str(dist.shape()));
  const int64_t B = dist.size(0);
  MN_CHECK(labels.numel() == B, "all-pairs miner: labels must have ", B, " elements, got ",
           shape_str(labels.shape()));
  const int64_t P = B * (B - 1) / 2;
  if (!pairs_.defined() || pairs_.size(0) != P || pairs_.device() != labels.device()) {
    std::vector<int64_t> v;
    v.reserve(static_cast<size_t>(2 * P));
    for (int64_t i = 0; i < B; ++i)
      for (int64_t j = i + 1; j < B; ++j) {
        v.push_back(i);
        v.push_back(j);
      }
    pairs_ = Tensor::from_vector(v, {P, 2}).to(labels.device());
  }
  Mined out;
  out.kind = TupleKind::Pairs;
  out.pairs = pairs_;
  if (P == 0) {
    out.is_pos = Tensor::empty({0}, DType::I64, labels.device());
    return out;
  }
  // is_pos = 1 - min(|y_i - y_j|, 1), in float64 (exact for |labels| < 2^53).
  Tensor y = labels.reshape({B}).to(DType::F64);
  Tensor yi = kernels::index_select(y, 0, pairs_.select(1, 0).contiguous());
  Tensor yj = kernels::index_select(y, 0, pairs_.select(1, 1).contiguous());
  Tensor differ = kernels::clamp(kernels::abs(kernels::sub(yi, yj)), 0.0, 1.0);
  out.is_pos = kernels::binary_scalar(kernels::BinaryOp::Sub, differ, 1.0, true).to(DType::I64);
  return out;
}

Mined MultiSimilarityMiner::mine(const Tensor& dist, const Tensor& labels, Generator*) {
  // S = 1 - cosine distance.
  Tensor sim = kernels::binary_scalar(kernels::BinaryOp::Sub, dist, 1.0, true);
  kernels::MultiSimilarityPairs p = kernels::multi_similarity_mine(sim, labels, eps_, fixed_);
  Mined out;
  out.kind = TupleKind::Pairs;
  if (fixed_) out.valid = p.count;
  out.pairs = p.pairs;
  out.is_pos = p.is_pos;
  return out;
}

namespace {

MinerFactory triplets(kernels::MinerKind kind, bool only_violating = false,
                      kernels::SemiHardFallback fb = kernels::SemiHardFallback::Drop) {
  return [=](const MinerConfig& c) {
    kernels::MinerParams p;
    p.kind = kind;
    p.margin = c.margin;
    p.only_violating = only_violating;
    p.fallback = fb;
    p.k = c.k;
    p.dw_dim = c.dw_dim;
    p.dw_lambda = c.dw_lambda;
    p.dw_cutoff = c.dw_cutoff;
    p.dw_nonzero_cutoff = c.dw_nonzero_cutoff;
    return std::make_shared<TripletMiner>(p, c.fixed_size);
  };
}

MinerFactory k_miner(kernels::KMiner km) {
  return [=](const MinerConfig& c) {
    auto m = triplets(kernels::MinerKind::KTriplets)(c);
    kernels::MinerParams p = std::static_pointer_cast<TripletMiner>(m)->params();
    p.kminer = km;
    return std::make_shared<TripletMiner>(p, c.fixed_size);
  };
}

void register_builtin_miners(Registry<MinerFactory>& r) {
  using K = kernels::MinerKind;
  r.add("all-triplets", "every (a, p, n) of the batch", triplets(K::AllTriplets));
  r.add("violating-triplets", "every (a, p, n) with d(a,p) - d(a,n) + margin > 0",
        triplets(K::AllTriplets, true));
  r.add("batch-hard", "per anchor: farthest positive, nearest negative", triplets(K::BatchHard));
  r.add("semi-hard", "per (a, p): nearest n with d(a,p) < d(a,n) < d(a,p) + margin; none: dropped",
        triplets(K::SemiHard));
  r.add("semi-hard-or-hardest", "semi-hard; when none exists, the nearest negative",
        triplets(K::SemiHard, false, kernels::SemiHardFallback::Hardest));
  r.add("random-violating", "per (a, p): a random violating negative", triplets(K::RandomViolating));
  r.add("random-semi-hard", "per (a, p): a random semi-hard negative", triplets(K::RandomSemiHard));
  r.add("k-bh", "per anchor k farthest positives x k nearest negatives (+ pull pairs)", k_miner(kernels::KMiner::BH));
  r.add("k-bsh", "k nearest positives; per positive the k nearest negatives beyond it", k_miner(kernels::KMiner::BSH));
  r.add("k-epen", "k nearest positives x k farthest negatives", k_miner(kernels::KMiner::EPEN));
  r.add("k-ephn", "k nearest positives x k nearest negatives", k_miner(kernels::KMiner::EPHN));
  r.add("k-hpen", "k farthest positives x k farthest negatives", k_miner(kernels::KMiner::HPEN));
  r.add("k-hphn", "k farthest positives x k nearest negatives", k_miner(kernels::KMiner::HPHN));
  // k-ns is the LMNN paper's form (min(λ, 1/q), unnormalised, no cutoff);
  // distance-weighted is Wu et al.'s (kernels/miners.h). Both want plain L2 on
  // unit-normalised embeddings.
  r.add("k-ns", "LMNN paper Eqs. 10-11: k nearest positives; k negatives with weight min(lambda, 1/q(d))",
        k_miner(kernels::KMiner::NS));
  r.add("distance-weighted", "Wu et al. 2017 / pml DistanceWeightedMiner: per (a, p) one negative drawn with "
        "normalised weight 1/q(max(d, 0.5)), 0 at d >= 1.4 (plain L2 on unit-normalised embeddings)",
        triplets(K::DistanceWeighted));
  r.add("pairs-random", "all positive pairs + as many random negative pairs",
        [](const MinerConfig& c) { return std::make_shared<PairMiner>(kernels::PairNegatives::Random, c.fixed_size); });
  r.add("pairs-hard-negative", "all positive pairs + as many hardest (nearest) negative pairs",
        [](const MinerConfig& c) { return std::make_shared<PairMiner>(kernels::PairNegatives::Hardest, c.fixed_size); });
  r.add("all-pairs", "every unordered pair i < j",
        [](const MinerConfig&) { return std::make_shared<AllPairsMiner>(); });
  r.add("multi-similarity", "MS miner on cosine similarity: hard pairs within epsilon (pml MultiSimilarityMiner)",
        [](const MinerConfig& c) { return std::make_shared<MultiSimilarityMiner>(c.epsilon, c.fixed_size); });
  r.add("none", "no miner: the loss uses the whole batch (multi-similarity)",
        [](const MinerConfig&) { return std::make_shared<NoMiner>(); });
}

}  // namespace

Registry<MinerFactory>& miner_registry() {
  static Registry<MinerFactory> r = filled_registry<MinerFactory>("miner", register_builtin_miners);
  return r;
}

std::shared_ptr<Miner> make_miner(const std::string& name, const MinerConfig& cfg) {
  std::shared_ptr<Miner> m = miner_registry().get(name)(cfg);
  m->set_name(name);
  return m;
}

}  // namespace mn::nn
