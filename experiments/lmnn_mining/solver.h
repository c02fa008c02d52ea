// The LMNN objective (Poorheravi et al. Eqs. 2-3, Weinberger et al.'s LMNN) and
// our projected sub-gradient solver on the Mahalanobis matrix M (d x d, PSD):
//
//   f(M) = sum_{(i,j) in pull} d_M(i,j) + c sum_{(i,j,l)} [1 + d_M(i,j) - d_M(i,l)]_+
//   d_M(i,j) = (x_i - x_j)^T M (x_i - x_j)
//
// f is linear in M on each piece, so the sub-gradient is a weighted sum of outer
// products of difference vectors over the distinct pairs p = (a, b) in play,
// G = sum_p w_p v_p v_p^T, v_p = x_a - x_b, with w_p += 1 per pull pair and,
// per active triplet, w_ij += c, w_il -= c. Rather than one outer product per
// triplet (d^2 each), the weights are summed per pair (1 per term), then
// G = X^T Y with Y = Lap(w) X accumulated row-wise (Y_a += w_p v_p,
// Y_b -= w_p v_p: d per touched pair), then one (d x m x d) GEMM. The
// distances come from Z = X L (M = L L^T from the projection's eigenpairs, one
// (m x d x d) GEMM), then |z_a - z_b|^2 for the pairs an evaluation touches.
//
// Solver (LMNN's): M <- P_psd(M - alpha G), P_psd clipping negative eigenvalues
// of our own eigensolver; alpha grows by 5 % after an accepted step and halves
// after a rejected one. Active set: between full checks (every `full_every`
// iterations) only the triplets violated at the last check are evaluated; a
// full check that finds the true objective higher than at the previous one
// returns to that state with half the step (the objective over all triplets
// never increases from check to check). The
// solve stops when the full objective changed by less than `tol` (relative)
// between two full checks, or when a step changed it by less than
// tol / full_every and the full check that follows finds no new violator.
#pragma once
#include <cstdint>
#include <vector>

#include "experiments/lmnn_mining/linalg.h"
#include "experiments/lmnn_mining/miners.h"

namespace mn::lmnn {

struct SolverOptions {
  double c = 1.0;         // hinge weight
  int64_t max_iter = 1000;
  double tol = 1e-5;      // stop on relative objective change below this (see above)
  int64_t full_every = 10;
  double step0 = 0.1;     // first step: step0 * |M0|_F / |G0|_F
};

struct SolveResult {
  Mat M;                   // (d, d) PSD
  Mat L;                   // (d, d) M = L L^T, columns by descending eigenvalue
  double objective = 0;    // f(M) over all triplets
  int64_t iterations = 0;
  int64_t active = 0;      // violated triplets at the end
  int64_t triplets = 0;
  bool converged = false;
  std::vector<double> history;  // objective after every accepted step (active-set value)
};

// The objective over the points that occur in pull pairs and triplets.
class LmnnProblem {
 public:
  // X (n, d); indices refer to rows of X.
  LmnnProblem(const Mat& X, const Mined& terms, double c);
  int64_t dim() const { return d_; }
  int64_t num_triplets() const { return static_cast<int64_t>(trip_.size()); }
  // f(M) over the triplets in `subset` (all when null); fills grad (d, d) when
  // non-null and the indices of triplets with a positive hinge when non-null.
  // Any symmetric M (distances v^T M v through one GEMM over the pairs).
  double eval(const Mat& M, const std::vector<int32_t>* subset, Mat* grad,
              std::vector<int32_t>* active) const;
  // The same with M = L L^T given by its factor L (d, r): the solver's cheaper path.
  double eval_factored(const Mat& L, const std::vector<int32_t>* subset, Mat* grad,
                       std::vector<int32_t>* active) const;

 private:
  int64_t d_ = 0;
  double c_ = 1.0;
  Mat X_;                 // (m, d) the points in play, compacted
  Mat V_;                 // (P, d) difference vectors of the distinct pairs
  std::vector<std::array<int32_t, 2>> pairs_;  // (P) compacted point indices
  std::vector<double> pull_w_;                 // (P) pull multiplicity
  std::vector<std::array<int32_t, 2>> trip_;   // (T) pair index of (i,j), of (i,l)
  std::vector<int32_t> pull_idx_;              // pairs with a pull weight
  // Per-call distances (one problem per fitting thread: not shared).
  mutable std::vector<uint32_t> stamp_;
  mutable std::vector<double> dist_;
  mutable uint32_t generation_ = 0;
  mutable std::vector<double> pair_w_;   // (P) gradient weight per pair, zero between calls
  mutable std::vector<int32_t> touched_;  // pairs with a weight in this call
  mutable Mat Z_;  // (m, r) X L of the last call
  mutable Mat Y_;  // (m, d) Lap(w) X of the last gradient
  mutable std::vector<int32_t> need_;  // pairs whose distance a subset call needs
  // distances(list, n) fills dist_[p] for p = list[i] (p = i when list is null), i < n.
  template <typename DistBatch>
  double evaluate(DistBatch&& distances, const std::vector<int32_t>* subset, Mat* grad,
                  std::vector<int32_t>* active) const;
};

// M0 defaults to the identity (the Euclidean metric).
SolveResult solve_lmnn(const Mat& X, const Mined& terms, const SolverOptions& o,
                       const Mat* M0 = nullptr);

}  // namespace mn::lmnn
