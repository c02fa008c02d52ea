// Batch-all triplet loss on a (B, B) distance matrix: every triplet (a, p, n)
// of the batch (p a positive of a, p != a; with unordered_positives only
// p > a, as the sampling study's all-triplet selector; n a negative of a):
//
//   L = reduce over triplets of max(0, (D[a,p] + m) - D[a,n])
//
// i.e. pytorch-metric-learning's TripletMarginLoss over its all-triplets
// indices (reducer: Mean over all triplets = the sampling study's mean; or
// MeanNonZero = pml's AvgNonZeroReducer; or Sum). The hinge is active iff
// D[a,n] < D[a,p] + m, written so (t = D[a,p] + m first) in every
// implementation, so the CPU, the GPU and a brute-force loop agree exactly on
// which triplets are active.
//
// No triplet list is built: per anchor the CPU sorts the negatives' distances
// once (O(B log B)), and each positive's active negatives, their count and
// their distance sum come from a binary search and a prefix sum; the gradient
// is the (B, B) matrix dL/dD of counts (+#active n at (a, p), -#active p at
// (a, n)) times the normaliser. Memory O(B^2), time O(B^2 log B); the GPU runs
// one warp per anchor row with O(B) work per entry. The distance matrix's own
// backward (ag::pairwise_distance) carries the gradient to the embeddings.
//
// Per-row outputs (7, B): loss sum, active, triplets, sum and count of the
// positive distances, sum and count of the negative distances; stats (5) as
// every loss: [reduced loss, active, mean positive distance, mean negative
// distance, normaliser].
#pragma once
#include <cstdint>

#include "kernels/losses.h"  // Reduction, kStatsLen
#include "runtime/tensor.h"

namespace mn::kernels {

struct BatchAllParams {
  double margin = 0.2;
  bool unordered_positives = false;
  Reduction reduction = Reduction::Mean;
};

constexpr int kBatchAllRows = 7;
template <typename T>
struct BatchAllRowOut {
  T* loss = nullptr;
  T* active = nullptr;
  T* triplets = nullptr;
  T* spos = nullptr;
  T* npos = nullptr;
  T* sneg = nullptr;
  T* nneg = nullptr;
};

template <typename T>
void batch_all_forward_cpu(const BatchAllParams& P, int64_t B, const T* D, const int64_t* labels, T* grad,
                           const BatchAllRowOut<T>& rows);
template <typename T>
void batch_all_reduce_cpu(Reduction r, int64_t B, const BatchAllRowOut<T>& rows, T* stats);
#ifdef MN_WITH_CUDA
template <typename T>
void batch_all_forward_cuda(const BatchAllParams& P, int64_t B, const T* D, const int64_t* labels, T* grad,
                            const BatchAllRowOut<T>& rows);
template <typename T>
void batch_all_reduce_cuda(Reduction r, int64_t B, const BatchAllRowOut<T>& rows, T* stats);
#endif

struct BatchAllResult {
  Tensor grad;   // (B, B) dL/dD before the normaliser (counts)
  Tensor rows;   // (7, B)
  Tensor stats;  // (5)
};
// D (B, B) float/double distances, labels (B) int32/int64, same device.
BatchAllResult batch_all_terms(const BatchAllParams& p, const Tensor& D, const Tensor& labels);
// dL/dD = grad * grad_out * normaliser (read on the device: no synchronisation).
Tensor batch_all_grad(const BatchAllResult& r, const Tensor& grad_out);

}  // namespace mn::kernels
