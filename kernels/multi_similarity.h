// Multi-Similarity loss with its pair miner (Wang et al., CVPR 2019, "Multi-Similarity
// Loss with General Pair Weighting"), fused: CPU oracle (kernels/cpu/multi_similarity.cpp)
// and CUDA (kernels/cuda/multi_similarity.cu), float and double.
//
// Input: a (B, B) similarity matrix S (the caller computes the cosine similarity
// of L2-normalised embeddings, as pytorch-metric-learning's CosineSimilarity) and
// (B) integer labels. Per anchor row i, over j != i:
//   positives P_i = {j : y_j == y_i},   negatives N_i = {j : y_j != y_i}.
// Mining (the paper's eq. 5-6, pml's MultiSimilarityMiner(epsilon)), when enabled:
//   keep negative n  iff  S_in + eps > min_{p in P_i} S_ip
//   keep positive p  iff  S_ip - eps < max_{n in N_i} S_in
//   (an anchor without positives keeps no negative and vice versa).
// Loss of row i (eq. 4, pml's MultiSimilarityLoss(alpha, beta, base)):
//   L_i = 1/alpha log(1 + sum_{p kept} exp(-alpha (S_ip - base)))
//       + 1/beta  log(1 + sum_{n kept} exp( beta (S_in - base)))
// computed as a shifted log-sum-exp with the "+1" as an extra zero exponent, so
// large alpha / beta never overflow. Its gradient is written in the same pass:
//   dL_i/dS_ip = -exp(-alpha (S_ip - base)) / (1 + sum_p ...)   (kept p),
//   dL_i/dS_in =  exp( beta (S_in - base)) / (1 + sum_n ...)    (kept n), 0 elsewhere.
// The miner alone (pml's MultiSimilarityMiner, to feed other pair losses):
// multi_similarity_mine() emits the kept ORDERED pairs (i, j), i the anchor, in
// row-major order (i ascending, then j), with is_pos; count pass, exclusive
// scan, fill pass, as kernels/miners.h.
// Reduction (separate, named step): Mean over the B rows (pml's MeanReducer, the
// default), MeanNonZero (rows with at least one kept pair) or Sum.
// Stats (5), like kernels/losses.h: [0] reduced loss, [1] kept (active) pairs,
// [2] mean similarity of the kept positive pairs, [3] of the kept negative pairs
// (SIMILARITIES here, not distances), [4] the normaliser.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/losses.h"  // Reduction, kStatsLen
#include "runtime/strided.h"  // MN_HD
#include "runtime/tensor.h"

namespace mn::kernels {

struct MultiSimilarityParams {
  double alpha = 2.0;   // positive scale (pml default)
  double beta = 50.0;   // negative scale
  double base = 0.5;    // similarity offset lambda
  bool mine = true;     // apply the MS miner (pml: MultiSimilarityMiner)
  double epsilon = 0.1; // miner margin
};

// Per-row outputs, each (B): loss, kept positive / negative counts and the sums
// of their similarities (for the stats).
template <typename T>
struct MsRowOut {
  T* loss = nullptr;
  T* npos = nullptr;
  T* nneg = nullptr;
  T* spos = nullptr;
  T* sneg = nullptr;
};

namespace ms_math {
// Whether S_ij (label relation `same`) is kept, given the row's min positive and
// max negative similarity (+inf / -inf when the row has none).
template <typename T>
MN_HD bool kept(const MultiSimilarityParams& P, bool same, T s, T min_pos, T max_neg) {
  if (!P.mine) return true;
  return same ? s - T(P.epsilon) < max_neg : s + T(P.epsilon) > min_pos;
}
// Exponent of pair (i, j): -alpha (s - base) for a positive, beta (s - base) for a negative.
template <typename T>
MN_HD T expo(const MultiSimilarityParams& P, bool same, T s) {
  return same ? -T(P.alpha) * (s - T(P.base)) : T(P.beta) * (s - T(P.base));
}
}  // namespace ms_math

// S (B, B), labels (B) int64; grad (B, B) overwritten with dL_i/dS_ij (unreduced);
// row outputs (B) overwritten.
template <typename T>
void multi_similarity_forward_cpu(const MultiSimilarityParams& P, int64_t B, const T* S,
                                  const int64_t* labels, T* grad, const MsRowOut<T>& rows);
// stats (5) from the row outputs.
template <typename T>
void multi_similarity_reduce_cpu(Reduction r, int64_t B, const MsRowOut<T>& rows, T* stats);
// out (n) = grad (n) * grad_out[0] * stats[4].
template <typename T>
void multi_similarity_scale_cpu(int64_t n, const T* grad, const T* grad_out, const T* stats,
                                T* out);
// Miner: counts (B) kept pairs per row; fill writes row i's pairs at offsets[i]:
// pairs (P, 2), is_pos (P).
template <typename T>
void multi_similarity_count_cpu(double epsilon, int64_t B, const T* S, const int64_t* labels,
                                int64_t* counts);
template <typename T>
void multi_similarity_fill_cpu(double epsilon, int64_t B, const T* S, const int64_t* labels,
                               const int64_t* offsets, int64_t* pairs, int64_t* is_pos);
#ifdef MN_WITH_CUDA
template <typename T>
void multi_similarity_count_cuda(double epsilon, int64_t B, const T* S, const int64_t* labels,
                                 int64_t* counts);
template <typename T>
void multi_similarity_fill_cuda(double epsilon, int64_t B, const T* S, const int64_t* labels,
                                const int64_t* offsets, int64_t* pairs, int64_t* is_pos);
template <typename T>
void multi_similarity_forward_cuda(const MultiSimilarityParams& P, int64_t B, const T* S,
                                   const int64_t* labels, T* grad, const MsRowOut<T>& rows);
template <typename T>
void multi_similarity_reduce_cuda(Reduction r, int64_t B, const MsRowOut<T>& rows, T* stats);
template <typename T>
void multi_similarity_scale_cuda(int64_t n, const T* grad, const T* grad_out, const T* stats,
                                 T* out);
#endif

// ---- Tensor level -------------------------------------------------------------
struct MultiSimilarityResult {
  Tensor grad;   // (B, B) dL_i/dS_ij before the reduction's normaliser
  Tensor rows;   // (5, B): loss, npos, nneg, spos, sneg per row
  Tensor stats;  // (5)
};
// sim (B, B) float/double, labels (B) int32/int64 on the same device.
MultiSimilarityResult multi_similarity_terms(const MultiSimilarityParams& p, const Tensor& sim,
                                             const Tensor& labels, Reduction r);
// The miner alone: sim (B, B), labels (B); pairs (P, 2) int64 and is_pos (P) int64;
// count (1) int64 on the device: P. fixed_size: pairs (B (B - 1), 2) and is_pos
// zero-padded after the first P rows, nothing read back (runtime/graph.h).
struct MultiSimilarityPairs {
  Tensor pairs, is_pos, count;
};
MultiSimilarityPairs multi_similarity_mine(const Tensor& sim, const Tensor& labels, double epsilon,
                                           bool fixed_size = false);
// dL/dS (B, B) of the reduced loss for the upstream gradient grad_out (one element).
Tensor multi_similarity_grad(const MultiSimilarityResult& res, const Tensor& grad_out);

}  // namespace mn::kernels
