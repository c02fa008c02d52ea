// Algorithm 1 as run (experiments/lmnn_mining/hierarchical.h):
//   * the schedule: T levels (the authors' 10 / 30 / 50), n_s and p held at
//     their floors once reached, by hand;
//   * the radius accumulates, r <- r + 0.3 sigma_tau with sigma_tau measured on
//     the current points (checked where sigma does change: LevelScale::None);
//   * no scale drift: with LevelScale::Sigma the data's sigma is the same at
//     every level on a toy set, where the literal composition drifts;
//   * whether a learned metric is other than a multiple of the identity.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "experiments/lmnn_mining/experiment.h"
#include "experiments/lmnn_mining/hierarchical.h"
#include "runtime/error.h"

namespace mn::lmnn {
namespace {

TEST(LmnnHierarchical, DefaultLevelsAreTheAuthorsRuns) {
  EXPECT_EQ(default_levels("iris"), 10);
  EXPECT_EQ(default_levels("orl"), 30);
  EXPECT_EQ(default_levels("mnist"), 50);
  EXPECT_THROW(default_levels("cifar"), Error);
}

TEST(LmnnHierarchical, ScheduleRunsTLevelsAndHoldsTheFloors) {
  HierOptions h;
  // Iris: n = 105, floor(1.05) = 1 -> clipped to 10; 10 -> 8 -> 7 -> 6 -> 5 -> 4 -> 4 ...
  h.levels = 10;
  const std::vector<LevelPlan> a = hierarchical_schedule(105, h);
  ASSERT_EQ(a.size(), 10u);
  const std::vector<int64_t> ns = {10, 8, 7, 6, 5, 4, 4, 4, 4, 4};
  for (size_t t = 0; t < a.size(); ++t) {
    EXPECT_EQ(a[t].n_s, ns[t]) << t;
    EXPECT_NEAR(a[t].p, 1.0 - 0.05 * t, 1e-12) << t;
  }
  // MNIST: T = 50 runs past the p floor (reached at level 17) and holds it.
  h.levels = 50;
  const std::vector<LevelPlan> m = hierarchical_schedule(400, h);
  ASSERT_EQ(m.size(), 50u) << "no stop at the p floor";
  for (size_t t = 0; t < m.size(); ++t) {
    EXPECT_NEAR(m[t].p, t < 16 ? 1.0 - 0.05 * t : 0.2, 1e-12) << t;
    if (t >= 5) {
      EXPECT_EQ(m[t].n_s, 4) << t;
    }
  }
  EXPECT_EQ(m[16].p, 0.2) << "exactly the floor, not 0.2 plus round-off";
  // n = 2500: floor(25) clipped to 20; 20 -> 16 -> 13 -> 11 -> 9 -> 8 -> 7 -> 6 -> 5 -> 4 -> 4.
  h.levels = 12;
  const std::vector<LevelPlan> b = hierarchical_schedule(2500, h);
  const std::vector<int64_t> nb = {20, 16, 13, 11, 9, 8, 7, 6, 5, 4, 4, 4};
  for (size_t t = 0; t < nb.size(); ++t) EXPECT_EQ(b[t].n_s, nb[t]) << t;
  h.levels = 1;
  EXPECT_EQ(hierarchical_schedule(1500, h)[0].n_s, 15) << "floor(15) is within [10, 20]";
  h.levels = 0;
  EXPECT_THROW(hierarchical_schedule(105, h), Error);
}

// Three Gaussian classes in 5-D, overlapping enough that every level finds
// triplets in its spheres; feature 4 is wide noise.
void three_blobs(Mat& X, std::vector<int32_t>& y, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd;
  X = Mat(n, 5);
  y.assign(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < n; ++i) {
    y[i] = static_cast<int32_t>(i % 3);
    for (int64_t j = 0; j < 4; ++j) X(i, j) = (j == y[i] ? 1.5 : 0.0) + nd(rng);
    X(i, 4) = 4.0 * nd(rng);
  }
}

HierResult fit_blobs(LevelScale scale, int64_t levels) {
  Mat X;
  std::vector<int32_t> y;
  three_blobs(X, y, 90, 5);
  HierOptions h;
  h.levels = levels;
  h.scale = scale;
  Generator g(9);
  SolverOptions so;
  so.c = 1.0;
  return hierarchical_fit(X, y, {Mining::BH, 3, 1.4}, so, h, g);
}

TEST(LmnnHierarchical, TheRadiusAccumulatesWithTheCurrentSigma) {
  // The literal composition (M + I, no rescale) lets sigma change per level, so
  // r_tau = r_{tau-1} + 0.3 sigma_tau differs from (0.1 + 0.3 (tau - 1)) sigma_tau.
  const HierResult r = fit_blobs(LevelScale::None, 10);
  ASSERT_EQ(r.levels.size(), 10u);
  EXPECT_NEAR(r.levels[0].r, 0.1 * r.levels[0].sigma, 1e-12 * r.levels[0].sigma);
  bool sigma_moved = false;
  for (size_t t = 1; t < r.levels.size(); ++t) {
    const LevelStats &now = r.levels[t], &before = r.levels[t - 1];
    EXPECT_NEAR(now.r, before.r + 0.3 * now.sigma, 1e-12 * now.r) << "level " << t + 1;
    EXPECT_DOUBLE_EQ(now.sigma, before.sigma_after) << "sigma of the points this level sees";
    sigma_moved = sigma_moved || std::abs(now.sigma - r.levels[0].sigma) > 0.01 * r.levels[0].sigma;
  }
  ASSERT_TRUE(sigma_moved) << "the toy set must make sigma move, or the check above proves nothing";
}

TEST(LmnnHierarchical, SigmaHoldsAcrossLevelsWhereTheLiteralCompositionDrifts) {
  const HierResult held = fit_blobs(LevelScale::Sigma, 10);
  const HierResult drift = fit_blobs(LevelScale::None, 10);
  ASSERT_EQ(held.levels.size(), 10u);
  int64_t learned = 0;
  const double s1 = held.levels[0].sigma;
  for (size_t t = 0; t < held.levels.size(); ++t) {
    const LevelStats& lv = held.levels[t];
    learned += lv.triplets > 0;
    // The rescale is one scalar product per level: exact up to round-off
    // (~1e-15 per level), so 1e-9 relative leaves no room for any real drift.
    EXPECT_NEAR(lv.sigma, s1, 1e-9 * s1) << "level " << t + 1;
    EXPECT_NEAR(lv.sigma_after, s1, 1e-9 * s1) << "level " << t + 1;
    // With sigma constant the accumulated radius is (0.1 + 0.3 (tau - 1)) sigma_1.
    EXPECT_NEAR(lv.r, (0.1 + 0.3 * static_cast<double>(t)) * s1, 1e-9 * s1) << "level " << t + 1;
  }
  EXPECT_GE(learned, 5) << "most levels must learn, or constant sigma is trivial";
  EXPECT_TRUE(metric_differs_from_identity(held.L));
  // The same run without the rescale: sigma grows by more than half.
  EXPECT_GT(drift.levels.back().sigma_after, 1.5 * drift.levels[0].sigma);
}

TEST(LmnnHierarchical, ALevelWithoutTripletsLeavesThePointsAlone) {
  Mat X;
  std::vector<int32_t> y;
  three_blobs(X, y, 30, 3);
  HierOptions h;
  h.levels = 3;
  h.r0 = 1e-9;  // spheres far too small for two classes
  h.dr = 1e-9;
  Generator g(1);
  const HierResult r = hierarchical_fit(X, y, {Mining::BA, 3, 1.4}, SolverOptions{}, h, g);
  for (const LevelStats& lv : r.levels) {
    EXPECT_EQ(lv.triplets, 0);
    EXPECT_EQ(lv.iterations, 0);
  }
  EXPECT_EQ(r.L.a, Mat::identity(5).a);
  EXPECT_FALSE(metric_differs_from_identity(r.L));
}

TEST(LmnnHierarchical, LevelMaxIterCapsEveryLevelsSolve) {
  Mat X;
  std::vector<int32_t> y;
  three_blobs(X, y, 90, 5);
  HierOptions h;
  h.levels = 10;
  SolverOptions so;
  so.tol = 0;  // never converged: every level that learns runs to its cap
  so.max_iter = 50;
  Generator g1(9), g2(9);
  const HierResult free_run = hierarchical_fit(X, y, {Mining::BH, 3, 1.4}, so, h, g1);
  h.level_max_iter = 7;
  const HierResult capped = hierarchical_fit(X, y, {Mining::BH, 3, 1.4}, so, h, g2);
  int64_t solved = 0;
  for (size_t t = 0; t < capped.levels.size(); ++t) {
    EXPECT_LE(capped.levels[t].iterations, 7) << "level " << t;
    if (capped.levels[t].triplets > 0) ++solved;
  }
  ASSERT_GE(solved, 1) << "the toy set must give a level with triplets";
  int64_t longer = 0;
  for (const LevelStats& lv : free_run.levels) longer += lv.iterations > 7 ? 1 : 0;
  EXPECT_GE(longer, 1) << "without the cap a level runs past 7 steps (--max-iter applies)";
}

TEST(LmnnHierarchical, AuthorsCodeVariantsSolvePerSphereAndKeepTheLastMetric) {
  Mat X;
  std::vector<int32_t> y;
  three_blobs(X, y, 90, 5);
  HierOptions h;
  h.levels = 3;
  h.r0 = 3.0;  // spheres wide enough to hold two classes from the first level
  SolverOptions so;
  so.tol = 0;
  so.max_iter = 5;  // every solve runs exactly to its cap
  const MinerParams mp{Mining::BH, 3, 1.4};
  // Per sphere: a level's steps are 5 per sphere that found triplets.
  h.solve_per_sphere = true;
  Generator g1(9);
  const HierResult per_sphere = hierarchical_fit(X, y, mp, so, h, g1);
  bool several = false;
  for (const LevelStats& lv : per_sphere.levels) {
    EXPECT_EQ(lv.iterations % 5, 0);
    EXPECT_LE(lv.iterations, 5 * lv.n_s);
    several = several || lv.iterations > 5;
  }
  EXPECT_TRUE(several) << "some level must have solved more than one sphere";
  // The last metric alone: the same fit (same draws), another transform.
  h.solve_per_sphere = false;
  Generator g2(9), g3(9);
  const HierResult composed = hierarchical_fit(X, y, mp, so, h, g2);
  h.metric_last = true;
  const HierResult last = hierarchical_fit(X, y, mp, so, h, g3);
  ASSERT_EQ(last.levels.size(), composed.levels.size());
  for (size_t t = 0; t < last.levels.size(); ++t)
    EXPECT_EQ(last.levels[t].triplets, composed.levels[t].triplets) << "level " << t;
  EXPECT_NE(last.L.a, composed.L.a);
  // With one level the last solve is the whole composition.
  h.levels = 1;
  Generator g4(9), g5(9);
  const HierResult one_last = hierarchical_fit(X, y, mp, so, h, g4);
  h.metric_last = false;
  const HierResult one_composed = hierarchical_fit(X, y, mp, so, h, g5);
  ASSERT_GT(one_composed.levels[0].triplets, 0);
  EXPECT_EQ(one_last.L.a, one_composed.L.a);
}

TEST(LmnnMetric, DiffersFromIdentityUpToScale) {
  EXPECT_FALSE(metric_differs_from_identity(Mat::identity(3)));
  Mat s = Mat::identity(3);
  for (double& v : s.a) v *= 3.0;
  EXPECT_FALSE(metric_differs_from_identity(s)) << "k-NN is scale-free: 3 I is Euclidean";
  Mat q(2, 2);  // a rotation: M = Q Q^T = I
  q(0, 0) = q(1, 1) = std::cos(0.3);
  q(0, 1) = -std::sin(0.3);
  q(1, 0) = std::sin(0.3);
  EXPECT_FALSE(metric_differs_from_identity(q));
  Mat d = Mat::identity(2);
  d(1, 1) = 1.001;
  EXPECT_TRUE(metric_differs_from_identity(d));
  EXPECT_TRUE(metric_differs_from_identity(Mat(2, 2))) << "M = 0 is no metric";
}

}  // namespace
}  // namespace mn::lmnn
