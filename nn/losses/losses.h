// Differentiable metric-learning losses over the fused kernels (kernels/losses.h).
//
// Each function returns a LossOutput: the scalar loss Variable (recorded on the
// tape; its backward applies the fused per-term gradient scaled by the upstream
// gradient and the reduction's normaliser), and the (5) stats tensor on the
// loss device: [reduced loss, active terms, mean positive distance, mean
// negative distance, normaliser] -- read with host_stats() (one small transfer)
// so a collapsed model is visible in the logs.
//
// The parts stay separate as in pytorch-metric-learning: a distance (inside the
// kernels, or kernels::pairwise_distance_matrix for the miners), a miner
// (nn/miners), the loss (here) and the reducer (Reduction: Mean, MeanNonZero, Sum).
// Label conventions: see ContrastiveOptions.
#pragma once
#include "autograd/variable.h"
#include "kernels/losses.h"

namespace mn::nn {

using kernels::ContrastiveForm;
using kernels::Reduction;
using kernels::TripletKind;

struct LossOutput {
  ag::Variable loss;  // scalar
  Tensor stats;       // (5), see above
  kernels::LossStatsHost host_stats() const { return kernels::read_stats(stats); }
};

struct TripletLossOptions {
  TripletKind kind = TripletKind::Schroff;
  double margin = 0.2;
  // -1: the paper's distance (squared for Schroff, Kumar, Global*; plain L2 for
  // MarginL2, SoftMargin, SoftmaxRatio); 0: plain L2; 1: squared L2.
  int squared = -1;
  Reduction reduction = Reduction::Mean;  // the Global kinds always sum their parts
  double global_l = 0.8, global_t = 0.4, global_g = 1.0;
  bool unbiased_var = false;  // Kumar et al.: biased (1/N)
  kernels::TripletLossParams params() const;
};

// Triplets from three (N, D) embeddings.
LossOutput triplet_loss(const ag::Variable& a, const ag::Variable& p, const ag::Variable& n,
                        const TripletLossOptions& opts = {});
// Triplets as rows of one (B, D) embedding through mined indices (T, 3).
LossOutput triplet_loss(const ag::Variable& emb, const Tensor& triplets,
                        const TripletLossOptions& opts = {});
// A miner's fixed-capacity output (kernels::MinedTriplets with
// MinerParams::capacity): only the first `count` rows of `triplets` are
// triplets; count is one int64 on the embedding's device and is never read by
// the host (Mean divides by it on the device). Per-term kinds only.
LossOutput triplet_loss(const ag::Variable& emb, const Tensor& triplets, const Tensor& count,
                        const TripletLossOptions& opts = {});

struct ContrastiveOptions {
  // Hadsell: label Y = 0 for a GENUINE (same-class) pair, 1 impostor:
  //   L = (1 - Y) D^2 + Y max(0, M - D)^2.
  // Sampling: label y = 1 for a POSITIVE (same-class) pair, 0 negative:
  //   L = y D + (1 - y) max(0, m - D).
  // D is the plain L2 distance. The pair miner's is_pos is the Sampling
  // convention; pass 1 - is_pos for Hadsell.
  ContrastiveForm form = ContrastiveForm::Hadsell;
  double margin = 1.0;
  Reduction reduction = Reduction::Mean;
};
LossOutput contrastive_loss(const ag::Variable& x1, const ag::Variable& x2, const Tensor& label,
                            const ContrastiveOptions& opts = {});
LossOutput contrastive_loss(const ag::Variable& emb, const Tensor& pairs, const Tensor& label,
                            const ContrastiveOptions& opts = {});
// A pair miner's fixed-capacity output (MinedPairs with a capacity): only the
// first `count` rows of pairs / label are pairs; count stays on the device.
LossOutput contrastive_loss(const ag::Variable& emb, const Tensor& pairs, const Tensor& label,
                            const Tensor& count, const ContrastiveOptions& opts = {});

// Koch et al.: logit z = b + sum_j alpha_j |h1_j - h2_j|, BCE from the logit;
// target (N) 1 = same class. alpha (D) or (1, D), bias one element.
LossOutput koch_siamese_loss(const ag::Variable& h1, const ag::Variable& h2,
                             const ag::Variable& alpha, const ag::Variable& bias,
                             const Tensor& target, Reduction reduction = Reduction::Mean);

// LMNN (eq. 2): sum over pull pairs (P, 2) of ||L^T (x_i - x_j)||^2 + c * sum over
// triplets (T, 3) of [1 + ||L^T(x_i - x_j)||^2 - ||L^T(x_i - x_l)||^2]_+.
// x (B, Din), L (Din, K).
LossOutput lmnn_loss(const ag::Variable& x, const ag::Variable& L, const Tensor& pairs,
                     const Tensor& triplets, double c = 1.0);
// The same over a k-miner's fixed-size lists: only the first pair_count pairs
// and triplet_count triplets count (each one int64 on the device).
LossOutput lmnn_loss(const ag::Variable& x, const ag::Variable& L, const Tensor& pairs,
                     const Tensor& triplets, double c, const Tensor& pair_count, const Tensor& triplet_count);

}  // namespace mn::nn
