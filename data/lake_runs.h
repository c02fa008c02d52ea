// Lake et al.'s official 20-way one-shot test (omniglot/all_runs/): 20 runs, each
// with 20 candidate images (training/classNN.png, one per character) and 20
// queries (test/itemNN.png), class_labels.txt mapping each query to its
// candidate. 400 trials. Also the scoring harness shared with data/tasks.h, and
// Lake's Modified Hausdorff Distance baseline (38.8 % error).
//
// Position independence: a trial is scored from the query's row of the cost
// matrix only through "how many candidates score strictly better than the true
// one, and how many tie with it": correct = 1 / (1 + ties) when none is
// strictly better (the expected accuracy under uniformly random tie breaking),
// else 0. Permuting the candidates therefore cannot change any result (tested).
// Lake's demo takes argmin over candidates in sorted file order instead, which
// breaks ties by position; with MHD on these images there are no exact ties
// among minima, so both give 38.8 %.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace mn::data {

struct LakeRun {
  int run = 0;                          // 1..20
  std::vector<std::string> candidate_files;  // (20) "runNN/training/classNN.png", sorted
  std::vector<std::string> query_files;      // (20) "runNN/test/itemNN.png", sorted
  std::vector<int32_t> answer;          // (20) query i's true candidate index
  Tensor candidates;                    // (20, H, W) uint8
  Tensor queries;                       // (20, H, W) uint8
};

// Parses and loads every runNN/ under `all_runs_dir` (expects 20 runs of 20
// trials unless expect_runs <= 0). Throws naming the file on a missing or
// malformed class_labels.txt, an unknown or repeated file, or a bad image.
std::vector<LakeRun> load_lake_runs(const std::string& all_runs_dir, int expect_runs = 20);
// One run's class_labels.txt from text (no images loaded): files and answers.
// `labels` names the file in errors, `run_name` is the folder ("run01").
LakeRun parse_lake_run_labels(const std::string& text, const std::string& labels,
                              const std::string& run_name);

enum class ScoreKind { Cost, Similarity };  // lower = closer, or higher = closer

struct OneShotResult {
  int64_t trials = 0;
  double correct = 0;            // expected number correct (fractional on ties)
  double error_percent = 0;      // 100 * (1 - correct / trials)
  std::vector<double> group_error_percent;  // per run (Lake) or per task (tasks.h)
  int64_t ties = 0;              // trials whose best score was tied with the truth
};

// One trial's score: `row` (n candidates) of costs/similarities, true index.
double score_trial(const double* row, int64_t n, int64_t truth, ScoreKind kind, bool* tied = nullptr);

// Scores a group of trials: matrix (Q, C) row-major, answer (Q).
void accumulate_group(const std::vector<double>& matrix, int64_t Q, int64_t C,
                      const std::vector<int32_t>& answer, ScoreKind kind, OneShotResult& r);

// Pairwise function on two (H, W) uint8 images.
using PairFn = std::function<double(const Tensor& query, const Tensor& candidate)>;
// Batched function: (Q, H, W) queries x (C, H, W) candidates -> (Q, C) scores (any
// float dtype, any device; read back to the host).
using BatchFn = std::function<Tensor(const Tensor& queries, const Tensor& candidates)>;

OneShotResult evaluate_lake_runs(const std::vector<LakeRun>& runs, const PairFn& fn, ScoreKind kind);
OneShotResult evaluate_lake_runs_batched(const std::vector<LakeRun>& runs, const BatchFn& fn,
                                         ScoreKind kind);

// ---- Modified Hausdorff Distance (Dubuisson & Jain 1994), as in Lake's demo ----
// Ink pixels (value < 128: black ink on white) as (row, col) points, minus their
// mean (centred): (n, 2) row-major in `pts`.
std::vector<double> ink_points_centered(const Tensor& image_u8);
// max(mean_a min_b |a - b|, mean_b min_a |a - b|); +inf if either set is empty.
double modified_hausdorff(const std::vector<double>& a, const std::vector<double>& b);
// MHD of two (H, W) uint8 images (centred ink point sets).
double mhd_images(const Tensor& a, const Tensor& b);
// All pairs: (Q, H, W) x (C, H, W) uint8 -> (Q, C) float64, parallel over pairs.
Tensor mhd_matrix(const Tensor& queries, const Tensor& candidates);

}  // namespace mn::data
