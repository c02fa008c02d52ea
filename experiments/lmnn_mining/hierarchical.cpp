// Algorithm 1 of Poorheravi et al. (hierarchical stratified sampling); see hierarchical.h.
#include "experiments/lmnn_mining/hierarchical.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "runtime/error.h"

namespace mn::lmnn {

int64_t default_levels(const std::string& dataset) {
  // bghojogh/Large-Margin-Metric-Learning, main.m: n_iteration = 10 (iris,
  // wine), 30 (ORL_faces), 50 (MNIST); the paper's text gives no T.
  if (dataset == "iris") return 10;
  if (dataset == "orl") return 30;
  if (dataset == "mnist") return 50;
  MN_THROW("lmnn hierarchical: no default number of levels for data set '", dataset,
           "' (expected iris, orl or mnist; give --levels)");
}

std::vector<LevelPlan> hierarchical_schedule(int64_t n, const HierOptions& h) {
  MN_CHECK(h.levels >= 1, "lmnn hierarchical: --levels must be at least 1 (got ", h.levels, ")");
  std::vector<LevelPlan> plan;
  int64_t ns = std::clamp<int64_t>(static_cast<int64_t>(std::floor(h.ns_fraction * n)), h.ns_min,
                                   h.ns_max);
  for (int64_t tau = 0; tau < h.levels; ++tau) {
    if (tau > 0) ns = std::max<int64_t>(ns - static_cast<int64_t>(std::floor(h.ns_shrink * ns)), 1);
    // p from integer steps so that 1 - 16 * 0.05 lands exactly on the floor.
    plan.push_back({ns, std::max(h.p0 - h.dp * static_cast<double>(tau), h.p_min)});
  }
  return plan;
}

double mean_feature_sd(const Mat& X) {
  const int64_t n = X.rows, d = X.cols;
  if (n < 2 || d == 0) return 0.0;
  double sigma = 0;
  for (int64_t j = 0; j < d; ++j) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i) mean += X(i, j);
    mean /= static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) var += (X(i, j) - mean) * (X(i, j) - mean);
    sigma += std::sqrt(var / static_cast<double>(n - 1));
  }
  return sigma / static_cast<double>(d);
}

namespace {

// A sphere centre: uniform in the bounding box of X, or a random row of X.
std::vector<double> draw_centre(const Mat& X, bool on_points, Generator& g) {
  const int64_t n = X.rows, d = X.cols;
  std::vector<double> centre(static_cast<size_t>(d));
  if (on_points) {
    const int64_t c = g.next_int(0, n);
    for (int64_t j = 0; j < d; ++j) centre[j] = X(c, j);
    return centre;
  }
  for (int64_t j = 0; j < d; ++j) {
    double lo = X(0, j), hi = X(0, j);
    for (int64_t i = 1; i < n; ++i) {
      lo = std::min(lo, X(i, j));
      hi = std::max(hi, X(i, j));
    }
    centre[j] = lo + g.next_uniform() * (hi - lo);
  }
  return centre;
}

// One hypersphere: the points inside, a stratified portion p of each class,
// the miner on that sample; its terms appended to `all` in X's indices.
void mine_sphere(const Mat& X, const std::vector<int32_t>& y, const std::vector<double>& centre,
                 double r, double p, const MinerParams& mp, Generator& g, Mined& all,
                 LevelStats& st) {
  const int64_t n = X.rows, d = X.cols;
  std::map<int32_t, std::vector<int64_t>> strata;  // class -> points inside
  for (int64_t i = 0; i < n; ++i) {
    double d2 = 0;
    for (int64_t j = 0; j < d; ++j) d2 += (X(i, j) - centre[j]) * (X(i, j) - centre[j]);
    if (d2 <= r * r) strata[y[i]].push_back(i);
  }
  for (const auto& [cls, pts] : strata) st.inside += static_cast<int64_t>(pts.size());
  if (strata.size() < 2) return;  // one class or none: no triplets
  std::vector<int64_t> sample;
  for (const auto& [cls, pts] : strata) {
    const int64_t take = std::max<int64_t>(
        1, static_cast<int64_t>(std::ceil(p * static_cast<double>(pts.size()) - 1e-9)));
    for (int64_t q : sample_without_replacement(static_cast<int64_t>(pts.size()), take, g))
      sample.push_back(pts[q]);
  }
  std::vector<int32_t> ys;
  for (int64_t i : sample) ys.push_back(y[i]);
  const Mined m = mine(take_rows(X, sample), ys, mp, g);
  st.sampled += static_cast<int64_t>(sample.size());
  for (const auto& q : m.pull)
    all.pull.push_back({static_cast<int32_t>(sample[q[0]]), static_cast<int32_t>(sample[q[1]])});
  for (const auto& t : m.triplets)
    all.triplets.push_back({static_cast<int32_t>(sample[t[0]]), static_cast<int32_t>(sample[t[1]]),
                            static_cast<int32_t>(sample[t[2]])});
}

// The level's transform from the solved M: M + boost I (the paper's diagonal
// strengthening), L = Psi Sigma^1/2, then (Sigma scale) the scalar that maps
// sigma(X L) back to sigma_ref. Returns false when M + boost I is zero.
bool level_transform(const Mat& X, Mat M, const HierOptions& h, double sigma_ref, Mat& L) {
  const int64_t d = M.rows;
  for (int64_t j = 0; j < d; ++j) M(j, j) += h.diag_boost;
  double tr = 0;
  for (int64_t j = 0; j < d; ++j) tr += M(j, j);
  if (!(tr > 0) || !std::isfinite(tr)) return false;
  L = psd_factor(M);
  if (h.scale == LevelScale::Sigma) {
    const double s_new = mean_feature_sd(matmul(X, L));
    if (!(s_new > 0)) return false;  // every point mapped onto one
    for (double& v : L.a) v *= sigma_ref / s_new;
  }
  return true;
}

// Solves one problem (a level's union of spheres, or one sphere) and applies
// its transform to X; the composed transform in res.L, this solve's in *last.
void solve_and_apply(Mat& X, Mined& terms, const SolverOptions& so, const HierOptions& h,
                     double sigma1, HierResult& res, LevelStats& st, Mat* last) {
  // A pair or triplet found in two spheres counts once.
  std::sort(terms.pull.begin(), terms.pull.end());
  terms.pull.erase(std::unique(terms.pull.begin(), terms.pull.end()), terms.pull.end());
  std::sort(terms.triplets.begin(), terms.triplets.end());
  terms.triplets.erase(std::unique(terms.triplets.begin(), terms.triplets.end()), terms.triplets.end());
  st.triplets += static_cast<int64_t>(terms.triplets.size());
  if (terms.triplets.empty()) return;
  SolverOptions lso = so;
  if (h.level_max_iter > 0) lso.max_iter = h.level_max_iter;
  const SolveResult sr = solve_lmnn(X, terms, lso);
  st.iterations += sr.iterations;
  Mat L;
  const bool ok = level_transform(X, sr.M, h, sigma1, L);
  st.collapsed = st.collapsed || !ok;
  if (!ok) return;
  X = matmul(X, L);
  res.L = matmul(res.L, L);
  *last = std::move(L);
}

}  // namespace

HierResult hierarchical_fit(const Mat& X0, const std::vector<int32_t>& y, const MinerParams& mp,
                            const SolverOptions& so, const HierOptions& h, Generator& g) {
  const int64_t n = X0.rows, d = X0.cols;
  MN_CHECK(static_cast<int64_t>(y.size()) == n, "lmnn hierarchical: ", n, " points, ", y.size(),
           " labels");
  MN_CHECK(n >= 2, "lmnn hierarchical: needs at least 2 training points (got ", n, ")");
  HierResult res;
  res.L = Mat::identity(d);
  Mat last = Mat::identity(d);  // the last solve's own transform
  Mat X = X0;
  const double sigma1 = mean_feature_sd(X0);
  double r = 0;
  const std::vector<LevelPlan> plan = hierarchical_schedule(n, h);
  for (size_t tau = 0; tau < plan.size(); ++tau) {
    LevelStats st;
    st.sigma = mean_feature_sd(X);  // measured on the current (projected) training points
    r = tau == 0 ? h.r0 * st.sigma : r + h.dr * st.sigma;
    st.r = r;
    st.n_s = plan[tau].n_s;
    st.p = plan[tau].p;
    Mined all;
    for (int64_t s = 0; s < st.n_s; ++s) {
      mine_sphere(X, y, draw_centre(X, h.centre_on_points, g), r, st.p, mp, g, all, st);
      if (h.solve_per_sphere) {  // the authors' code: solve and project after every sphere
        solve_and_apply(X, all, so, h, sigma1, res, st, &last);
        all = Mined{};
      }
    }
    if (!h.solve_per_sphere) solve_and_apply(X, all, so, h, sigma1, res, st, &last);
    st.sigma_after = mean_feature_sd(X);
    res.levels.push_back(st);
  }
  // The authors' main.m scores k-NN with the last solve's M + I on the
  // ORIGINAL features (X_train = X_train_original before knn(..., M)).
  if (h.metric_last) res.L = std::move(last);
  return res;
}

}  // namespace mn::lmnn
