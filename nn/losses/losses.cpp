// Autograd wiring of the fused losses: forward runs the fused kernel and the
// reducer; the node saves the per-term coefficients, the stats and the inputs'
// values, and its backward applies the fused gradient (overwrite into fresh
// tensors; the tape accumulates them into .grad).
#include "nn/losses/losses.h"

namespace mn::nn {
namespace {

Tensor scalar_of(const Tensor& stats) { return stats.narrow(0, 0, 1).reshape(Shape{}).clone(); }

}  // namespace

kernels::TripletLossParams TripletLossOptions::params() const {
  kernels::TripletLossParams p;
  p.kind = kind;
  p.margin = margin;
  p.global_l = global_l;
  p.global_t = global_t;
  p.global_g = global_g;
  p.unbiased_var = unbiased_var;
  bool sq = kind == TripletKind::Schroff || kind == TripletKind::Kumar ||
            kind == TripletKind::Global || kind == TripletKind::GlobalTriplet ||
            kind == TripletKind::Pull;
  if (squared >= 0) sq = squared == 1;
  p.dist = sq ? kernels::DistKind::Squared : kernels::DistKind::Plain;
  return p;
}

LossOutput triplet_loss(const ag::Variable& a, const ag::Variable& p, const ag::Variable& n,
                        const TripletLossOptions& opts) {
  kernels::TermResult r =
      kernels::triplet_loss_terms(opts.params(), a.data(), p.data(), n.data(), opts.reduction);
  LossOutput out;
  out.stats = r.stats;
  const bool need = ag::any_requires_grad({a, p, n});
  Tensor av = need ? a.data() : Tensor(), pv = need ? p.data() : Tensor(),
         nv = need ? n.data() : Tensor();
  r.loss = r.dp = r.dn = r.active = r.is_pos = Tensor();  // backward needs wp, wn, stats
  out.loss = ag::make_variable(
      scalar_of(out.stats), {a, p, n},
      [r, av, pv, nv](const Tensor& g) { return kernels::triplet_loss_grad(r, g, av, pv, nv); },
      "triplet_loss");
  return out;
}

LossOutput triplet_loss(const ag::Variable& emb, const Tensor& triplets,
                        const TripletLossOptions& opts) {
  return triplet_loss(emb, triplets, Tensor(), opts);
}

LossOutput triplet_loss(const ag::Variable& emb, const Tensor& triplets, const Tensor& count,
                        const TripletLossOptions& opts) {
  kernels::TermResult r =
      kernels::triplet_loss_terms_indexed(opts.params(), emb.data(), triplets, opts.reduction, count);
  LossOutput out;
  out.stats = r.stats;
  r.loss = r.dp = r.dn = r.active = r.is_pos = Tensor();
  Tensor ev = emb.data(), idx = triplets;
  out.loss = ag::make_variable(
      scalar_of(out.stats), {emb},
      [r, ev, idx](const Tensor& g) {
        return std::vector<Tensor>{kernels::triplet_loss_grad_indexed(r, g, ev, idx)};
      },
      "triplet_loss_indexed");
  return out;
}

LossOutput contrastive_loss(const ag::Variable& x1, const ag::Variable& x2, const Tensor& label,
                            const ContrastiveOptions& opts) {
  kernels::TermResult r = kernels::contrastive_terms(opts.form, opts.margin, x1.data(), x2.data(),
                                                     label, opts.reduction);
  LossOutput out;
  out.stats = r.stats;
  r.loss = r.dp = r.active = r.is_pos = Tensor();
  Tensor a = x1.data(), b = x2.data();
  out.loss = ag::make_variable(
      scalar_of(out.stats), {x1, x2},
      [r, a, b](const Tensor& g) {
        auto gs = kernels::triplet_loss_grad(r, g, a, b, Tensor());
        return std::vector<Tensor>{gs[0], gs[1]};
      },
      "contrastive_loss");
  return out;
}

LossOutput contrastive_loss(const ag::Variable& emb, const Tensor& pairs, const Tensor& label,
                            const ContrastiveOptions& opts) {
  return contrastive_loss(emb, pairs, label, Tensor(), opts);
}

LossOutput contrastive_loss(const ag::Variable& emb, const Tensor& pairs, const Tensor& label,
                            const Tensor& count, const ContrastiveOptions& opts) {
  kernels::TermResult r = kernels::contrastive_terms_indexed(opts.form, opts.margin, emb.data(),
                                                             pairs, label, opts.reduction, count);
  LossOutput out;
  out.stats = r.stats;
  r.loss = r.dp = r.active = r.is_pos = Tensor();
  Tensor ev = emb.data(), idx = pairs;
  out.loss = ag::make_variable(
      scalar_of(out.stats), {emb},
      [r, ev, idx](const Tensor& g) {
        return std::vector<Tensor>{kernels::triplet_loss_grad_indexed(r, g, ev, idx)};
      },
      "contrastive_loss_indexed");
  return out;
}

LossOutput koch_siamese_loss(const ag::Variable& h1, const ag::Variable& h2,
                             const ag::Variable& alpha, const ag::Variable& bias,
                             const Tensor& target, Reduction reduction) {
  kernels::KochResult r =
      kernels::koch_terms(h1.data(), h2.data(), alpha.data(), bias.data(), target, reduction);
  LossOutput out;
  out.stats = r.stats;
  r.loss = r.dist = r.is_pos = Tensor();
  Tensor a = h1.data(), b = h2.data(), al = alpha.data();
  Shape ash = alpha.shape(), bsh = bias.shape();
  out.loss = ag::make_variable(
      scalar_of(out.stats), {h1, h2, alpha, bias},
      [r, a, b, al, ash, bsh](const Tensor& g) {
        auto gs = kernels::koch_grad(r, g, a, b, al);
        return std::vector<Tensor>{gs[0], gs[1], gs[2].reshape(ash), gs[3].reshape(bsh)};
      },
      "koch_siamese_loss");
  return out;
}

LossOutput lmnn_loss(const ag::Variable& x, const ag::Variable& L, const Tensor& pairs,
                     const Tensor& triplets, double c) {
  return lmnn_loss(x, L, pairs, triplets, c, Tensor(), Tensor());
}

LossOutput lmnn_loss(const ag::Variable& x, const ag::Variable& L, const Tensor& pairs,
                     const Tensor& triplets, double c, const Tensor& pair_count, const Tensor& triplet_count) {
  kernels::LmnnResult r = kernels::lmnn_terms(x.data(), L.data(), pairs, triplets, c, pair_count, triplet_count);
  LossOutput out;
  out.stats = r.stats;
  Tensor xv = x.data(), lv = L.data();
  out.loss = ag::make_variable(
      scalar_of(out.stats), {x, L},
      [r, xv, lv, pairs, triplets, c](const Tensor& g) {
        return kernels::lmnn_grad(r, g, xv, lv, pairs, triplets, c);
      },
      "lmnn_loss");
  return out;
}

}  // namespace mn::nn
