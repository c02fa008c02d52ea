// Progress display (see progress.h).
#include "experiments/common/progress.h"

#include <unistd.h>

#include <cstdio>

namespace mn::exp {

std::string format_duration(double s) {
  if (!(s >= 0) || s > 1e8) return "?";
  char buf[32];
  int64_t t = static_cast<int64_t>(s + 0.5);
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", long(t / 3600), long(t / 60 % 60));
  else if (t >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", long(t / 60), long(t % 60));
  else std::snprintf(buf, sizeof buf, "%lds", long(t));
  return buf;
}

Progress::Progress() : tty_(::isatty(STDERR_FILENO)), last_draw_(std::chrono::steady_clock::now()) {}

void Progress::phase(std::string label, int64_t total, int64_t first_done) {
  label_ = std::move(label);
  total_ = total;
  last_decile_ = total > 0 ? static_cast<int>(10 * first_done / total) : -1;
}

void Progress::update(int64_t done, const std::string& stats, const std::string& rate, double eta_s) {
  auto now = std::chrono::steady_clock::now();
  int decile = total_ > 0 ? static_cast<int>(10 * done / total_) : 0;
  bool draw;
  if (quiet_) return;
  if (tty_) draw = std::chrono::duration<double>(now - last_draw_).count() > 0.2 || done == total_;
  else draw = decile != last_decile_ || done == total_;
  if (!draw) return;
  last_draw_ = now;
  last_decile_ = decile;
  const int width = 24;
  int filled = total_ > 0 ? static_cast<int>(width * done / total_) : 0;
  std::string bar(filled, '#');
  bar += std::string(width - filled, '.');
  std::fprintf(stderr, "%s%s [%s] %ld/%ld%s%s%s%s run ETA %s%s", tty_ ? "\r" : "", label_.c_str(), bar.c_str(),
               long(done), long(total_), stats.empty() ? "" : " ", stats.c_str(), rate.empty() ? "" : " ",
               rate.c_str(), format_duration(eta_s).c_str(), tty_ ? "   " : "\n");
  std::fflush(stderr);
}

void Progress::finish() {
  if (tty_ && !quiet_) std::fprintf(stderr, "\n");
}

}  // namespace mn::exp
