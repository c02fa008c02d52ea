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

// grid_figures.cpp: `text` written to `path` through a temporary file and a rename;
// Figure 3 (training loss per epoch, a panel per data set) as out/figure3_training_loss.png;
// a bar chart of v[strategy][column] as `png`. Without gnuplot the .gp/.dat files stay.
void write_text(const std::string& path, const std::string& text);
void figure3(const std::string& out, const std::vector<Cell>& cells, const std::vector<int>& ds);
void bars(const std::string& png, const std::string& title, const std::string& ylabel, bool logy,
          const std::vector<std::string>& cols, const std::vector<std::vector<double>>& v);

}  // namespace mn::exp::sampling
