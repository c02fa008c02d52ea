// metrics.jsonl writer and gnuplot learning curves (see metrics.h).
#include "experiments/common/metrics.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "experiments/common/flags.h"
#include "runtime/error.h"

namespace mn::exp {

MetricsLog::MetricsLog(std::string path, long long keep_up_to) : path_(std::move(path)) {
  std::string kept;
  if (keep_up_to >= 0) {
    std::ifstream in(path_);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      if (line.empty()) continue;
      Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
      MN_CHECK(!j.is_discarded() && j.is_object(), "--resume: '", path_, "' line ", n,
               " is not a JSON object; fix or remove the line");
      auto e = j.find("epoch");
      if (e != j.end() && e->is_number() && e->get<double>() > static_cast<double>(keep_up_to)) continue;
      kept += line + "\n";
      lines_.push_back(std::move(j));
    }
  }
  write_file_atomic(path_, kept);
}

void MetricsLog::write(const Json& line) {
  // POSIX calls, each checked: an ofstream would report a full disk or a
  // removed folder only as a failbit (or not at all, at close).
  const std::string text = line.dump() + "\n";
  const int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0)
    MN_THROW("metrics: cannot append to '", path_, "': ", std::strerror(errno),
             errno == ENOENT ? " (was the --out-dir folder removed during the run?)" : "");
  size_t off = 0;
  while (off < text.size()) {
    const ssize_t w = ::write(fd, text.data() + off, text.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int e = w < 0 ? errno : ENOSPC;
      ::close(fd);
      MN_THROW("metrics: writing '", path_, "' failed: ", std::strerror(e), " (disk full?)");
    }
    off += static_cast<size_t>(w);
  }
  if (::close(fd) != 0) MN_THROW("metrics: writing '", path_, "' failed at close: ", std::strerror(errno));
  lines_.push_back(line);
}

bool plot_png(const std::string& png, const std::string& title, const std::string& xlabel,
              const std::string& ylabel, const std::string& y2label, const std::vector<Series>& series) {
  std::string dat = png + ".dat", gp = png + ".gp";
  {
    std::ofstream d(dat);
    if (!d) MN_THROW("plot: cannot write '", dat, "': ", std::strerror(errno));
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
  // Drawn: the data and script were only gnuplot's input (metrics.jsonl holds the numbers).
  std::remove(dat.c_str());
  std::remove(gp.c_str());
  return true;
}

}  // namespace mn::exp
