// Distances for siamese and triplet networks, losses, miners and evaluation:
// the one implementation of the four metrics (CPU and CUDA, forward and backward,
// float and double). Everything else calls it: nn/layers/distance.*, the
// autograd ops, kernels::pairwise_distance_matrix (miners, kernels/miners.h) and
// the fused losses (their per-row squared distance is row_sq_l2 of
// kernels/distance_math.h, the same function row_distance uses).
//   * abs_diff:   elementwise |a - b| (Koch et al.'s siamese merge), any shape.
//     Gradient sign(a - b) g, with sign(0) = 0 (a valid subgradient).
//   * row distances (N, D) x (N, D) -> (N): L1 = sum |a - b|, squared L2 =
//     sum (a - b)^2, and L2 = sqrt(squared L2).
//   * pairwise distance matrices (M, D) x (N, D) -> (M, N): L1, squared L2, L2
//     and cosine distance (1 - cosine similarity), as torch.cdist(p=1/2) and
//     pytorch-metric-learning's LpDistance / CosineSimilarity (as a distance).
//
// Defined at zero (conventions.md rule 4):
//   * L2 / Euclidean: the forward is the exact sqrt (0 for identical rows); the
//     gradient (a - b) / d g is used where d > kL2GradEps = 1e-12 and replaced by
//     the zero subgradient where d <= 1e-12. So identical embeddings give d = 0
//     and gradient 0, never NaN or Inf.
//   * L1: gradient sign(a - b) g with sign(0) = 0.
//   * cosine: the norms are clamped, ||a|| -> max(||a||, kCosEps = 1e-8), as in
//     PyTorch; below the clamp the norm is a constant for the gradient.
//
// Pairwise L1 is the direct difference form (one pass over D per pair, exact
// zeros for equal rows). Pairwise squared L2 / L2 use the expansion
// ||a||^2 + ||b||^2 - 2 a.b with the a.b matrix from our GEMM, clamped at 0 so
// rounding never yields negative squared distances. Its absolute error is about
// ulp(||a||^2), so both sets are first centred on their joint mean (distances are
// translation invariant; the norms, and with them the error, shrink to the
// spread of the points). What remains: two rows closer than about
// sqrt(ulp(spread^2)) (float32: ~3e-4 of the spread) may read as distance 0, and
// ordering among such near-ties is not reliable. The miners compare distances of
// one anchor row, where this matters only for near-duplicates; the fused losses
// do not use the expansion (they take the direct difference per term). Where
// the clamp is active (S == 0) the gradient is 0 (the true gradient of a squared
// distance at 0 is 0 as well).
// Self distances (b is a, e.g. a miner's (B, B) matrix): the squared norms are
// read off the Gram diagonal, so d(i, i) is exactly 0 for the L2 metrics and the
// matrix is exactly symmetric; the centring uses the mean of a.
// Backward of the Gram-based pairwise metrics has the form
//   gA = alpha o A - W B,   gB = beta o B - W^T A          (o: row scaling)
// with a metric-specific W (M, N) and row/column coefficients alpha (M), beta (N):
//   sq:      W = 2 g [S > 0],          alpha = rowsum W, beta = colsum W
//   euclid:  W = g / D [D > eps],       alpha = rowsum W, beta = colsum W
//   cosine:  W = g / (|a|_c |b|_c),     alpha_i = [|a_i| > eps] sum_j g_ij C_ij / |a_i|_c^2
//            (C = 1 - D the similarity; beta likewise over i)
// and of L1: gA_i = sum_j g_ij sign(A_i - B_j), gB_j = -sum_i g_ij sign(A_i - B_j).
#pragma once
#include <cstdint>
#include <utility>

#include "runtime/tensor.h"

namespace mn::kernels {

constexpr double kL2GradEps = 1e-12;
constexpr double kCosEps = 1e-8;

// The metrics. SqEuclidean / Euclidean are the older names of L2Squared / L2
// (same values); RowDist and Pairwise are the older names of the enum.
enum class Metric : int {
  L1 = 0,
  L2Squared = 1,
  L2 = 2,
  Cosine = 3,
  SqEuclidean = L2Squared,
  Euclidean = L2,
};
using Pairwise = Metric;
using RowDist = Metric;
const char* pairwise_name(Metric m);  // "pairwise_l1", ... (used in error messages)
const char* metric_name(Metric m);    // "l1", "l2_squared", "l2", "cosine"

// ---- abs_diff: a, b, y, gy, ga, gb: (n) ----
template <typename T>
void abs_diff_forward_cpu(int64_t n, const T* a, const T* b, T* y);
template <typename T>
void abs_diff_backward_cpu(int64_t n, const T* a, const T* b, const T* gy, T* ga, T* gb);

// ---- row distances (L1, L2Squared, L2): a, b, ga, gb: (N, D); out, gout: (N).
// ga/gb may be null. ----
template <typename T>
void row_distance_forward_cpu(RowDist k, int64_t N, int64_t D, const T* a, const T* b, T* out);
template <typename T>
void row_distance_backward_cpu(RowDist k, int64_t N, int64_t D, const T* a, const T* b,
                               const T* out, const T* gout, T* ga, T* gb);

// ---- pairwise: A (M, D), B (N, D) -> out (M, N); na (M), nb (N): squared row norms
// (saved for backward; not written for L1). B == A (same pointer, M == N) is the
// self case: norms from the Gram diagonal, d(i, i) = 0 exactly for L2 / L2Squared.
// Backward: work >= M*N + M + N elements; gA (M, D), gB (N, D), either may be null.
template <typename T>
void pairwise_forward_cpu(Pairwise m, int64_t M, int64_t N, int64_t D, const T* A, const T* B,
                          T* out, T* na, T* nb);
template <typename T>
void pairwise_backward_cpu(Pairwise m, int64_t M, int64_t N, int64_t D, const T* A, const T* B,
                           const T* out, const T* na, const T* nb, const T* gout, T* gA, T* gB,
                           T* work);

#ifdef MN_WITH_CUDA
template <typename T>
void abs_diff_forward_cuda(int64_t n, const T* a, const T* b, T* y);
template <typename T>
void abs_diff_backward_cuda(int64_t n, const T* a, const T* b, const T* gy, T* ga, T* gb);
template <typename T>
void row_distance_forward_cuda(RowDist k, int64_t N, int64_t D, const T* a, const T* b, T* out);
template <typename T>
void row_distance_backward_cuda(RowDist k, int64_t N, int64_t D, const T* a, const T* b,
                                const T* out, const T* gout, T* ga, T* gb);
template <typename T>
void pairwise_forward_cuda(Pairwise m, int64_t M, int64_t N, int64_t D, const T* A, const T* B,
                           T* out, T* na, T* nb);
template <typename T>
void pairwise_backward_cuda(Pairwise m, int64_t M, int64_t N, int64_t D, const T* A, const T* B,
                            const T* out, const T* na, const T* nb, const T* gout, T* gA, T* gB,
                            T* work);
#endif

// ---- Tensor level (inputs made contiguous; outputs new) ----
Tensor abs_diff_forward(const Tensor& a, const Tensor& b);
std::pair<Tensor, Tensor> abs_diff_backward(const Tensor& a, const Tensor& b, const Tensor& gy);
// a, b: (N, D) -> (N); k is L1, L2Squared or L2 (cosine is pairwise only).
Tensor row_distance_forward(RowDist k, const Tensor& a, const Tensor& b);
std::pair<Tensor, Tensor> row_distance_backward(RowDist k, const Tensor& a, const Tensor& b,
                                                const Tensor& out, const Tensor& gout);
struct PairwiseResult {
  Tensor out;     // (M, N)
  Tensor na, nb;  // (M), (N): squared row norms
};
// a (M, D), b (N, D) -> (M, N). When b is a (the same tensor) the self case
// above applies.
PairwiseResult pairwise_distance_forward(Pairwise m, const Tensor& a, const Tensor& b);
std::pair<Tensor, Tensor> pairwise_distance_backward(Pairwise m, const Tensor& a, const Tensor& b,
                                                     const PairwiseResult& fwd,
                                                     const Tensor& gout);

}  // namespace mn::kernels
