// The sampling grid's report (grid.h): results.md, results.json and the
// figures from the cells' summary.json and metrics.jsonl files.
#pragma once
#include <string>
#include <vector>

#include "experiments/common/json.h"

namespace mn::exp::sampling {

struct Cell {
  int d = 0, s = 0;  // indices into dataset_names(), strategies()
  int64_t seed = 1;
  std::string dir;
  Json summary;                    // empty: not finished
  std::vector<double> loss, acc;   // per epoch (metrics.jsonl)
  bool done() const { return !summary.is_null(); }
};


// Reads every cell's files and writes out/results.md (with out/notes.md when
// present), out/results.json, Figure 3 and the bar charts. `ds`: the data sets
// in table order; `command` is quoted in results.md.
void write_report(const std::string& out, std::vector<Cell>& cells, const std::vector<int>& ds,
                  const std::string& command);

}  // namespace mn::exp::sampling
