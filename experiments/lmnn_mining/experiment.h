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

struct TrainedMetric {
  Mat L;              // (d, d) project with X L
  double seconds = 0;      // training wall time: mining + solve (+ levels)
  double cpu_seconds = 0;  // CPU time of the fitting thread (the machine is shared)
  int64_t triplets = 0, iterations = 0, levels = 0;
};
// Trains on split.train with k and c; `seed` drives k-NS and the spheres.
TrainedMetric train_metric(const StudySplit& split, const TrainSettings& s, int64_t k, double c,
                           uint64_t seed);

struct CellRun {
  int64_t k = 0;
  double c = 0;
  double val_accuracy = 0, test_accuracy = 0;
  double train_seconds = 0;   // the chosen model's training wall time
  double train_cpu_seconds = 0;  // ... and its CPU time
  double select_seconds = 0;  // the whole grid (all k x c fits)
  int64_t triplets = 0, iterations = 0, levels = 0;
  Mat L;                      // the chosen model's transform (for the ghost faces)
};
// Fits every (k, c) of the grid (in parallel over the library's thread pool),
// chooses the best validation accuracy (ties: the earlier grid point, k then c)
// and reports that model's test accuracy.
CellRun run_cell(const StudySplit& split, const TrainSettings& s, const std::vector<int64_t>& ks,
                 const std::vector<double>& cs, uint64_t seed);

}  // namespace mn::lmnn
