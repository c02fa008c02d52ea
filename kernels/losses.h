// Fused metric-learning loss kernels (CPU + CUDA, float + double).
//
// Every loss here is a sum of TERMS; a term is a triplet (a, p, n) or a pair
// (a, p) of embedding rows. One fused pass per term reads the rows once,
// computes the distances, and writes
//   loss[t]           the per-term loss,
//   wp[t], wn[t]      the gradient w.r.t. the distances, already multiplied by
//                     d(dist)/d(squared-difference) so that
//                       dL_t/da = wp (a - p) - wn (a - n),
//                       dL_t/dp = -wp (a - p),   dL_t/dn = wn (a - n),
//   dp[t], dn[t]      the distances (for the stats and the tests),
//   active[t]         1 when the term is active (non-zero / violating).
// The reduction is a separate, named step (loss_reduce: Mean, MeanNonZero, Sum)
// that also writes the stats; the embedding gradient is applied in backward by
// loss_apply_grad (dense rows, or scattered through index lists with atomics on
// the GPU), scaled by the upstream gradient times the reduction's normaliser,
// both read from device memory (no host synchronisation).
//
// Distances: Squared: d = ||x - y||^2, dd/dx = 2 (x - y).
//            Plain:   d = ||x - y||,   dd/dx = (x - y) / max(d, kDistEps) with
//                     kDistEps = 1e-12: identical rows give d = 0 and gradient 0,
//                     and the gradient norm is <= 1 for any input.
//
// Terms (m = margin, dp / dn per the distance option):
//   Schroff   max(0, dp - dn + m)                         (Omniglot study eq. 3, squared)
//   Kumar     max(0, 1 - dn / (dp + m)), m > 0            (Kumar et al. 2016, squared)
//             The Omniglot study prints it (its eq. 4) as max(0, 1 - dp / (dn + m)):
//             numerator and denominator swapped. That form is positive exactly when a
//             triplet is ordered right (dp < dn + m) and zero when it is wrong, so its
//             gradient pushes positives away: the study's own Kumar row (74.38 %) could
//             not have come from it (our runs with it lost verification accuracy every
//             epoch, 2026-11-27, experiments/results/omniglot/2026-11-27-cpu-grid/). We
//             follow Kumar et al.'s orientation, the only one that learns.
//   MarginL2  max(0, dp - dn + m)                         (sampling study eq. 2, plain)
//   SoftMargin log(1 + exp(dp - dn + m))                  (soft-margin triplet; active: dp-dn+m > 0)
//   SoftmaxRatio  delta+ = e^dp / (e^dp + e^dn) = sigmoid(dp - dn), delta- = 1 - delta+,
//                 loss = delta+^2 + (delta- - 1)^2 = 2 delta+^2   (Hoffer & Ailon, eqs. 7-9)
//   Pull      dp                                          (LMNN pull term, no negative)
//   Global    Var(dp) + Var(dn) + l max(0, mean(dp) - mean(dn) + t)      (eq. 5)
//   GlobalTriplet  g * mean(Kumar) + Global                               (eq. 6)
//     Variance: BIASED (divide by N) by default, as in Kumar et al. 2016 (their
//     sigma^2 = sum (d - mu)^2 / N); unbiased_var = true divides by N - 1. The
//     global kinds need batch means: pass 1 computes dp, dn (and the means), pass 2
//     the per-term contributions and coefficients. Their per-term losses SUM to
//     the batch loss, so they are always reduced with Sum. Active: dp - dn + t > 0.
//   Every term is multiplied by `weight` (LMNN uses weight = c for the push terms).
// Pairs (kernels contrastive_*): label conventions follow each paper:
//   Hadsell   L = (1 - Y) D^2 + Y max(0, M - D)^2, Y = 0 GENUINE (similar) pair,
//             D plain L2 (pair-selection study eqs. 1-3).
//   Sampling  L = y D + (1 - y) max(0, m - D), y = 1 POSITIVE pair (sampling study eq. 1).
// Margin boundaries (what a term exactly AT its margin does), per kind:
//   Schroff, MarginL2  hinge max(0, x), x = dp - dn + m: at x = 0 the loss is 0 and
//            the term is inactive with zero gradient (STRICT: active iff x > 0), as
//            Schroff et al. 2015 eq. 1 (a violation is ||.||^2 + alpha > ||.||^2)
//            and pml TripletMarginLoss (relu(x): relu'(0) = 0 in PyTorch).
//   Kumar    max(0, 1 - dn / (dp + m)): STRICT (active iff dn < dp + m).
//   SoftMargin  smooth: every term has a loss > 0 and a gradient; "active" (the stat
//            only) is STRICT x > 0.
//   Global   the mean hinge max(0, mu+ - mu- + t): STRICT (Kumar et al. 2016 eq. 5).
//   Hadsell contrastive  max(0, M - D)^2 for impostors: at D = M loss and gradient 0
//            (STRICT: a pull-apart force only for D < M), Hadsell et al. 2006 eq. 4.
//   Sampling contrastive max(0, m - D): STRICT (sampling study eq. 1).
//   Semi-hard mining (kernels/miners.h) uses the open interval dp < dn < dp + m.
// Contrastive normalisation: NO factor 1/2 (Hadsell et al. eq. 4 has
//   L = (1-Y) 1/2 D^2 + Y 1/2 max(0, M - D)^2; ours is twice theirs, so the same
//   learning rate takes steps twice as large: halve it to match the paper), and the
//   loss is reduced over ALL pairs together (positive and negative): Mean divides by
//   the number of pairs, MeanNonZero by the number of pairs with a loss > 0 (genuine
//   pairs count whenever D > 0). pml's ContrastiveLoss instead reduces its positive
//   and negative terms separately (AvgNonZeroReducer on each, then adds them).
// Reductions: Mean = sum / N; Sum; MeanNonZero = sum / max(#{terms with loss > 0}, 1),
//   pml's AvgNonZeroReducer (which averages the losses > 0; an all-zero batch gives
//   0). The divisor counts LOSSES > 0, not "active" terms: for the soft-margin loss
//   every term is > 0, so MeanNonZero is its plain mean (dividing its sum by the
//   number of violating triplets, as before, inflated the loss and gradient).
// Koch: z = b + sum_j alpha_j |h1_j - h2_j|, L = softplus(z) - t z computed as
//   max(z, 0) - t z + log1p(exp(-|z|)) (stable), dL/dz = sigmoid(z) - t; t = 1 same class.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/strided.h"  // MN_HD
#include "runtime/tensor.h"

namespace mn::kernels {

enum class Reduction : int { Mean = 0, MeanNonZero, Sum };
enum class TripletKind : int {
  Schroff = 0, Kumar, MarginL2, SoftMargin, SoftmaxRatio, Pull, Global, GlobalTriplet
};
enum class DistKind : int { Squared = 0, Plain };
enum class ContrastiveForm : int { Hadsell = 0, Sampling };
constexpr double kDistEps = 1e-12;
const char* triplet_kind_name(TripletKind k);

struct TripletLossParams {
  TripletKind kind = TripletKind::Schroff;
  DistKind dist = DistKind::Squared;
  double margin = 0.2;
  double weight = 1.0;      // multiplies every term
  double global_l = 0.8;    // Global: weight of the mean hinge (Kumar et al.: 0.8)
  double global_t = 0.4;    // Global: margin between the means (0.4)
  double global_g = 1.0;    // GlobalTriplet: weight of the Kumar term (1.0)
  bool unbiased_var = false;
};

MN_HD bool triplet_kind_is_global(TripletKind k) {
  return k == TripletKind::Global || k == TripletKind::GlobalTriplet;
}

// Stats written by loss_reduce, a (5) tensor of the loss dtype on the loss device:
//   [0] reduced loss, [1] active terms, [2] mean positive distance,
//   [3] mean negative distance, [4] normaliser (1/N, 1/max(#(loss > 0), 1) or 1)
constexpr int kStatsLen = 5;

namespace loss_math {
template <typename T>
MN_HD T sigmoid(T x) {
  using std::exp;
  return x >= T(0) ? T(1) / (T(1) + exp(-x)) : exp(x) / (T(1) + exp(x));
}
template <typename T>
MN_HD T softplus(T x) {  // log(1 + e^x), stable
  using std::exp; using std::log1p;
  return x > T(0) ? x + log1p(exp(-x)) : log1p(exp(x));
}
// Distance from a squared norm s and d(dist)/d(s) * 2, i.e. the factor k with
// d(dist)/dx = k (x - y).
template <typename T>
MN_HD void dist_from_sq(DistKind dk, T s, T* d, T* k) {
  using std::sqrt;
  if (dk == DistKind::Squared) { *d = s; *k = T(2); return; }
  T r = sqrt(s > T(0) ? s : T(0));
  *d = r;
  *k = T(1) / (r > T(kDistEps) ? r : T(kDistEps));
}

// One per-term loss (not the global kinds): loss, dL/ddp, dL/ddn, active.
template <typename T>
MN_HD T triplet_term(TripletKind kind, T dp, T dn, T m, T* gdp, T* gdn, bool* active) {
  *gdp = T(0); *gdn = T(0); *active = false;
  switch (kind) {
    case TripletKind::Schroff:
    case TripletKind::MarginL2: {
      T x = dp - dn + m;
      if (x > T(0)) { *gdp = T(1); *gdn = T(-1); *active = true; return x; }
      return T(0);
    }
    case TripletKind::SoftMargin: {
      T x = dp - dn + m;
      T s = sigmoid(x);
      *gdp = s; *gdn = -s; *active = x > T(0);
      return softplus(x);
    }
    case TripletKind::Kumar:
    case TripletKind::GlobalTriplet: {  // the Kumar part: 1 - dn / (dp + m)
      T den = dp + m;
      T v = T(1) - dn / den;
      if (v > T(0)) { *gdp = dn / (den * den); *gdn = T(-1) / den; *active = true; return v; }
      return T(0);
    }
    case TripletKind::SoftmaxRatio: {
      T s = sigmoid(dp - dn);  // delta+
      T g = T(4) * s * s * (T(1) - s);
      *gdp = g; *gdn = -g;
      T l = T(2) * s * s;
      *active = l > T(0);
      return l;
    }
    case TripletKind::Pull:
      *gdp = T(1); *active = dp > T(0);
      return dp;
    default: return T(0);
  }
}

// Global kinds, pass 2: the contribution of term t given the batch means.
// Returns the loss part; writes dL/ddp, dL/ddn and whether dp - dn + t > 0.
template <typename T>
MN_HD T global_term(const TripletLossParams& P, T dp, T dn, T mup, T mun, int64_t N, T* gdp,
                    T* gdn, bool* active) {
  const T invN = T(1) / T(N);
  const T invV = T(1) / T((P.unbiased_var && N > 1) ? N - 1 : N);
  const T h = mup - mun + T(P.global_t);
  const T l = T(P.global_l);
  const T ep = dp - mup, en = dn - mun;
  T loss = (ep * ep + en * en) * invV + (h > T(0) ? l * h * invN : T(0));
  *gdp = T(2) * ep * invV + (h > T(0) ? l * invN : T(0));
  *gdn = T(2) * en * invV - (h > T(0) ? l * invN : T(0));
  if (P.kind == TripletKind::GlobalTriplet) {
    T kp, kn;
    bool ka;
    T k = triplet_term(TripletKind::Kumar, dp, dn, T(P.margin), &kp, &kn, &ka);
    const T g = T(P.global_g) * invN;
    loss += g * k;
    *gdp += g * kp;
    *gdn += g * kn;
  }
  *active = dp - dn + T(P.global_t) > T(0);
  return loss;
}
}  // namespace loss_math

// Row access of the terms: row a of term t is Ea[(ia ? ia[t] : t) * D], etc.
// En == nullptr means pair terms (Pull, contrastive).
template <typename T>
struct TermRows {
  const T* Ea = nullptr;  // (Ba, D)
  const T* Ep = nullptr;  // (Bp, D)
  const T* En = nullptr;  // (Bn, D) or null
  const int64_t* ia = nullptr;  // (N) or null = identity
  const int64_t* ip = nullptr;
  const int64_t* in = nullptr;
  // With index lists: every index must lie in [0, rows). The CPU entry points check
  // CPU lists before any kernel runs; the CUDA kernels check device lists themselves
  // (a bad term is skipped and reported at the next synchronisation point, see
  // DeviceReport in runtime/cuda_check.h). 0 with dense rows.
  int64_t rows = 0;
  // Padding: with a count (one int64 in the rows' memory: host for the CPU
  // kernels, device for the CUDA ones), only terms t < *count are terms; the
  // rest of the N (a miner's fixed-capacity buffer, MinerParams::capacity) get
  // loss 0, no gradient and no place in the stats. The count stays on the
  // device, so the loss over mined tuples needs no host read. Per-term kinds only.
  const int64_t* count = nullptr;
};

// Per-term outputs, all (N). dn and wn are unused for pair terms.
template <typename T>
struct TermOut {
  T* loss = nullptr;
  T* wp = nullptr;
  T* wn = nullptr;
  T* dp = nullptr;
  T* dn = nullptr;
  uint8_t* active = nullptr;
  uint8_t* is_pos = nullptr;  // pair losses: 1 for a same-class pair (stats split)
};

// ---- triplet (and pull) losses ----------------------------------------------
template <typename T>
void triplet_loss_forward_cpu(const TripletLossParams& p, int64_t N, int64_t D,
                              const TermRows<T>& rows, const TermOut<T>& out);
// ---- contrastive: x1 = Ea rows, x2 = Ep rows, label (N) in the form's convention
template <typename T>
void contrastive_forward_cpu(ContrastiveForm form, double margin, int64_t N, int64_t D,
                             const TermRows<T>& rows, const int64_t* label,
                             const TermOut<T>& out);
// ---- reduction: loss (N), d1/d2 (N) distances; d2 null = pair stats split by is_pos.
template <typename T>
void loss_reduce_cpu(Reduction r, int64_t N, const T* loss, const T* d1, const T* d2,
                     const uint8_t* is_pos, const uint8_t* active, T* stats /*(5)*/,
                     const int64_t* count = nullptr /* TermRows::count */);
// ---- gradient: g = grad_out[0] * stats[4] * extra; dense (rows null) overwrites
// ga/gp/gn (N, D); with index lists it ACCUMULATES into (B, D) buffers (which may
// alias). wn / gn null for pair terms.
template <typename T>
void loss_apply_grad_cpu(int64_t N, int64_t D, const TermRows<T>& rows, const T* wp,
                         const T* wn, const T* grad_out, const T* stats, T extra, T* ga,
                         T* gp, T* gn);
// ---- Koch: h1, h2 (N, D), alpha (D), bias (1), target (N) -> loss, dz (N),
// dist (N) = z - b, is_pos (N) = target > 0.5.
template <typename T>
void koch_forward_cpu(int64_t N, int64_t D, const T* h1, const T* h2, const T* alpha,
                      const T* bias, const T* target, T* loss, T* dz, T* dist, uint8_t* is_pos);
// g = grad_out[0] * stats[4]; g1, g2 (N, D) overwritten; galpha (D), gbias (1) overwritten.
template <typename T>
void koch_backward_cpu(int64_t N, int64_t D, const T* h1, const T* h2, const T* alpha,
                       const T* dz, const T* grad_out, const T* stats, T* g1, T* g2, T* galpha,
                       T* gbias);
// LMNN stats: out[0] = pull[0] + push[0], [1] = push active, [2] = pull mean d,
// [3] = push mean dn, [4] = 1.
template <typename T>
void lmnn_stats_combine_cpu(const T* pull, const T* push, T* out);

#ifdef MN_WITH_CUDA
template <typename T>
void triplet_loss_forward_cuda(const TripletLossParams& p, int64_t N, int64_t D,
                               const TermRows<T>& rows, const TermOut<T>& out);
template <typename T>
void contrastive_forward_cuda(ContrastiveForm form, double margin, int64_t N, int64_t D,
                              const TermRows<T>& rows, const int64_t* label,
                              const TermOut<T>& out);
template <typename T>
void loss_reduce_cuda(Reduction r, int64_t N, const T* loss, const T* d1, const T* d2,
                      const uint8_t* is_pos, const uint8_t* active, T* stats,
                      const int64_t* count = nullptr);
template <typename T>
void loss_apply_grad_cuda(int64_t N, int64_t D, const TermRows<T>& rows, const T* wp,
                          const T* wn, const T* grad_out, const T* stats, T extra, T* ga,
                          T* gp, T* gn);
template <typename T>
void koch_forward_cuda(int64_t N, int64_t D, const T* h1, const T* h2, const T* alpha,
                       const T* bias, const T* target, T* loss, T* dz, T* dist, uint8_t* is_pos);
template <typename T>
void koch_backward_cuda(int64_t N, int64_t D, const T* h1, const T* h2, const T* alpha,
                        const T* dz, const T* grad_out, const T* stats, T* g1, T* g2, T* galpha,
                        T* gbias);
template <typename T>
void lmnn_stats_combine_cuda(const T* pull, const T* push, T* out);
#endif

// ---- Tensor level -------------------------------------------------------------
// Per-term results of a fused forward (all (N) on the input device).
struct TermResult {
  Tensor loss, wp, wn, dp, dn;  // loss dtype
  Tensor active, is_pos;        // uint8
  Tensor stats;                 // (5), after reduce
};
// Triplets from three (N, D) tensors (ia/ip/in undefined), or rows of one (B, D)
// tensor `e` through an index list `idx` (T, 3) (int32/int64). For Pull, n is
// undefined and idx is (P, 2).
TermResult triplet_loss_terms(const TripletLossParams& p, const Tensor& a, const Tensor& pos,
                              const Tensor& neg, Reduction r);
// count: undefined, or one int64 on e's device: only the first *count rows of
// idx are terms (TermRows::count; per-term kinds only).
TermResult triplet_loss_terms_indexed(const TripletLossParams& p, const Tensor& e,
                                      const Tensor& idx, Reduction r, const Tensor& count = Tensor());
// Contrastive pairs: x1, x2 (N, D) with label (N); or rows of e through pairs (P, 2).
TermResult contrastive_terms(ContrastiveForm form, double margin, const Tensor& x1,
                             const Tensor& x2, const Tensor& label, Reduction r);
// count: as for triplet_loss_terms_indexed (a pair miner's fixed capacity).
TermResult contrastive_terms_indexed(ContrastiveForm form, double margin, const Tensor& e,
                                     const Tensor& pairs, const Tensor& label, Reduction r,
                                     const Tensor& count = Tensor());
// Gradients of the reduced loss given the upstream grad (a one-element tensor).
// Dense: returns {ga, gp, gn} (gn undefined for pairs). Indexed: one (B, D) tensor.
std::vector<Tensor> triplet_loss_grad(const TermResult& res, const Tensor& grad_out,
                                      const Tensor& a, const Tensor& pos, const Tensor& neg,
                                      double extra = 1.0);
Tensor triplet_loss_grad_indexed(const TermResult& res, const Tensor& grad_out, const Tensor& e,
                                 const Tensor& idx, double extra = 1.0);

struct KochResult {
  Tensor loss, dz, dist, is_pos, stats;
};
KochResult koch_terms(const Tensor& h1, const Tensor& h2, const Tensor& alpha, const Tensor& bias,
                      const Tensor& target, Reduction r);
// {g1, g2, galpha, gbias}
std::vector<Tensor> koch_grad(const KochResult& res, const Tensor& grad_out, const Tensor& h1,
                              const Tensor& h2, const Tensor& alpha);

// LMNN (eq. 2): Z = X L (X (B, Din), L (Din, K)); pull over pairs (P, 2), push
// c * [1 + d_ij - d_il]_+ over triplets (T, 3), squared distances in Z space.
struct LmnnResult {
  Tensor z;
  TermResult pull, push;
  Tensor stats;  // combined (5), stats[0] is the objective
};
// pair_count / triplet_count: a k-miner's fixed-size lists (TermRows::count).
LmnnResult lmnn_terms(const Tensor& x, const Tensor& l, const Tensor& pairs,
                      const Tensor& triplets, double c, const Tensor& pair_count = Tensor(),
                      const Tensor& triplet_count = Tensor());
// {gX, gL}
std::vector<Tensor> lmnn_grad(const LmnnResult& res, const Tensor& grad_out, const Tensor& x,
                              const Tensor& l, const Tensor& pairs, const Tensor& triplets,
                              double c);

// Host copy of the stats (one small device->host transfer).
struct LossStatsHost {
  double loss = 0, active = 0, mean_pos = 0, mean_neg = 0;
};
LossStatsHost read_stats(const Tensor& stats);

}  // namespace mn::kernels
