// One cell of the LMNN study's Table 1 for one seed: train a metric with a
// mining method (plain or hierarchical), pick k and c on the validation split
// from a small grid, and score the chosen model by k-NN on the test split.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "experiments/lmnn_mining/datasets.h"
#include "experiments/lmnn_mining/hierarchical.h"
#include "experiments/lmnn_mining/miners.h"
#include "experiments/lmnn_mining/solver.h"

namespace mn::lmnn {

// k-NN accuracy (%) of `test` against `train` in the projected space X L:
// majority vote of the k nearest; a tie goes to the tied class of the nearest.
double knn_accuracy(const Mat& train, const std::vector<int32_t>& ytrain, const Mat& test,
                    const std::vector<int32_t>& ytest, const Mat& L, int64_t k);

struct TrainSettings {
  Mining mining = Mining::BH;
  bool hierarchical = false;
  double lambda = 1.4;
  SolverOptions solver;
  HierOptions hier;
};

// Whether the metric M = L L^T is other than a multiple of the identity (k-NN
// is scale-free, so c I is still the Euclidean metric): |M / (tr M / d) - I|_F
// above 1e-9 sqrt(d), far above the rounding of a composed identity (~1e-15)
// and far below any level that learned something.
bool metric_differs_from_identity(const Mat& L);

// What one fit did, for the report: every cell says whether it learned anything.
struct FitStats {
  int64_t triplets = 0;              // mined (summed over levels when hierarchical)
  int64_t iterations = 0;            // solver steps (summed over levels)
  int64_t levels = 0;                // hierarchical: T
  int64_t levels_with_triplets = 0;  // hierarchical: levels whose spheres gave a triplet
  bool metric_changed = false;       // metric_differs_from_identity(L)
  std::vector<LevelStats> level;     // hierarchical: per level (sigma, r, triplets, ...)
};

struct TrainedMetric {
  Mat L;              // (d, d) project with X L
  double seconds = 0;      // training wall time: mining + solve (+ levels)
  double cpu_seconds = 0;  // CPU time of the fitting thread (the machine is shared)
  FitStats stats;
};
// The random stream of one fit: one per (seed, k), so the same model whatever
// thread fits it (k-NS draws and the spheres), and the same mined terms for
// any tool that replays a cell (lmnn_sdp_export).
Generator fit_generator(uint64_t seed, int64_t k);
// Trains on split.train with k and c; `seed` drives k-NS and the spheres.
TrainedMetric train_metric(const StudySplit& split, const TrainSettings& s, int64_t k, double c,
                           uint64_t seed);

struct CellRun {
  int64_t k = 0;
  double c = 0;
  double val_accuracy = 0, test_accuracy = 0;
  double train_seconds = 0;   // the chosen model's training wall time
  double train_cpu_seconds = 0;  // ... and its CPU time
  double select_seconds = 0;  // the seed's grid: its fits' wall times summed (with
                              // --select first, a refitted seed's one fit)
  FitStats stats;             // the chosen model's
  Mat L;                      // the chosen model's transform (for the ghost faces)
};
// One cell over seeds (splits[i] drawn with seeds[i]): with select_each every
// split fits the whole (k, c) grid and keeps its best validation accuracy
// (ties: the earlier grid point, k then c); otherwise only the first split
// does, and the others are refitted once with its k and c. Every fit of the
// cell shares the library's thread pool; each run reports its model's test
// accuracy.
std::vector<CellRun> run_seeds(const std::vector<StudySplit>& splits,
                               const std::vector<uint64_t>& seeds, const TrainSettings& s,
                               const std::vector<int64_t>& ks, const std::vector<double>& cs,
                               bool select_each);
// The reference every cell is read against: k-NN with the Euclidean metric
// (L = I, nothing learned) on the same splits. Per seed, k is chosen on the
// validation split from the k grid (ties: the smaller k) and scored on the
// test split; test accuracy at every k of the grid is kept too (the authors'
// code fixes k = 3 for the hierarchical runs).
struct EuclideanBaseline {
  std::string dataset;
  std::vector<int64_t> ks;                  // the grid
  std::vector<int64_t> chosen_k;            // per seed
  std::vector<double> test;                 // per seed, at the chosen k (%)
  std::vector<std::vector<double>> test_at; // [seed][grid index] (%)
};
EuclideanBaseline euclidean_baseline(const std::vector<StudySplit>& splits,
                                     const std::vector<int64_t>& ks);

// run_seeds for one split.
CellRun run_cell(const StudySplit& split, const TrainSettings& s, const std::vector<int64_t>& ks,
                 const std::vector<double>& cs, uint64_t seed);

}  // namespace mn::lmnn
