// Algorithm 1 of Poorheravi et al. (hierarchical stratified sampling); see hierarchical.h.
#include "experiments/lmnn_mining/hierarchical.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "runtime/error.h"

namespace mn::lmnn {

std::vector<LevelPlan> hierarchical_schedule(int64_t n, const HierOptions& h) {
  std::vector<LevelPlan> plan;
  int64_t ns = std::clamp<int64_t>(static_cast<int64_t>(std::floor(h.ns_fraction * n)), h.ns_min,
                                   h.ns_max);
  for (int64_t tau = 0;; ++tau) {
    // p from integer steps so that 1 - 16 * 0.05 lands exactly on the floor.
    const double p = std::max(h.p0 - h.dp * static_cast<double>(tau), h.p_min);
    plan.push_back({h.r0 + h.dr * static_cast<double>(tau), ns, p});
    if (p <= h.p_min + 1e-9) break;
    if (h.max_levels > 0 && static_cast<int64_t>(plan.size()) >= h.max_levels) break;
    MN_CHECK(tau < 100000, "lmnn hierarchical: the portion never reaches its floor (dp = ", h.dp, ")");
    ns = std::max<int64_t>(ns - static_cast<int64_t>(std::floor(h.ns_shrink * ns)), 1);
  }
  if (h.max_levels > 0 && static_cast<int64_t>(plan.size()) > h.max_levels) plan.resize(h.max_levels);
  return plan;
}

HierResult hierarchical_fit(const Mat& X0, const std::vector<int32_t>& y, const MinerParams& mp,
                            const SolverOptions& so, const HierOptions& h, Generator& g) {
  const int64_t n = X0.rows, d = X0.cols;
  MN_CHECK(static_cast<int64_t>(y.size()) == n, "lmnn hierarchical: ", n, " points, ", y.size(),
           " labels");
  HierResult res;
  res.L = Mat::identity(d);
  Mat X = X0;
  for (const LevelPlan& lv : hierarchical_schedule(n, h)) {
    // sigma and the bounding box of the current points.
    std::vector<double> lo(d, 1e300), hi(d, -1e300), mean(d, 0.0), var(d, 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < d; ++j) {
        lo[j] = std::min(lo[j], X(i, j));
        hi[j] = std::max(hi[j], X(i, j));
        mean[j] += X(i, j) / n;
      }
    double sigma = 0, diag2 = 0;
    for (int64_t j = 0; j < d; ++j) {
      for (int64_t i = 0; i < n; ++i) var[j] += (X(i, j) - mean[j]) * (X(i, j) - mean[j]);
      sigma += std::sqrt(var[j] / std::max<int64_t>(n - 1, 1)) / d;
      diag2 += (hi[j] - lo[j]) * (hi[j] - lo[j]);
    }
    LevelStats st;
    st.r = lv.r_sigma * sigma;
    st.n_s = lv.n_s;
    st.p = lv.p;
    Mined all;
    for (int64_t s = 0; s < lv.n_s; ++s) {
      std::vector<double> centre(d);
      if (h.centre_on_points) {
        const int64_t c = g.next_int(0, n);
        for (int64_t j = 0; j < d; ++j) centre[j] = X(c, j);
      } else {
        for (int64_t j = 0; j < d; ++j) centre[j] = lo[j] + g.next_uniform() * (hi[j] - lo[j]);
      }
      std::map<int32_t, std::vector<int64_t>> strata;  // class -> points inside
      for (int64_t i = 0; i < n; ++i) {
        double d2 = 0;
        for (int64_t j = 0; j < d; ++j) d2 += (X(i, j) - centre[j]) * (X(i, j) - centre[j]);
        if (d2 <= st.r * st.r) strata[y[i]].push_back(i);
      }
      if (strata.size() < 2) continue;  // one class or none: no triplets
      std::vector<int64_t> sample;
      for (auto& [cls, pts] : strata) {
        const int64_t take = std::max<int64_t>(
            1, static_cast<int64_t>(std::ceil(lv.p * static_cast<double>(pts.size()) - 1e-9)));
        for (int64_t q : sample_without_replacement(static_cast<int64_t>(pts.size()), take, g))
          sample.push_back(pts[q]);
      }
      std::vector<int32_t> ys;
      for (int64_t i : sample) ys.push_back(y[i]);
      const Mined m = mine(take_rows(X, sample), ys, mp, g);
      st.sampled += static_cast<int64_t>(sample.size());
      for (const auto& p : m.pull)
        all.pull.push_back({static_cast<int32_t>(sample[p[0]]), static_cast<int32_t>(sample[p[1]])});
      for (const auto& t : m.triplets)
        all.triplets.push_back({static_cast<int32_t>(sample[t[0]]), static_cast<int32_t>(sample[t[1]]),
                                static_cast<int32_t>(sample[t[2]])});
    }
    // The union: a pair or triplet found in two spheres counts once.
    std::sort(all.pull.begin(), all.pull.end());
    all.pull.erase(std::unique(all.pull.begin(), all.pull.end()), all.pull.end());
    std::sort(all.triplets.begin(), all.triplets.end());
    all.triplets.erase(std::unique(all.triplets.begin(), all.triplets.end()), all.triplets.end());
    st.triplets = static_cast<int64_t>(all.triplets.size());
    if (!all.triplets.empty()) {
      SolveResult sr = solve_lmnn(X, all, so);
      st.iterations = sr.iterations;
      Mat M = sr.M;
      double tr = 0;
      for (int64_t j = 0; j < d; ++j) tr += M(j, j);
      // A zero M (the pull term won: hard triplets in a small sample can make
      // M = 0 the optimum) would map every point onto one: such a level is
      // skipped rather than composed. Otherwise M is rescaled to trace d (k-NN
      // is scale-free, and this keeps the composed data's scale, hence sigma
      // and the radii, comparable across levels), then its diagonal is
      // strengthened by diag_boost against rank collapse (the paper's option).
      st.collapsed = !(tr > 0) || !std::isfinite(tr);
      if (!st.collapsed) {
        for (double& v : M.a) v *= static_cast<double>(d) / tr;
        for (int64_t j = 0; j < d; ++j) M(j, j) += h.diag_boost;
        const Mat L = psd_factor(M);
        X = matmul(X, L);
        res.L = matmul(res.L, L);
      }
    }
    res.levels.push_back(st);
    if (st.r * st.r >= diag2) break;  // the sphere covers the data from any centre
  }
  return res;
}

}  // namespace mn::lmnn
