// Training, k-NN scoring and validation-grid selection of one study cell; see experiment.h.
#include "experiments/lmnn_mining/experiment.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <map>

#include "runtime/error.h"
#include "runtime/parallel.h"

namespace mn::lmnn {

double knn_accuracy(const Mat& train, const std::vector<int32_t>& ytrain, const Mat& test,
                    const std::vector<int32_t>& ytest, const Mat& L, int64_t k) {
  MN_CHECK(train.cols == L.rows && test.cols == L.rows, "lmnn k-NN: data of ", train.cols, " / ",
           test.cols, " features, transform of ", L.rows, " rows");
  MN_CHECK(k >= 1 && k <= train.rows, "lmnn k-NN: k = ", k, " with ", train.rows, " training points");
  if (test.rows == 0) return 0.0;
  const Mat A = matmul(train, L), B = matmul(test, L);
  const Mat G = matmul(B, A, false, true);  // (nt, n)
  std::vector<double> na(static_cast<size_t>(A.rows), 0.0);
  for (int64_t i = 0; i < A.rows; ++i)
    for (int64_t j = 0; j < A.cols; ++j) na[i] += A(i, j) * A(i, j);
  int64_t correct = 0;
  std::vector<std::pair<double, int64_t>> dist(static_cast<size_t>(A.rows));
  for (int64_t t = 0; t < B.rows; ++t) {
    // |b|^2 is the same for every candidate: rank by |a|^2 - 2 a.b.
    for (int64_t i = 0; i < A.rows; ++i) dist[i] = {na[i] - 2.0 * G(t, i), i};
    std::partial_sort(dist.begin(), dist.begin() + k, dist.end());
    std::map<int32_t, int64_t> votes;
    for (int64_t r = 0; r < k; ++r) ++votes[ytrain[dist[r].second]];
    int64_t best = 0;
    for (const auto& [cls, v] : votes) best = std::max(best, v);
    int32_t pred = -1;
    for (int64_t r = 0; r < k && pred < 0; ++r) {  // nearest among the tied classes
      const int32_t cls = ytrain[dist[r].second];
      if (votes[cls] == best) pred = cls;
    }
    correct += pred == ytest[t];
  }
  return 100.0 * static_cast<double>(correct) / static_cast<double>(B.rows);
}

namespace {
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
}  // namespace

TrainedMetric train_metric(const StudySplit& split, const TrainSettings& s, int64_t k, double c,
                           uint64_t seed) {
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = thread_cpu_seconds();
  // One stream per (seed, k): the same model whatever thread fits it.
  Generator g(seed * 7919ULL + static_cast<uint64_t>(k) + 17ULL);
  MinerParams mp{s.mining, k, s.lambda};
  SolverOptions so = s.solver;
  so.c = c;
  TrainedMetric out;
  if (s.hierarchical) {
    HierResult h = hierarchical_fit(split.train, split.ytrain, mp, so, s.hier, g);
    out.L = std::move(h.L);
    out.levels = static_cast<int64_t>(h.levels.size());
    for (const LevelStats& lv : h.levels) {
      out.triplets += lv.triplets;
      out.iterations += lv.iterations;
    }
  } else {
    const Mined m = mine(split.train, split.ytrain, mp, g);
    SolveResult r = solve_lmnn(split.train, m, so);
    out.L = std::move(r.L);
    out.triplets = r.triplets;
    out.iterations = r.iterations;
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.cpu_seconds = thread_cpu_seconds() - c0;
  return out;
}

CellRun run_cell(const StudySplit& split, const TrainSettings& s, const std::vector<int64_t>& ks,
                 const std::vector<double>& cs, uint64_t seed) {
  MN_CHECK(!ks.empty() && !cs.empty(), "lmnn: the k and c grids must not be empty");
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t n = static_cast<int64_t>(ks.size() * cs.size());
  std::vector<TrainedMetric> fits(static_cast<size_t>(n));
  std::vector<double> val(static_cast<size_t>(n));
  parallel_for(0, n, 1, [&](int64_t b, int64_t e) {
    for (int64_t q = b; q < e; ++q) {
      const int64_t k = ks[q / cs.size()];
      fits[q] = train_metric(split, s, k, cs[q % cs.size()], seed);
      val[q] = knn_accuracy(split.train, split.ytrain, split.val, split.yval, fits[q].L, k);
    }
  });
  const int64_t best = std::max_element(val.begin(), val.end()) - val.begin();
  CellRun r;
  r.k = ks[best / cs.size()];
  r.c = cs[best % cs.size()];
  r.val_accuracy = val[best];
  const TrainedMetric& f = fits[best];
  r.test_accuracy = knn_accuracy(split.train, split.ytrain, split.test, split.ytest, f.L, r.k);
  r.train_seconds = f.seconds;
  r.train_cpu_seconds = f.cpu_seconds;
  r.triplets = f.triplets;
  r.iterations = f.iterations;
  r.levels = f.levels;
  r.L = f.L;
  r.select_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace mn::lmnn
