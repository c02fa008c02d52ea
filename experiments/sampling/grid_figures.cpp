// The sampling grid's figures (grid_report.h): Figure 3 and the appendix's bar charts,
// drawn with gnuplot; and the atomic text writer the report shares with them.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "experiments/sampling/grid_report.h"
#include "experiments/sampling/study.h"
#include "runtime/error.h"

namespace mn::exp::sampling {
namespace fs = std::filesystem;
namespace {

std::string fmt3(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.3f", v);
  return b;
}

bool run_gnuplot(const std::string& gp) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return false;
  return std::system(("gnuplot '" + gp + "' 2>/dev/null").c_str()) == 0;
}

}  // namespace

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path + ".tmp");
  MN_CHECK(f.good(), "sampling_grid: cannot write '", path, "'");
  f << text;
  f.close();
  MN_CHECK(f.good(), "sampling_grid: writing '", path, "' failed (disk full?)");
  fs::rename(path + ".tmp", path);
}

// Figure 3: training loss per epoch, one panel per data set, one line per strategy.
void figure3(const std::string& out, const std::vector<Cell>& cells, const std::vector<int>& ds) {
  const std::string png = out + "/figure3_training_loss.png", dat = png + ".dat", gp = png + ".gp";
  std::ofstream d(dat);
  std::map<std::pair<int, int>, int> block;
  int b = 0;
  for (int di : ds)
    for (int s = 0; s < 7; ++s) {
      const Cell* c = nullptr;
      for (const auto& x : cells)
        if (x.d == di && x.s == s && !x.loss.empty() && (!c || x.seed < c->seed)) c = &x;
      d << "# " << dataset_names()[di] << " " << strategies()[s].flag << "\n";
      if (c)
        for (size_t e = 0; e < c->loss.size(); ++e) d << e + 1 << " " << c->loss[e] << "\n";
      else
        d << "1 NaN\n";
      d << "\n\n";
      block[{di, s}] = b++;
    }
  d.close();
  std::ostringstream g;
  g << "set terminal pngcairo size " << 520 * ds.size() + 260 << ",480 noenhanced\nset output '" << png << "'\n"
    << "set multiplot layout 1," << ds.size() << " title 'Training loss per epoch (seed 1)'\n"
    << "set xlabel 'epoch'\nset grid\nset logscale y\n";
  // Panels of equal width at fixed screen positions; the legend right of the last.
  const double left = 0.04, right = 0.76, w = (right - left) / static_cast<double>(ds.size());
  g << "set tmargin at screen 0.86\nset bmargin at screen 0.12\n";
  for (size_t k = 0; k < ds.size(); ++k) {
    g << "set lmargin at screen " << left + k * w + 0.035 << "\nset rmargin at screen " << left + (k + 1) * w - 0.01
      << "\n";
    g << "set title '" << dataset_names()[ds[k]] << "'\n";
    g << (k + 1 == ds.size() ? "set key at screen 0.995,0.86 right top\n" : "unset key\n");
    g << "plot ";
    for (int s = 0; s < 7; ++s)
      g << (s ? ", " : "") << "'" << dat << "' index " << block[{ds[k], s}] << " with linespoints pt " << s + 1
        << " title '" << strategies()[s].title << "'";
    g << "\n";
  }
  g << "unset multiplot\n";
  write_text(gp, g.str());
  if (run_gnuplot(gp)) {
    fs::remove(dat);
    fs::remove(gp);
  }
}

// Bar chart: value per strategy (rows) and data set (columns).
void bars(const std::string& png, const std::string& title, const std::string& ylabel, bool logy,
          const std::vector<std::string>& cols, const std::vector<std::vector<double>>& v) {
  const std::string dat = png + ".dat", gp = png + ".gp";
  {
    std::ofstream d(dat);
    d << "strategy";
    for (const auto& c : cols) d << " \"" << c << "\"";
    d << "\n";
    for (int s = 0; s < 7; ++s) {
      d << "\"" << strategies()[s].title << "\"";
      for (size_t k = 0; k < cols.size(); ++k) d << " " << (std::isfinite(v[s][k]) ? fmt3(v[s][k]) : "NaN");
      d << "\n";
    }
  }
  std::ostringstream g;
  g << "set terminal pngcairo size 1000,520 noenhanced\nset output '" << png << "'\nset title '" << title
    << "'\nset ylabel '" << ylabel << "'\nset style data histogram\nset style histogram cluster gap 1\n"
    << "set style fill solid 0.8 border -1\nset boxwidth 0.9\nset xtics rotate by -25 scale 0\nset grid ytics\n"
    << "set key top left\nset bmargin 7\n" << (logy ? "set logscale y\n" : "set yrange [0:*]\n") << "plot ";
  for (size_t k = 0; k < cols.size(); ++k)
    g << (k ? ", " : "") << "'" << dat << "' using " << k + 2 << (k ? "" : ":xtic(1)") << " title columnhead";
  g << "\n";
  write_text(gp, g.str());
  if (run_gnuplot(gp)) {
    fs::remove(dat);
    fs::remove(gp);
  }
}


}  // namespace mn::exp::sampling
