// metrics.jsonl writer and gnuplot learning curves (see metrics.h).
#include "experiments/common/metrics.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "experiments/common/flags.h"
#include "runtime/error.h"

namespace mn::exp {

JsonLine& JsonLine::num(const std::string& k, double v) {
  fields_.emplace_back(k, json_number(v));
  return *this;
}
JsonLine& JsonLine::integer(const std::string& k, long long v) {
  fields_.emplace_back(k, std::to_string(v));
  return *this;
}
JsonLine& JsonLine::str(const std::string& k, const std::string& v) {
  fields_.emplace_back(k, json_escape(v));
  return *this;
}
JsonLine& JsonLine::raw(const std::string& k, const std::string& json) {
  fields_.emplace_back(k, json);
  return *this;
}
std::string JsonLine::dump() const {
  std::string o = "{";
  for (size_t i = 0; i < fields_.size(); ++i)
    o += (i ? ", " : "") + json_escape(fields_[i].first) + ": " + fields_[i].second;
  return o + "}";
}

MetricsLog::MetricsLog(std::string path, int truncate_after_epoch) : path_(std::move(path)) {
  if (truncate_after_epoch < 0) return;
  std::ifstream in(path_);
  if (!in) return;
  std::string line, kept;
  while (std::getline(in, line)) {
    size_t p = line.find("\"epoch\": ");
    if (p != std::string::npos && std::atoi(line.c_str() + p + 9) > truncate_after_epoch) continue;
    kept += line + "\n";
  }
  write_file_atomic(path_, kept);
}

void MetricsLog::write(const JsonLine& line) {
  std::ofstream out(path_, std::ios::app);
  if (!out) MN_THROW("metrics: cannot append to '", path_, "'");
  out << line.dump() << "\n";
  out.flush();
}

bool plot_png(const std::string& png, const std::string& title, const std::string& xlabel,
              const std::string& ylabel, const std::string& y2label, const std::vector<Series>& series) {
  std::string dat = png + ".dat", gp = png + ".gp";
  {
    std::ofstream d(dat);
    for (size_t s = 0; s < series.size(); ++s) {
      d << "# " << series[s].title << "\n";
      for (size_t i = 0; i < series[s].x.size(); ++i) d << series[s].x[i] << " " << series[s].y[i] << "\n";
      d << "\n\n";
    }
  }
  std::ostringstream g;
  g << "set terminal pngcairo size 900,540 noenhanced\nset output '" << png << "'\n"
    << "set title '" << title << "'\nset xlabel '" << xlabel << "'\nset ylabel '" << ylabel << "'\n"
    << "set grid\nset key outside below horizontal\n";  // below the axes: never over a curve
  if (!y2label.empty()) g << "set y2label '" << y2label << "'\nset y2tics\nset ytics nomirror\n";
  g << "plot ";
  for (size_t s = 0; s < series.size(); ++s) {
    g << (s ? ", " : "") << "'" << dat << "' index " << s << " with linespoints title '" << series[s].title
      << "'" << (series[s].right_axis ? " axes x1y2" : "");
  }
  g << "\n";
  write_file_atomic(gp, g.str());
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return false;
  std::string cmd = "gnuplot '" + gp + "' 2>/dev/null";
  if (std::system(cmd.c_str()) != 0) {
    // pngcairo may be missing in minimal builds: fall back to the plain png terminal.
    std::string g2 = g.str();
    g2.replace(g2.find("pngcairo"), 8, "png");
    write_file_atomic(gp, g2);
    if (std::system(cmd.c_str()) != 0) return false;
  }
  return true;
}

}  // namespace mn::exp
