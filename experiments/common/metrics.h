// Run outputs: metrics.jsonl (one JSON object per line, appended and flushed
// per epoch) and learning-curve plots drawn by gnuplot (Debian gnuplot-nox).
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mn::exp {

// One JSON object built field by field, in insertion order.
class JsonLine {
 public:
  JsonLine& num(const std::string& key, double v);
  JsonLine& integer(const std::string& key, long long v);
  JsonLine& str(const std::string& key, const std::string& v);
  JsonLine& raw(const std::string& key, const std::string& json);  // already-encoded JSON
  std::string dump() const;

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

class MetricsLog {
 public:
  // Opens (appending) `path`; with `truncate_after_epoch` >= 0 first drops the
  // lines of later epochs (used by --resume so a resumed run has one line per epoch).
  explicit MetricsLog(std::string path, int truncate_after_epoch = -1);
  void write(const JsonLine& line);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct Series {
  std::string title;
  std::vector<double> x, y;
  bool right_axis = false;
};
// Draws series into a PNG with gnuplot. Returns false (and leaves the data and
// script next to the PNG) when gnuplot is not installed.
bool plot_png(const std::string& png_path, const std::string& title, const std::string& xlabel,
              const std::string& ylabel, const std::string& y2label, const std::vector<Series>& series);

}  // namespace mn::exp
