// Run outputs: metrics.jsonl (one JSON object per line, appended and flushed
// per epoch or per fold) and learning-curve plots drawn by gnuplot (Debian
// gnuplot-nox).
#pragma once
#include <string>
#include <vector>

#include "experiments/common/json.h"

namespace mn::exp {

class MetricsLog {
 public:
  // Opens `path`. `keep_up_to` >= 0 keeps only the lines whose "epoch" is at
  // most that (used by --resume, so a resumed run has one line per epoch);
  // a negative value starts an empty file.
  // write() throws naming the file on any write error (a full disk, a removed folder).
  MetricsLog(std::string path, long long keep_up_to);
  void write(const Json& line);
  // Every line written so far (also those of earlier segments of a resumed run).
  const std::vector<Json>& lines() const { return lines_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<Json> lines_;
};

struct Series {
  std::string title;
  std::vector<double> x, y;
  bool right_axis = false;
};
// Draws series into a PNG with gnuplot and removes its input files. Returns
// false (and leaves the data and script, PNG.dat and PNG.gp, next to the PNG
// for the user to plot) when gnuplot is not installed or fails.
bool plot_png(const std::string& png_path, const std::string& title, const std::string& xlabel,
              const std::string& ylabel, const std::string& y2label, const std::vector<Series>& series);

}  // namespace mn::exp
