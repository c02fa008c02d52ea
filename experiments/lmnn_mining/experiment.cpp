// Training, k-NN scoring and validation-grid selection of one study cell; see experiment.h.
#include "experiments/lmnn_mining/experiment.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
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

bool metric_differs_from_identity(const Mat& L) {
  const Mat M = matmul(L, L, false, true);
  const int64_t d = M.rows;
  double tr = 0;
  for (int64_t j = 0; j < d; ++j) tr += M(j, j);
  if (!(tr > 0)) return true;  // M = 0 (or not finite) is no multiple of I worth the name
  double dev = 0;
  for (int64_t a = 0; a < d; ++a)
    for (int64_t b = 0; b < d; ++b) {
      const double e = M(a, b) * static_cast<double>(d) / tr - (a == b ? 1.0 : 0.0);
      dev += e * e;
    }
  return std::sqrt(dev) > 1e-9 * std::sqrt(static_cast<double>(d));
}

namespace {
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
}  // namespace

Generator fit_generator(uint64_t seed, int64_t k) {
  return Generator(seed * 7919ULL + static_cast<uint64_t>(k) + 17ULL);
}

TrainedMetric train_metric(const StudySplit& split, const TrainSettings& s, int64_t k, double c,
                           uint64_t seed) {
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = thread_cpu_seconds();
  Generator g = fit_generator(seed, k);
  MinerParams mp{s.mining, k, s.lambda};
  SolverOptions so = s.solver;
  so.c = c;
  TrainedMetric out;
  FitStats& fs = out.stats;
  if (s.hierarchical) {
    HierResult h = hierarchical_fit(split.train, split.ytrain, mp, so, s.hier, g);
    out.L = std::move(h.L);
    fs.levels = static_cast<int64_t>(h.levels.size());
    for (const LevelStats& lv : h.levels) {
      fs.triplets += lv.triplets;
      fs.iterations += lv.iterations;
      fs.levels_with_triplets += lv.triplets > 0;
    }
    fs.level = std::move(h.levels);
  } else {
    const Mined m = mine(split.train, split.ytrain, mp, g);
    SolveResult r = solve_lmnn(split.train, m, so);
    out.L = std::move(r.L);
    fs.triplets = r.triplets;
    fs.iterations = r.iterations;
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.cpu_seconds = thread_cpu_seconds() - c0;
  fs.metric_changed = metric_differs_from_identity(out.L);
  return out;
}

namespace {

struct GridFit {
  size_t split = 0;
  int64_t k = 0;
  double c = 0;
  TrainedMetric m;
  double val = 0;
};

// Fits every job over the pool. The fits' costs differ by two orders of
// magnitude (k = 10 hierarchical k-BA against k = 1 k-BH), so each worker pulls
// the next job from a shared counter (parallel_for's fixed chunks left a core
// idle behind one heavy chunk), and the jobs run largest k first so the tail is
// short. Each fit's random stream depends on (seed, k) only: the same models
// whatever the thread count or order.
void fit_jobs(std::vector<GridFit>& jobs, const std::vector<StudySplit>& splits,
              const std::vector<uint64_t>& seeds, const TrainSettings& s) {
  std::vector<size_t> order(jobs.size());
  for (size_t j = 0; j < order.size(); ++j) order[j] = j;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return jobs[a].k > jobs[b].k; });
  std::atomic<size_t> next{0};
  parallel_for(0, num_threads(), 1, [&](int64_t, int64_t) {
    for (size_t q; (q = next.fetch_add(1)) < order.size();) {
      GridFit& j = jobs[order[q]];
      const StudySplit& sp = splits[j.split];
      j.m = train_metric(sp, s, j.k, j.c, seeds[j.split]);
      j.val = knn_accuracy(sp.train, sp.ytrain, sp.val, sp.yval, j.m.L, j.k);
    }
  });
}

// The best validation accuracy among one split's jobs (ties: the earlier grid
// point, k then c), scored on that split's test set.
CellRun choose(const std::vector<GridFit>& jobs, size_t split, const StudySplit& sp) {
  const GridFit* best = nullptr;
  double grid = 0;
  for (const GridFit& j : jobs) {
    if (j.split != split) continue;
    grid += j.m.seconds;
    if (!best || j.val > best->val) best = &j;
  }
  MN_CHECK(best != nullptr, "lmnn: no fit for split ", split);
  CellRun r;
  r.k = best->k;
  r.c = best->c;
  r.val_accuracy = best->val;
  r.test_accuracy = knn_accuracy(sp.train, sp.ytrain, sp.test, sp.ytest, best->m.L, r.k);
  r.train_seconds = best->m.seconds;
  r.train_cpu_seconds = best->m.cpu_seconds;
  r.stats = best->m.stats;
  r.L = best->m.L;
  r.select_seconds = grid;
  return r;
}

}  // namespace

std::vector<CellRun> run_seeds(const std::vector<StudySplit>& splits,
                               const std::vector<uint64_t>& seeds, const TrainSettings& s,
                               const std::vector<int64_t>& ks, const std::vector<double>& cs,
                               bool select_each) {
  MN_CHECK(!ks.empty() && !cs.empty(), "lmnn: the k and c grids must not be empty");
  MN_CHECK(splits.size() == seeds.size() && !splits.empty(), "lmnn: ", splits.size(),
           " splits for ", seeds.size(), " seeds");
  std::vector<GridFit> jobs;
  for (size_t sp = 0; sp < (select_each ? splits.size() : 1); ++sp)
    for (int64_t k : ks)
      for (double c : cs) jobs.push_back({sp, k, c, {}, 0.0});
  fit_jobs(jobs, splits, seeds, s);
  std::vector<CellRun> runs;
  for (size_t sp = 0; sp < (select_each ? splits.size() : 1); ++sp)
    runs.push_back(choose(jobs, sp, splits[sp]));
  if (!select_each && splits.size() > 1) {  // the first seed's k and c, refitted once per seed
    std::vector<GridFit> refits;
    for (size_t sp = 1; sp < splits.size(); ++sp) refits.push_back({sp, runs[0].k, runs[0].c, {}, 0.0});
    fit_jobs(refits, splits, seeds, s);
    for (size_t sp = 1; sp < splits.size(); ++sp) runs.push_back(choose(refits, sp, splits[sp]));
  }
  return runs;
}

EuclideanBaseline euclidean_baseline(const std::vector<StudySplit>& splits,
                                     const std::vector<int64_t>& ks) {
  MN_CHECK(!ks.empty() && !splits.empty(), "lmnn: the Euclidean baseline needs a k grid and a split");
  EuclideanBaseline b;
  b.dataset = splits[0].dataset;
  b.ks = ks;
  for (const StudySplit& sp : splits) {
    const Mat I = Mat::identity(sp.train.cols);
    size_t best = 0;
    double best_val = -1;
    std::vector<double> at;
    for (size_t q = 0; q < ks.size(); ++q) {
      const double val = knn_accuracy(sp.train, sp.ytrain, sp.val, sp.yval, I, ks[q]);
      if (val > best_val || (val == best_val && ks[q] < ks[best])) {
        best_val = val;
        best = q;
      }
      at.push_back(knn_accuracy(sp.train, sp.ytrain, sp.test, sp.ytest, I, ks[q]));
    }
    b.chosen_k.push_back(ks[best]);
    b.test.push_back(at[best]);  // the test accuracy at the chosen k, already computed
    b.test_at.push_back(std::move(at));
  }
  return b;
}

CellRun run_cell(const StudySplit& split, const TrainSettings& s, const std::vector<int64_t>& ks,
                 const std::vector<double>& cs, uint64_t seed) {
  return run_seeds({split}, {seed}, s, ks, cs, true).at(0);
}

}  // namespace mn::lmnn
