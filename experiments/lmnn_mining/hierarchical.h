// Hierarchical large-margin metric learning with stratified sampling
// (Poorheravi et al. §4, Algorithm 1). T levels (the paper's text does not
// state T; the authors' public code, bghojogh/Large-Margin-Metric-Learning
// main.m `n_iteration`, runs 10 for Iris, 30 for ORL and 50 for MNIST:
// default_levels()). At level tau = 1..T:
//   sigma_tau = mean per-feature standard deviation of the CURRENT points
//               (the training points projected by every earlier level)
//   r         = r0 sigma_1 at tau = 1, then r <- r + dr sigma_tau (the text's
//               r := r + Delta r, Delta r = 0.3 sigma: the radius ACCUMULATES)
//   n_s       = floor(0.01 n) clipped to [10, 20] at tau = 1, then
//               n_s <- max(n_s - floor(0.2 n_s), 1)     (floor 4 from 5 on: floor(0.8) = 0)
//   p_tau     = max(1 - 0.05 (tau - 1), 0.2)
// p and n_s stay at their floors once reached (as the authors' code runs them);
// iteration 1 uses the initial values (the protocol's reading).
// Each sphere is centred uniformly in the bounding box of the current points
// (--centres box: "c_s ~ range(X)", the authors' code's `min + (max - min) .* rand`)
// or on a training point drawn at random (--centres point, a labelled
// supplement); inside it every class present is a stratum of which a portion
// ceil(p_tau * count) is sampled, and the chosen miner runs on that sample.
// One solve per level on the union of all spheres' terms (the protocol's reading
// of the listing: lines 11-13 sit outside the sphere loop), then the paper's
// update: M <- M + diag_boost I ("slightly strengthen the diagonal"; the authors'
// code adds exactly I), M = L L^T (Eq. 13), X <- X L; the transforms compose.
//
// Scale: M + I has eigenvalues >= 1, so composing 50 such L lets the data grow
// without bound while the hinge margin stays 1 (late levels then satisfy every
// triplet and learn nothing). With LevelScale::Sigma (the default) each level's
// L is multiplied by the scalar sigma_1 / sigma(X L), which holds sigma at its
// level-1 value: k-NN and the learned directions are unchanged by a scalar, and
// the margin and the radii keep their meaning at every level. LevelScale::None
// is the literal composition, for comparison. A level without triplets leaves
// X unchanged (L = I).
//
// Two variants reproduce what the authors' public code does and the paper's
// text does not say: solve_per_sphere (one solve per sphere on its own sample,
// the data projected after each, so a level composes n_s transforms) and
// metric_last (main.m restores the original training features after the loop
// and scores k-NN with the last sphere's M + I alone: our result is then the
// last solve's transform, not the composition).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "experiments/lmnn_mining/linalg.h"
#include "experiments/lmnn_mining/miners.h"
#include "experiments/lmnn_mining/solver.h"
#include "runtime/rng.h"

namespace mn::lmnn {

enum class LevelScale { Sigma, None };

struct HierOptions {
  int64_t levels = 10;                       // T (see default_levels)
  double r0 = 0.1, dr = 0.3;                 // in units of sigma
  double ns_fraction = 0.01;
  int64_t ns_min = 10, ns_max = 20;
  double ns_shrink = 0.2;
  double p0 = 1.0, dp = 0.05, p_min = 0.2;
  double diag_boost = 1.0;                   // M += diag_boost * I per level (authors' code: 1)
  LevelScale scale = LevelScale::Sigma;
  bool centre_on_points = false;             // centres: random training points, not the box
  int64_t level_max_iter = 0;                // most solver steps per solve (0: the solver's max_iter)
  // Variants of the authors' public code (not the protocol; see hierarchical_fit):
  bool solve_per_sphere = false;  // one solve per sphere, data projected after each
  bool metric_last = false;       // the result is the last solve's transform alone, not the composition
};

// T as the authors ran it: iris 10, orl 30, mnist 50; throws for another name.
int64_t default_levels(const std::string& dataset);

struct LevelPlan {
  int64_t n_s;
  double p;
};
// n_s and p for each of the h.levels levels for n training points (the radius
// depends on the data's sigma per level and is accumulated by hierarchical_fit).
std::vector<LevelPlan> hierarchical_schedule(int64_t n, const HierOptions& h);

// The mean per-feature sample standard deviation of X's rows (the paper's sigma).
double mean_feature_sd(const Mat& X);

struct LevelStats {
  double sigma = 0;        // of the points this level sampled from (sigma_tau)
  double sigma_after = 0;  // of the points after this level's projection
  double r = 0;            // absolute radius
  int64_t n_s = 0, inside = 0, sampled = 0, triplets = 0, iterations = 0;
  double p = 0;
  bool collapsed = false;  // diag_boost = 0 and the solve returned M = 0: skipped (L = I)
};
struct HierResult {
  Mat L;  // (d, d) composed transform: project with X L
  std::vector<LevelStats> levels;
};
HierResult hierarchical_fit(const Mat& X, const std::vector<int32_t>& y, const MinerParams& mp,
                            const SolverOptions& so, const HierOptions& h, Generator& g);

}  // namespace mn::lmnn
