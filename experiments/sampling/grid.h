// sampling_grid: runs the sampling study's 21 cells (3 data sets x 7
// strategies, optionally several seeds) one after the other in one process,
// each in OUT/<dataset>/<strategy>/seed<N>/ through the study harness (so each
// cell has its checkpoints, metrics.jsonl, plots and summary.json). Finished
// cells (summary.json present) are skipped, stopped ones resumed; a stop
// (--time-limit, a signal) exits with status 3 and the same command goes on.
// Then it writes OUT/results.md (Tables 1 and 2 with the study's numbers beside
// ours and the difference, the meaningful metrics, the checks of the study's
// claims), OUT/results.json, Figure 3 (OUT/figure3_training_loss.png) and bar
// charts of the training time and the tuples per batch. OUT/notes.md, when
// present, is included in results.md (the explanations of the differences).
#pragma once

namespace mn::exp::sampling {

int run_grid(int argc, char** argv);

}  // namespace mn::exp::sampling
