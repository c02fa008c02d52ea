// Results of the informed-pair-selection study: per method and evaluation
// epoch the mean and spread of the test accuracy over folds, the one-tailed
// paired t-test against BASE at the same epoch, and the outputs a user reads:
// results.md (the study's Table 2 MNIST rows beside ours), results.json and
// Figure 2 (accuracy vs epoch, six lines, a band of +-1 sd over folds).
#pragma once
#include <string>
#include <vector>

#include "experiments/pair_selection/stats.h"
#include "experiments/pair_selection/study.h"

namespace mn::pairsel {

struct Curve {
  Method method = Method::Base;
  std::vector<int> epochs;
  std::vector<double> mean, sd, nearest_mean, abstain_mean;  // accuracy in %
  std::vector<std::vector<double>> per_fold;                 // [epoch][fold], %
  std::vector<TTest> vs_base;  // empty when BASE was not run
  double seconds = 0.0;        // summed over folds
};

// Groups runs by method (in Method order), folds in fold order. Every method
// must have the same folds and epochs (throws otherwise).
std::vector<Curve> summarise(const std::vector<RunResult>& runs);

// Runs back from the metrics.jsonl written by the driver (one line per method x
// fold x evaluation). Only folds with every evaluation of every method that
// occurs are kept (an interrupted study is summarised over its complete
// folds); `dropped` receives the number of incomplete folds left out.
std::vector<RunResult> read_runs_jsonl(const std::string& path, int* dropped = nullptr);
// For --resume: every run of the file with all its evaluation points (a run
// cut short by a kill is left out), and those runs' lines (to rewrite the file).
std::vector<RunResult> read_finished_runs(const std::string& path, std::string* kept_lines = nullptr);

// The study's Table 2, MNIST rows (accuracy %, epochs 25/50/75/100), for the
// six methods in Method order; `significant` marks the source's asterisks.
struct PaperRow {
  int epoch;
  double acc[kNumMethods];
  bool significant[kNumMethods];
};
const std::vector<PaperRow>& paper_table_mnist();

// results.md body: the table (ours, with '*' when p_greater < alpha, beside
// the paper's), then the full curves. `header` goes first (command, machine).
std::string results_markdown(const std::vector<Curve>& curves, double alpha,
                             const std::string& header);
std::string results_json(const std::vector<Curve>& curves, double alpha,
                         const std::string& config_json);
// Figure 2 with gnuplot (data and script kept next to the PNG). False when
// gnuplot is missing or fails.
bool plot_figure(const std::string& png_path, const std::vector<Curve>& curves);

}  // namespace mn::pairsel
