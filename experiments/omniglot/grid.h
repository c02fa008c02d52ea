// omniglot_grid: the Omniglot study's every table row and every ablation of the
// paper ("One-shot learning with Omniglot", G81; protocol in
// shared/docs/study-protocols.md) as one grid of runs of omniglot_triplet and
// omniglot_siamese, at two scales of one protocol:
//   full  the paper's: Koch's net on 105x105 images, 50 epochs x 500 iterations x 50
//         triplets, validation (10,000 triplets, 320 20-way tasks) every epoch; a GPU's job.
//   paper-length  the cpu scale's model with the paper's length and validation: 50 x 500
//         x 50 triplets, 10,000 validation triplets; about an hour a row on 2 cores.
//   cpu   the same training procedure (triplet batches of 50, the row's loss and
//         sampler, Adam at the paper's rates and decays, validation on the validation
//         alphabets, Lake's 400 trials once at the end) with what 2 cores need changed:
//         the conv4 trunk on 28x28 images with Koch's head (a dense sigmoid embedding),
//         fewer epochs of fewer iterations (grid_rows.cpp says how they were chosen).
// Each row is a named set of the binaries' existing flags (GridRow::flags), changing
// from the paper's default model (Kumar's loss, random triplets, full sharing, ReLU,
// no normalisation, no dropout) only what the paper's row changes (GridRow::differs).
// Rows the paper reports twice (the Kumar row is also the ReLU, full-share, random and
// un-normalised row) are aliases that reuse one set of runs.
//
// A cell is one run: OUT/<row>/seed<N>/ (checkpoints, metrics.jsonl, summary.json with
// the run's provenance). Finished cells (summary.json) are skipped, stopped ones resumed
// (--resume), so the same command continues an interrupted grid. Then OUT/results.md:
// every row beside the paper's number (mean ± sd over seeds, n, the scale, Lake's 400
// trials), Kendall's tau of each table's ranking against the paper's, which of the
// paper's claims hold at this scale, Figures 3-7 (OUT/figure<N>.png), and each cell's
// command, commit and machine.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "experiments/common/grid_util.h"
#include "experiments/common/json.h"

namespace mn::exp::omniglot_grid {

struct GridRow {
  std::string id;     // "t1-kumar": folder and --rows name
  std::string group;  // "Table 1", "Table 2", "Activations", ...
  std::string label;  // the paper's words
  bool siamese = false;
  std::vector<std::string> flags;    // flags beside the scale's base (the paper's row)
  std::vector<std::string> differs;  // config keys this row changes from the default model
  double paper_val = -1;             // the paper's one-shot validation %, < 0: none given
  double paper_eval = -1;            // the paper's evaluation % (Table 2), < 0: none
  std::string alias;                 // another row with the same configuration: its runs
  int paper_epochs = 50;             // 15 for Figure 4's rows
  bool table_row = false;            // Tables 1-2: the table seeds (3)
  std::vector<int> figures;          // the paper's figures the row is a line of
  std::string scale_note;            // what the row means at the CPU scale, where it differs
  std::string full_only;             // non-empty: not run at the CPU scale, and why
};

struct Scale {
  std::string name;  // "cpu", "paper-length" or "full"
  std::vector<std::string> triplet_base, siamese_base;  // flags of every cell
  int epochs = 50;   // the scale's counterpart of the paper's 50 epochs
  int iters = 500;   // training iterations (batches of 50 triplets) an epoch
  int val_triplets = 10000;  // validation triplets after every epoch
  std::string description;
};

const std::vector<GridRow>& grid_rows();
const GridRow& row_by_id(const std::string& id);
// The row whose runs a row uses (itself, or its alias).
const GridRow& run_row(const GridRow& r);
const Scale& scale_by_name(const std::string& name);  // throws listing cpu, full
// The cell's whole flag list (without the program name, --seed, --out-dir, --device).
std::vector<std::string> row_args(const GridRow& r, const Scale& s);
int row_epochs(const GridRow& r, const Scale& s);

struct Cell {
  const GridRow* row = nullptr;  // the row that owns the runs (never an alias)
  int seed = 1;
  std::string dir;
  Json summary;                  // summary.json once finished
  std::vector<double> val_curve; // val_one_shot_percent per epoch (metrics.jsonl)
};

// The report: OUT/results.md, OUT/results.json and OUT/figure{3..7}.png; with
// `compare_dir` (another grid's folder, e.g. the cpu scale's), the claims and Kendall's
// taus of both side by side.
void write_report(const std::string& out, const Scale& scale, std::vector<Cell>& cells, const std::string& command,
                  const std::string& compare_dir = "");
// Kendall's tau-b between two rankings of the same items (NaN with fewer than 2 pairs).
// +1 when a's mean is clearly above b's (by more than the larger sd of the two, and by
// at least 2 points), -1 when clearly below, 0 otherwise or when either has no value.
int clear_order(const SampleStats& a, const SampleStats& b);

double kendall_tau(const std::vector<double>& a, const std::vector<double>& b);

// The rows drawn as lines of the paper's Figure N (3-7), one per set of runs: a row and
// its alias in one figure are one line, named by the alias (the figure's own words).
std::vector<const GridRow*> figure_lines(int n);

int run_grid(int argc, char** argv);

}  // namespace mn::exp::omniglot_grid
