// Export of a pair-selection study's samples for the independent PyTorch
// reference (bench/references/pair_selection_torch.py), so both sides train on
// the same folds and start from the same pairs:
//   DIR/export.json        the study's configuration (the flags) and the layer widths
//   DIR/folds.txt          one line per fold: the fold's indices into MNIST's training set
//   DIR/pairs_fold<k>.txt  the fold's first random pair set, one "a b impostor" per line
//                          (indices into the fold; every method starts from it)
// and, with --export-trace (meant for tiny runs: it holds every epoch's pairs):
//   DIR/init_fold<k>.bin           initial weights, float32 little-endian, per layer
//                                  W (in, out) row-major then b (out)
//   DIR/trace_<method>_fold<k>.txt one line per epoch: that epoch's training pairs in
//                                  the order trained, "a b impostor" triples
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "experiments/pair_selection/study.h"

namespace mn::pairsel {

// Writes export.json, folds.txt and pairs_fold<k>.txt (creates `dir`).
void export_folds(const std::string& dir, const std::string& config_json,
                  const std::vector<std::vector<int64_t>>& fold_indices,
                  const std::vector<std::vector<Pair>>& first_pairs);

// Writes init_fold<fold>.bin (when `with_init`) and trace_<method>_fold<fold>.txt.
void export_trace(const std::string& dir, Method method, int fold, const RunTrace& trace,
                  bool with_init);

// Reads one trace file back (for the tests): epochs x pairs.
std::vector<std::vector<Pair>> read_trace(const std::string& path);

}  // namespace mn::pairsel
