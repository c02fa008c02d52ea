// The LMNN objective and solver (experiments/lmnn_mining/solver.h), the
// hierarchical schedule and fit (hierarchical.h), k-NN scoring and the per-seed
// splits (experiment.h, datasets.h):
//   * objective value against a direct per-triplet loop (the oracle), and the
//     solver's factored path (all triplets and the active subset) against the
//     direct one on the baseline and AVX2 loops;
//   * float64 central-difference check of the sub-gradient away from the hinge
//     kinks (f is piecewise linear in M, so the differences are exact up to
//     round-off there);
//   * the solver lowers the objective, keeps M PSD, and learns to ignore a
//     noise feature;
//   * a hierarchical fit (Algorithm 1) learns (its schedule: test_lmnn_hierarchical.cpp);
//   * k-NN votes and ties on a hand-built set; split sizes and seeding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>
#include <vector>

#include "experiments/lmnn_mining/datasets.h"
#include "experiments/lmnn_mining/experiment.h"
#include "experiments/lmnn_mining/hierarchical.h"
#include "experiments/lmnn_mining/solver.h"
#include "runtime/cpu_features.h"

namespace mn::lmnn {
namespace {

Mat random_mat(int64_t r, int64_t c, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd;
  Mat A(r, c);
  for (double& v : A.a) v = scale * nd(rng);
  return A;
}

double dM(const Mat& X, const Mat& M, int64_t a, int64_t b) {
  double s = 0;
  for (int64_t p = 0; p < X.cols; ++p)
    for (int64_t q = 0; q < X.cols; ++q) s += (X(a, p) - X(b, p)) * M(p, q) * (X(a, q) - X(b, q));
  return s;
}

// The objective written the slow, obvious way.
double oracle(const Mat& X, const Mined& t, const Mat& M, double c) {
  double f = 0;
  for (const auto& p : t.pull) f += dM(X, M, p[0], p[1]);
  for (const auto& tr : t.triplets)
    f += c * std::max(0.0, 1 + dM(X, M, tr[0], tr[1]) - dM(X, M, tr[0], tr[2]));
  return f;
}

Mined random_terms(int64_t n, int64_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> u(0, static_cast<int32_t>(n - 1));
  Mined t;
  for (int64_t q = 0; q < count; ++q) {
    t.pull.push_back({u(rng), u(rng)});
    t.triplets.push_back({u(rng), u(rng), u(rng)});
  }
  return t;
}

TEST(LmnnSolver, ObjectiveMatchesDirectLoop) {
  const Mat X = random_mat(10, 3, 1);
  const Mined t = random_terms(10, 30, 2);
  const Mat A = random_mat(3, 3, 3, 0.5);
  const Mat M = matmul(A, A, false, true);
  for (double c : {0.1, 1.0, 5.0}) {
    LmnnProblem prob(X, t, c);
    const double f = prob.eval(M, nullptr, nullptr, nullptr);
    EXPECT_NEAR(f, oracle(X, t, M, c), 1e-10 * std::max(1.0, std::abs(f))) << "c = " << c;
  }
}

TEST(LmnnSolver, GradientMatchesCentralDifferencesInFloat64) {
  const Mat X = random_mat(12, 4, 5);
  const Mined t = random_terms(12, 40, 6);
  const Mat A = random_mat(4, 4, 7, 0.6);
  const Mat M = matmul(A, A, false, true);
  const double c = 2.0;
  LmnnProblem prob(X, t, c);
  Mat G;
  prob.eval(M, nullptr, &G, nullptr);
  // Skip the check when a hinge sits within the step of its kink.
  const double h = 1e-6;
  for (const auto& tr : t.triplets) {
    const double m = 1 + dM(X, M, tr[0], tr[1]) - dM(X, M, tr[0], tr[2]);
    ASSERT_GT(std::abs(m), 1e-3) << "a triplet sits at its kink: pick another seed";
  }
  int checked = 0;
  for (int64_t a = 0; a < 4; ++a)
    for (int64_t b = a; b < 4; ++b) {
      Mat Mp = M, Mm = M;  // symmetric perturbation E_ab + E_ba
      Mp(a, b) += h, Mm(a, b) -= h;
      if (a != b) Mp(b, a) += h, Mm(b, a) -= h;
      const double num = (prob.eval(Mp, nullptr, nullptr, nullptr) - prob.eval(Mm, nullptr, nullptr, nullptr)) / (2 * h);
      const double ana = a == b ? G(a, a) : G(a, b) + G(b, a);
      // Relative to max(|analytic|, |numeric|, 1): round-off of f (~1e-13 |f|) / h.
      EXPECT_NEAR(num, ana, 1e-6 * std::max({std::abs(ana), std::abs(num), 1.0})) << a << "," << b;
      ++checked;
    }
  EXPECT_EQ(checked, 10);
  for (int64_t a = 0; a < 4; ++a)
    for (int64_t b = 0; b < 4; ++b) EXPECT_NEAR(G(a, b), G(b, a), 1e-10) << "gradient is symmetric";
}

// The solver's path: distances from the factor L (Z = X L), on all triplets and
// on the active subset, with the gradient, equal the direct evaluation with
// M = L L^T, on the baseline loops and on the AVX2 + FMA ones (MN_LMNN_SIMD).
TEST(LmnnSolver, FactoredEvaluationMatchesOnEveryCpuPath) {
  const int64_t n = 40, d = 7;  // d = 7: the 4-wide loops and their remainder
  const Mat X = random_mat(n, d, 31);
  const Mined t = random_terms(n, 300, 32);
  const Mat L = random_mat(d, d, 33, 0.4);
  const Mat M = matmul(L, L, false, true);
  const double c = 1.5;
  std::vector<CpuIsa> paths = {CpuIsa::Scalar};
  if (cpu_isa_supported(CpuIsa::Avx2)) paths.push_back(CpuIsa::Avx2);
  else std::printf("[ SKIPPED  ] the AVX2 path: this CPU has no AVX2 + FMA\n");
  for (CpuIsa isa : paths) {
    CpuIsaScope scope(isa);
    LmnnProblem prob(X, t, c);
    Mat G, Gf, Gs;
    std::vector<int32_t> act;
    const double f = prob.eval(M, nullptr, &G, nullptr);
    const double ff = prob.eval_factored(L, nullptr, &Gf, &act);
    ASSERT_FALSE(act.empty());
    ASSERT_LT(act.size(), t.triplets.size()) << "pick data with inactive triplets";
    // Inactive triplets add nothing: the subset's value and gradient are the full ones.
    const double fs = prob.eval_factored(L, &act, &Gs, nullptr);
    const double tol = 1e-11 * std::max(1.0, std::abs(f));
    EXPECT_NEAR(ff, f, tol) << cpu_isa_name(isa);
    EXPECT_NEAR(fs, f, tol) << cpu_isa_name(isa);
    EXPECT_NEAR(f, oracle(X, t, M, c), tol) << cpu_isa_name(isa);
    for (size_t q = 0; q < G.a.size(); ++q) {
      EXPECT_NEAR(Gf.a[q], G.a[q], 1e-10 * std::max(1.0, std::abs(G.a[q]))) << cpu_isa_name(isa);
      EXPECT_NEAR(Gs.a[q], G.a[q], 1e-10 * std::max(1.0, std::abs(G.a[q]))) << cpu_isa_name(isa);
    }
  }
}

// Two classes separated along feature 0; feature 1 is large noise that makes
// Euclidean neighbours unreliable. LMNN must shrink feature 1 relative to 0.
void noisy_two_class(Mat& X, std::vector<int32_t>& y, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd;
  X = Mat(n, 2);
  y.assign(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < n; ++i) {
    y[i] = static_cast<int32_t>(i % 2);
    X(i, 0) = (y[i] ? 1.0 : -1.0) + 0.3 * nd(rng);
    X(i, 1) = 30.0 * nd(rng);
  }
}

TEST(LmnnSolver, SolverDescendsKeepsPsdAndDownWeightsNoise) {
  Mat X;
  std::vector<int32_t> y;
  noisy_two_class(X, y, 60, 11);
  Generator g(0);
  const Mined t = mine(X, y, {Mining::EPHN, 3, 1.4}, g);
  SolverOptions o;
  o.c = 1.0;
  const SolveResult r = solve_lmnn(X, t, o);
  LmnnProblem prob(X, t, o.c);
  EXPECT_LT(r.objective, 0.5 * prob.eval(Mat::identity(2), nullptr, nullptr, nullptr));
  EXPECT_NEAR(r.objective, oracle(X, t, r.M, o.c), 1e-9 * r.objective);
  EXPECT_GE(eigh(r.M).values.back(), -1e-12);
  EXPECT_LT(r.M(1, 1), 0.05 * r.M(0, 0)) << "the noise feature keeps weight";
  EXPECT_GT(r.iterations, 1);
  // k-NN with the learned metric beats Euclidean k-NN on fresh points.
  Mat Xt;
  std::vector<int32_t> yt;
  noisy_two_class(Xt, yt, 200, 12);
  const double learned = knn_accuracy(X, y, Xt, yt, psd_factor(r.M), 3);
  const double euclid = knn_accuracy(X, y, Xt, yt, Mat::identity(2), 3);
  EXPECT_GT(learned, euclid + 10.0);
  EXPECT_GT(learned, 90.0);
}

TEST(LmnnSolver, NoTermsLeavesTheIdentity) {
  const Mat X = random_mat(5, 3, 1);
  const SolveResult r = solve_lmnn(X, Mined{}, SolverOptions{});
  EXPECT_TRUE(r.converged);
  EXPECT_EQ(r.M.a, Mat::identity(3).a);
}

TEST(LmnnHierarchical, FitLearnsAUsefulComposedTransform) {
  Mat X;
  std::vector<int32_t> y;
  noisy_two_class(X, y, 80, 21);
  Generator g(3);
  SolverOptions o;
  HierOptions h;
  h.levels = 10;
  const HierResult r = hierarchical_fit(X, y, {Mining::BH, 3, 1.4}, o, h, g);
  ASSERT_EQ(r.L.rows, 2);
  EXPECT_EQ(r.levels.size(), 10u);
  int64_t trip = 0;
  for (const auto& lv : r.levels) trip += lv.triplets;
  EXPECT_GT(trip, 0);
  Mat Xt;
  std::vector<int32_t> yt;
  noisy_two_class(Xt, yt, 200, 22);
  EXPECT_GT(knn_accuracy(X, y, Xt, yt, r.L, 3), knn_accuracy(X, y, Xt, yt, Mat::identity(2), 3) + 10);
}

TEST(LmnnKnn, VotesAndTies) {
  Mat tr(5, 1), te(3, 1);
  const double xs[] = {0, 1, 2, 10, 11};
  for (int i = 0; i < 5; ++i) tr(i, 0) = xs[i];
  const std::vector<int32_t> ytr = {0, 1, 1, 2, 2};
  te(0, 0) = 0.2;   // k=1 -> 0; k=3 -> {0,1,1} -> 1
  te(1, 0) = 10.4;  // k=1 -> 2; k=3 -> {2,2,1} -> 2
  te(2, 0) = 0.4;   // k=2 -> {0,1} tie -> nearest (0)
  const Mat I = Mat::identity(1);
  EXPECT_DOUBLE_EQ(knn_accuracy(tr, ytr, te, {0, 2, 0}, I, 1), 100.0);
  EXPECT_DOUBLE_EQ(knn_accuracy(tr, ytr, te, {1, 2, 1}, I, 3), 100.0);
  EXPECT_DOUBLE_EQ(knn_accuracy(tr, ytr, te, {0, 2, 0}, I, 2), 100.0);
  Mat scale(1, 1, 3.0);  // a uniform scaling changes nothing
  EXPECT_DOUBLE_EQ(knn_accuracy(tr, ytr, te, {1, 2, 1}, scale, 3), 100.0);
  EXPECT_THROW(knn_accuracy(tr, ytr, te, {0, 0, 0}, I, 6), Error);
}

TEST(LmnnKnn, EuclideanBaselineChoosesKOnValidation) {
  // 1-D: class 0 near 0, class 1 near 10, one mislabelled class-1 point at 0.2.
  // A validation point at 0.1 is right for k = 3 and wrong for k = 1.
  StudySplit sp;
  sp.dataset = "toy";
  sp.train = Mat(6, 1);
  const double xs[6] = {0.0, 0.3, 0.2, 10.0, 10.3, 9.8};
  for (int i = 0; i < 6; ++i) sp.train(i, 0) = xs[i];
  sp.ytrain = {0, 0, 1, 1, 1, 1};
  sp.val = Mat(1, 1);
  sp.val(0, 0) = 0.19;
  sp.yval = {0};
  sp.test = Mat(2, 1);
  sp.test(0, 0) = 0.21;  // nearest is the mislabelled point
  sp.test(1, 0) = 9.9;
  sp.ytest = {0, 1};
  const EuclideanBaseline b = euclidean_baseline({sp, sp}, {1, 3});
  EXPECT_EQ(b.dataset, "toy");
  ASSERT_EQ(b.chosen_k.size(), 2u);
  EXPECT_EQ(b.chosen_k[0], 3);
  ASSERT_EQ(b.test_at.size(), 2u);
  EXPECT_DOUBLE_EQ(b.test_at[0][0], 50.0);  // k = 1: the 0.21 point goes wrong
  EXPECT_DOUBLE_EQ(b.test_at[0][1], 100.0);
  EXPECT_DOUBLE_EQ(b.test[0], 100.0);
}

TEST(LmnnData, SplitsHaveTheProtocolSizesAndFollowTheSeed) {
  const SplitIdx a = iris_split(150, 0), b = iris_split(150, 0), c = iris_split(150, 1);
  EXPECT_EQ(a.train.size(), 105u);
  EXPECT_EQ(a.val.size(), 23u);
  EXPECT_EQ(a.test.size(), 22u);
  std::set<int64_t> all(a.train.begin(), a.train.end());
  all.insert(a.val.begin(), a.val.end());
  all.insert(a.test.begin(), a.test.end());
  EXPECT_EQ(all.size(), 150u);
  EXPECT_EQ(a.test, b.test);
  EXPECT_NE(a.test, c.test);

  std::vector<int32_t> orl;
  for (int s = 0; s < 40; ++s)
    for (int i = 0; i < 10; ++i) orl.push_back(s);
  const SplitIdx o = orl_split(orl, 3);
  ASSERT_EQ(o.train.size(), 240u);
  EXPECT_EQ(o.val.size(), 80u);
  EXPECT_EQ(o.test.size(), 80u);
  for (int64_t i : o.train) EXPECT_LT(i % 10, 6) << "training images are the first six";
  for (int64_t i : o.test) EXPECT_GE(i % 10, 6);
  std::vector<int> per_subject(40, 0);
  for (int64_t i : o.test) ++per_subject[orl[i]];
  for (int v : per_subject) EXPECT_EQ(v, 2);
  // The authors' fixed split: 7-8 validation, 9-10 test (0-based 6-7, 8-9) in every seed.
  for (uint64_t seed : {1u, 2u, 3u}) {
    const SplitIdx f = orl_split(orl, seed, true);
    EXPECT_EQ(f.train, o.train);
    ASSERT_EQ(f.val.size(), 80u);
    ASSERT_EQ(f.test.size(), 80u);
    for (int64_t i : f.val) EXPECT_TRUE(i % 10 == 6 || i % 10 == 7) << i;
    for (int64_t i : f.test) EXPECT_TRUE(i % 10 == 8 || i % 10 == 9) << i;
  }
  EXPECT_NE(orl_split(orl, 1).test, orl_split(orl, 2).test) << "the protocol's split follows the seed";

  std::vector<int32_t> digits;
  for (int i = 0; i < 3000; ++i) digits.push_back(i % 10);
  const SplitIdx m = mnist_split(digits, 40, 10, 10, 0);
  EXPECT_EQ(m.train.size(), 400u);
  EXPECT_EQ(m.val.size(), 100u);
  EXPECT_EQ(m.test.size(), 100u);
  std::set<int64_t> used(m.train.begin(), m.train.end());
  used.insert(m.val.begin(), m.val.end());
  used.insert(m.test.begin(), m.test.end());
  EXPECT_EQ(used.size(), 600u) << "disjoint";
  std::vector<int> cnt(10, 0);
  for (int64_t i : m.train) ++cnt[digits[i]];
  for (int v : cnt) EXPECT_EQ(v, 40);

  // The authors' MNIST subset (--mnist-subset first): rows 0-399 train, 500-599
  // validation (training images), 600-699 the first 100 test images.
  const SplitIdx first = mnist_first_split();
  ASSERT_EQ(first.train.size(), 400u);
  ASSERT_EQ(first.val.size(), 100u);
  ASSERT_EQ(first.test.size(), 100u);
  for (size_t i = 0; i < 400; ++i) EXPECT_EQ(first.train[i], static_cast<int64_t>(i));
  for (size_t i = 0; i < 100; ++i) {
    EXPECT_EQ(first.val[i], 500 + static_cast<int64_t>(i));
    EXPECT_EQ(first.test[i], kMnistFirstTrain + static_cast<int64_t>(i));
  }
  EXPECT_EQ(kMnistFirstTrain + kMnistFirstTest, 700);
}

}  // namespace
}  // namespace mn::lmnn
