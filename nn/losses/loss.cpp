// The built-in losses of loss_registry() (nn/losses/loss.h): thin adapters from
// (embeddings, labels, mined tuples) to the fused losses of nn/losses/losses.h
// and kernels/multi_similarity.h.
#include "nn/losses/loss.h"

#include <cmath>

#include "autograd/ops.h"
#include "autograd/ops_matmul.h"
#include "kernels/batch_all.h"
#include "kernels/elementwise.h"
#include "kernels/gemm_config.h"
#include "kernels/multi_similarity.h"

namespace mn::nn {
namespace {

double margin_or(const LossConfig& c, double def) { return std::isnan(c.margin) ? def : c.margin; }

void check_mined(const Loss& l, const Mined& m) {
  MN_CHECK(m.kind == l.tuples(), "loss '", l.name(), "' needs ", tuple_kind_name(l.tuples()),
           " from its miner, got ", tuple_kind_name(m.kind));
}

Tensor column(const Tensor& idx, int64_t k) { return idx.select(1, k).contiguous(); }

class TripletKindLoss : public Loss {
 public:
  explicit TripletKindLoss(const TripletLossOptions& o) : o_(o) {}
  TupleKind tuples() const override { return TupleKind::Triplets; }
  kernels::Pairwise distance() const override {
    return o_.params().dist == kernels::DistKind::Squared ? kernels::Pairwise::SqEuclidean
                                                          : kernels::Pairwise::Euclidean;
  }
  LossOutput compute(const ag::Variable& emb, const Tensor&, const Mined& m) override {
    check_mined(*this, m);
    return triplet_loss(emb, m.triplets, m.valid, o_);
  }

 private:
  TripletLossOptions o_;
};

LossFactory triplet_kind(TripletKind k) {
  return [k](const LossConfig& c) {
    TripletLossOptions o;
    o.kind = k;
    o.margin = margin_or(c, 0.2);
    o.squared = c.squared;
    o.reduction = c.reduction;
    o.global_l = c.global_l;
    o.global_t = c.global_t;
    o.global_g = c.global_g;
    o.unbiased_var = c.unbiased_var;
    return std::make_shared<TripletKindLoss>(o);
  };
}

class ContrastivePairLoss : public Loss {
 public:
  explicit ContrastivePairLoss(const ContrastiveOptions& o) : o_(o) {}
  TupleKind tuples() const override { return TupleKind::Pairs; }
  kernels::Pairwise distance() const override { return kernels::Pairwise::Euclidean; }
  LossOutput compute(const ag::Variable& emb, const Tensor&, const Mined& m) override {
    check_mined(*this, m);
    // The miner's is_pos is the Sampling convention (1 = same class); Hadsell's Y is 1 - is_pos.
    Tensor label = o_.form == ContrastiveForm::Sampling
                       ? m.is_pos
                       : kernels::binary_scalar(kernels::BinaryOp::Sub, m.is_pos.to(DType::F64), 1.0, true)
                             .to(DType::I64);
    return contrastive_loss(emb, m.pairs, label, m.valid, o_);
  }

 private:
  ContrastiveOptions o_;
};

LossFactory contrastive(ContrastiveForm f) {
  return [f](const LossConfig& c) {
    ContrastiveOptions o;
    o.form = f;
    o.margin = margin_or(c, 1.0);
    o.reduction = c.reduction;
    return std::make_shared<ContrastivePairLoss>(o);
  };
}

class KochSiameseLoss : public Loss {
 public:
  KochSiameseLoss(const LossConfig& c) : w_(c.head_weight), b_(c.head_bias), red_(c.reduction) {
    MN_CHECK(w_.defined() && b_.defined(),
             "loss 'koch-siamese': LossConfig::head_weight and head_bias (the siamese head, e.g. "
             "SiameseNet::head_weight()) must be set");
  }
  TupleKind tuples() const override { return TupleKind::Pairs; }
  kernels::Pairwise distance() const override { return kernels::Pairwise::Euclidean; }
  LossOutput compute(const ag::Variable& emb, const Tensor&, const Mined& m) override {
    check_mined(*this, m);
    MN_CHECK(!m.valid.defined(), "loss 'koch-siamese' takes exact pair lists: its miner must not be fixed_size");
    ag::Variable h1 = ag::index_select(emb, 0, column(m.pairs, 0));
    ag::Variable h2 = ag::index_select(emb, 0, column(m.pairs, 1));
    return koch_siamese_loss(h1, h2, w_, b_, m.is_pos.to(emb.dtype()), red_);
  }

 private:
  ag::Variable w_, b_;
  Reduction red_;
};

class LmnnMetricLoss : public Loss {
 public:
  explicit LmnnMetricLoss(const LossConfig& c) : L_(c.lmnn_metric), c_(c.lmnn_c) {
    MN_CHECK(L_.defined(), "loss 'lmnn': LossConfig::lmnn_metric (the linear map L, (Din, K)) must be set");
  }
  TupleKind tuples() const override { return TupleKind::Triplets; }
  // LMNN's neighbours and impostors are found in the space of Z = X L.
  Tensor mining_embedding(const ag::Variable& x) const override {
    ag::NoGradGuard ng;
    const kernels::Fp32Scope fp32;  // mining: never TF32 (kernels/gemm_config.h)
    return ag::matmul(x.detach(), L_.detach()).data();
  }
  LossOutput compute(const ag::Variable& x, const Tensor&, const Mined& m) override {
    check_mined(*this, m);
    MN_CHECK(m.pairs.defined(), "loss 'lmnn' needs the pull pairs of a k-miner (k-bh, k-bsh, ...)");
    return lmnn_loss(x, L_, m.pairs, m.triplets, c_, m.pairs_valid, m.valid);
  }

 private:
  ag::Variable L_;
  double c_;
};

// Multi-Similarity: S = 1 - cosine distance (the cosine similarity with PyTorch's
// norm clamp, i.e. pml's CosineSimilarity of L2-normalised embeddings), then the
// fused loss + miner on S; the tape carries dL/dS back through the cosine.
class MultiSimilarityLoss : public Loss {
 public:
  explicit MultiSimilarityLoss(const LossConfig& c) : red_(c.reduction) {
    p_.alpha = c.ms_alpha;
    p_.beta = c.ms_beta;
    p_.base = c.ms_base;
    p_.mine = c.ms_epsilon >= 0;
    p_.epsilon = p_.mine ? c.ms_epsilon : 0.0;
  }
  TupleKind tuples() const override { return TupleKind::None; }
  kernels::Pairwise distance() const override { return kernels::Pairwise::Cosine; }
  LossOutput compute(const ag::Variable& emb, const Tensor& labels, const Mined& m) override {
    check_mined(*this, m);
    ag::Variable S = ag::sub(1.0, ag::pairwise_distance(emb, emb, kernels::Pairwise::Cosine));
    kernels::MultiSimilarityResult r = kernels::multi_similarity_terms(p_, S.data(), labels, red_);
    LossOutput out;
    out.stats = r.stats;
    r.rows = Tensor();  // the backward needs grad and stats only
    out.loss = ag::make_variable(
        r.stats.narrow(0, 0, 1).reshape(Shape{}).clone(), {S},
        [r](const Tensor& g) { return std::vector<Tensor>{kernels::multi_similarity_grad(r, g)}; },
        "multi_similarity_loss");
    return out;
  }

 private:
  kernels::MultiSimilarityParams p_;
  Reduction red_;
};

// Every triplet of the batch, no miner and no triplet list (kernels/batch_all.h):
// pytorch-metric-learning's TripletMarginLoss over all triplets, and the
// sampling study's All Positive Online Triplet (unordered_positives). Plain L2
// (squared = 1: squared L2); margin 0.2 unless configured; reduction Mean over
// all triplets, MeanNonZero for pml's AvgNonZeroReducer.
class BatchAllLoss : public Loss {
 public:
  explicit BatchAllLoss(const LossConfig& c) : squared_(c.squared == 1) {
    p_.margin = std::isnan(c.margin) ? 0.2 : c.margin;
    p_.reduction = c.reduction;
    p_.unordered_positives = c.unordered_positives;
  }
  TupleKind tuples() const override { return TupleKind::None; }
  kernels::Pairwise distance() const override {
    return squared_ ? kernels::Pairwise::SqEuclidean : kernels::Pairwise::Euclidean;
  }
  LossOutput compute(const ag::Variable& emb, const Tensor& labels, const Mined& m) override {
    check_mined(*this, m);
    ag::Variable D = ag::pairwise_distance(emb, emb, distance());
    kernels::BatchAllResult r = kernels::batch_all_terms(p_, D.data(), labels);
    LossOutput out;
    out.stats = r.stats;
    r.rows = Tensor();  // the backward needs grad and stats only
    out.loss = ag::make_variable(
        r.stats.narrow(0, 0, 1).reshape(Shape{}).clone(), {D},
        [r](const Tensor& g) { return std::vector<Tensor>{kernels::batch_all_grad(r, g)}; }, "batch_all_triplet_loss");
    return out;
  }

 private:
  kernels::BatchAllParams p_;
  bool squared_;
};

template <typename L>
LossFactory with_config() {
  return [](const LossConfig& c) { return std::make_shared<L>(c); };
}

void register_builtin_losses(Registry<LossFactory>& r) {
  r.add("schroff", "max(0, d(a,p) - d(a,n) + margin), squared L2 (FaceNet)", triplet_kind(TripletKind::Schroff));
  r.add("kumar", "max(0, 1 - d(a,n) / (d(a,p) + margin)), squared L2 (Kumar et al. 2016)", triplet_kind(TripletKind::Kumar));
  r.add("margin-l2", "max(0, d(a,p) - d(a,n) + margin), plain L2", triplet_kind(TripletKind::MarginL2));
  r.add("soft-margin", "log(1 + exp(d(a,p) - d(a,n) + margin)), plain L2", triplet_kind(TripletKind::SoftMargin));
  r.add("softmax", "Hoffer & Ailon's softmax ratio, plain L2", triplet_kind(TripletKind::SoftmaxRatio));
  r.add("global", "Kumar et al.'s global loss (variances + mean hinge)", triplet_kind(TripletKind::Global));
  r.add("global-triplet", "global loss + global_g * mean Kumar triplet term", triplet_kind(TripletKind::GlobalTriplet));
  r.add("contrastive-hadsell", "(1-Y) D^2 + Y max(0, M - D)^2 over pairs (Hadsell et al.)",
        contrastive(ContrastiveForm::Hadsell));
  r.add("contrastive-sampling", "y D + (1-y) max(0, m - D) over pairs (sampling study)",
        contrastive(ContrastiveForm::Sampling));
  r.add("koch-siamese", "Koch et al.'s weighted-L1 head + BCE over pairs (needs head_weight/head_bias)",
        with_config<KochSiameseLoss>());
  r.add("lmnn", "LMNN pull + c * push over k-miner tuples (needs lmnn_metric)", with_config<LmnnMetricLoss>());
  r.add("multi-similarity", "Multi-Similarity loss + miner on cosine similarity (alpha 2, beta 50, base 0.5, eps 0.1)",
        with_config<MultiSimilarityLoss>());
  r.add("batch-all", "every triplet of the batch, no miner: max(0, d(a,p) + margin - d(a,n)), plain L2 "
        "(pml's TripletMarginLoss over all triplets; O(B^2 log B), no triplet list)", with_config<BatchAllLoss>());
}

}  // namespace

Registry<LossFactory>& loss_registry() {
  static Registry<LossFactory> r = filled_registry<LossFactory>("loss", register_builtin_losses);
  return r;
}

std::shared_ptr<Loss> make_loss(const std::string& name, const LossConfig& cfg) {
  std::shared_ptr<Loss> l = loss_registry().get(name)(cfg);
  l->set_name(name);
  return l;
}

}  // namespace mn::nn
