// Hierarchical large-margin metric learning with stratified sampling
// (Poorheravi et al. §4, Algorithm 1). At level tau:
//   r     = (0.1 + 0.3 (tau - 1)) sigma      growing hyperspheres
//   n_s   = floor(0.01 n) clipped to [10, 20] at tau = 1, then
//           n_s <- max(n_s - floor(0.2 n_s), 1)   fewer spheres
//   p_tau = max(1 - 0.05 (tau - 1), 0.2)     smaller portions
// sigma is the mean per-feature standard deviation of the CURRENT points (the
// points are re-projected every level, so a sigma of the input would no longer
// measure them). Each sphere is centred uniformly in the bounding box of the
// current points (--centres box, the protocol's reading of "c_s ~ range(X)") or
// on a training point drawn at random (--centres point, its alternative); inside it every class present is a stratum of which a portion
// ceil(p_tau * count) is sampled, and the chosen miner runs on that sample.
// One solve per level on the union of all spheres' terms, then M = L L^T and
// X <- X L (X L is L^T x per point); the transforms compose across levels.
// Iteration 1 uses the initial values (the protocol's reading); the loop ends
// after the level at which p reaches its floor (T = 17) or r covers the
// bounding box's diagonal. Levels without triplets are skipped (L = I).
#pragma once
#include <cstdint>
#include <vector>

#include "experiments/lmnn_mining/linalg.h"
#include "experiments/lmnn_mining/miners.h"
#include "experiments/lmnn_mining/solver.h"
#include "runtime/rng.h"

namespace mn::lmnn {

struct HierOptions {
  double r0 = 0.1, dr = 0.3;                 // in units of sigma
  double ns_fraction = 0.01;
  int64_t ns_min = 10, ns_max = 20;
  double ns_shrink = 0.2;
  double p0 = 1.0, dp = 0.05, p_min = 0.2;
  int64_t max_levels = 0;                    // 0: until the p floor / r covers the data
  // Each level's M is rescaled to trace d, then "slightly strengthened on the
  // diagonal" (the paper's option against rank collapse): M += diag_boost * I.
  double diag_boost = 0.05;
  bool centre_on_points = false;             // centres: random training points, not the box
};

struct LevelPlan {
  double r_sigma;  // radius in units of sigma
  int64_t n_s;
  double p;
};
// The schedule for n training points, as far as the p floor (the r cut-off
// depends on the data and is applied by hierarchical_fit).
std::vector<LevelPlan> hierarchical_schedule(int64_t n, const HierOptions& h);

struct LevelStats {
  double r = 0;
  int64_t n_s = 0, sampled = 0, triplets = 0, iterations = 0;
  double p = 0;
  bool collapsed = false;  // the solve returned M = 0: the level was skipped (L = I)
};
struct HierResult {
  Mat L;  // (d, d) composed transform: project with X L
  std::vector<LevelStats> levels;
};
HierResult hierarchical_fit(const Mat& X, const std::vector<int32_t>& y, const MinerParams& mp,
                            const SolverOptions& so, const HierOptions& h, Generator& g);

}  // namespace mn::lmnn
