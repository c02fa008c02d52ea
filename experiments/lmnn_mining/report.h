// Results of the LMNN triplet-mining study: the paper's Table 1 (transcribed in
// docs/study-protocols.md), our per-seed runs per cell, and the outputs built
// from them: results.md (the study's accuracy and time beside ours, mean ± sd
// over seeds, speed ratios), results.json, and the ghost-faces figure (Fig. 2).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "experiments/common/json.h"
#include "experiments/lmnn_mining/experiment.h"
#include "experiments/lmnn_mining/miners.h"

namespace mn::lmnn {

// The paper's accuracy (%) and time (s); NaN where Table 1 has a dash.
struct PaperCell {
  double accuracy, seconds;
};
PaperCell paper_cell(const std::string& dataset, bool hierarchical, Mining m);

// "paper / ours" as the report prints it: whole numbers from 10x, one decimal
// from 1x, two below 1x (ours slower: 0.52x, never "1x" or "0x"); "–" for a dash.
std::string speed_ratio(double paper_s, double ours_s);

struct CellResult {
  std::string dataset;
  Mining mining = Mining::BH;
  bool hierarchical = false;
  std::vector<uint64_t> seeds;
  std::vector<CellRun> runs;  // one per seed, in seed order
};

struct Summary {
  double acc_first = 0, acc_mean = 0, acc_sd = 0;  // % (first seed, mean, sample sd)
  double train_mean = 0, train_cpu_mean = 0, select_mean = 0;  // s
  // What the chosen models did, mean over seeds (levels: hierarchical only).
  double triplets_mean = 0, iterations_mean = 0, levels_with_triplets_mean = 0;
  int64_t levels = 0;                  // T of the first seed (the same for all)
  int64_t seeds_without_triplets = 0;  // seeds whose chosen model mined no triplet
  int64_t seeds_metric_changed = 0;    // seeds whose metric is not a multiple of I
};
Summary summarise(const CellResult& c);

// Our cell against the paper's single number, both ways. The paper prints two
// decimals, so its value is known to +-0.005: that rounding is the tolerance.
//   Reproduced  |paper - mean| <= sd + tol
//   PaperAbove  paper > mean + sd + tol   (ours lower)
//   PaperBelow  paper < mean - sd - tol   (ours higher)
//   NoPaper     the paper has no number (a dash): not counted
//   NoTriplets  a seed's chosen model mined no triplet: flagged, not scored
//               (it is plain Euclidean k-NN, not the method)
enum class Verdict { Reproduced, PaperAbove, PaperBelow, NoPaper, NoTriplets };
constexpr double kPaperRoundingTol = 0.005;
Verdict compare_to_paper(double paper, double mean, double sd, double tol = kPaperRoundingTol);
Verdict verdict(const CellResult& c);
std::string verdict_name(Verdict v);  // "reproduced", "paper above", ...

struct VerdictCounts {
  int64_t reproduced = 0, paper_above = 0, paper_below = 0, no_paper = 0, no_triplets = 0;
};
// Counts over the cells of one data set and approach ("" / any: every cell).
VerdictCounts count_verdicts(const std::vector<CellResult>& cells, const std::string& dataset = "",
                             int hierarchical = -1);

struct RunInfo {
  std::string command, machine, cpu_model, commit, load, started, config_json;
  double wall_seconds = 0;
};
// Per level of a hierarchical fit (arrays of sigma, sigma_after, r, n_s, p,
// inside, sampled, triplets, iterations), and one seed's run, for the JSON outputs.
exp::Json levels_json(const FitStats& f);
exp::Json run_json(uint64_t seed, const CellRun& r);
// One cell's summary (the numbers of results.md, the verdict, the first seed's
// levels): results.json's cell without its runs, and the cell's metrics.jsonl line.
exp::Json cell_json(const CellResult& c);
// `baselines`: the Euclidean k-NN reference per data set (a section of its own).
std::string results_markdown(const std::vector<CellResult>& cells, const RunInfo& info,
                             const std::vector<EuclideanBaseline>& baselines = {});
std::string results_json(const std::vector<CellResult>& cells, const RunInfo& info,
                         const std::vector<EuclideanBaseline>& baselines = {});

// Fig. 2: one row per ORL cell (first seed's chosen model), ten columns: column
// j of L mapped back through the eigenfaces (D, q), each rescaled to [0, 255];
// a 2-pixel white gap between tiles. Returns false when there is no ORL cell.
bool write_ghost_faces(const std::string& png_path, const std::vector<CellResult>& orl_cells,
                       const Mat& eigenfaces, int image_h, int image_w);

}  // namespace mn::lmnn
