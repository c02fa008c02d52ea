// Results of the LMNN triplet-mining study: the paper's Table 1 (transcribed in
// docs/study-protocols.md), our per-seed runs per cell, and the outputs built
// from them: results.md (the study's accuracy and time beside ours, mean ± sd
// over seeds, speed ratios), results.json, and the ghost-faces figure (Fig. 2).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "experiments/lmnn_mining/experiment.h"
#include "experiments/lmnn_mining/miners.h"

namespace mn::lmnn {

// The paper's accuracy (%) and time (s); NaN where Table 1 has a dash.
struct PaperCell {
  double accuracy, seconds;
};
PaperCell paper_cell(const std::string& dataset, bool hierarchical, Mining m);

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
};
Summary summarise(const CellResult& c);
// The paper's value lies within our mean ± sd, or below it.
bool matches_or_beats(const CellResult& c);

struct RunInfo {
  std::string command, machine, load, started, config_json;
  double wall_seconds = 0;
};
std::string results_markdown(const std::vector<CellResult>& cells, const RunInfo& info);
std::string results_json(const std::vector<CellResult>& cells, const RunInfo& info);

// Fig. 2: one row per ORL cell (first seed's chosen model), ten columns: column
// j of L mapped back through the eigenfaces (D, q), each rescaled to [0, 255];
// a 2-pixel white gap between tiles. Returns false when there is no ORL cell.
bool write_ghost_faces(const std::string& png_path, const std::vector<CellResult>& orl_cells,
                       const Mat& eigenfaces, int image_h, int image_w);

}  // namespace mn::lmnn
