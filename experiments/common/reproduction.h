// A reproduction counted both ways: our value (mean, sd, n over seeds) against the
// paper's number. Within the paper's value +- our sd (n >= 2) or +- a stated tolerance
// (one seed) is "within"; otherwise "above" or "below", each a difference to explain.
// A cell whose metric cannot fail (100 % by construction, a value fixed by the data set's
// size, a method that did nothing) is "degenerate": flagged by the report, never counted
// as reproduced. Every study's results.md uses this one rule (omniglot_grid,
// sampling_grid, the LMNN and pair-selection reports).
#pragma once
#include <string>

#include "experiments/common/grid_util.h"

namespace mn::exp {

enum class Repro { Within, Above, Below, Degenerate, NoPaper, NotRun };
const char* repro_name(Repro r);  // "within", "above", "below", "degenerate", "no paper number", "not run"

// paper < 0 (or NaN): the paper gives no number.
Repro compare_with_paper(double paper, const SampleStats& ours, double one_seed_tolerance, bool degenerate = false);

struct ReproCount {
  int within = 0, above = 0, below = 0, degenerate = 0, no_paper = 0, not_run = 0;
  void add(Repro r);
  int compared() const { return within + above + below; }
  // "12 within, 3 above, 5 below of 20 compared; 2 degenerate (not counted)".
  std::string line() const;
};

}  // namespace mn::exp
