// Progress bar (see progress.h).
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

Progress::Progress(std::string label, int64_t total, int64_t first_done)
    : label_(std::move(label)), total_(total), first_done_(first_done), tty_(::isatty(STDERR_FILENO)),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

double Progress::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

double Progress::images_per_second() const {
  double e = elapsed_seconds();
  return e > 0 ? images_ / e : 0.0;
}

void Progress::update(int64_t done, double loss, double active, int64_t images) {
  images_ += images;
  auto now = std::chrono::steady_clock::now();
  double e = elapsed_seconds();
  double eta = done > first_done_ ? e / double(done - first_done_) * double(total_ - done) : -1;
  int decile = total_ > 0 ? static_cast<int>(10 * done / total_) : 0;
  bool draw;
  if (tty_) draw = std::chrono::duration<double>(now - last_draw_).count() > 0.2 || done == total_;
  else draw = decile != last_decile_ || done == total_;
  if (!draw) return;
  last_draw_ = now;
  last_decile_ = decile;
  const int width = 24;
  int filled = total_ > 0 ? static_cast<int>(width * done / total_) : 0;
  std::string bar(filled, '#');
  bar += std::string(width - filled, '.');
  std::fprintf(stderr, "%s%s [%s] %ld/%ld loss %.4f active %.1f%% %.0f img/s ETA %s%s",
               tty_ ? "\r" : "", label_.c_str(), bar.c_str(), long(done), long(total_), loss,
               100 * active, images_per_second(), format_duration(eta).c_str(), tty_ ? "  " : "\n");
  std::fflush(stderr);
}

void Progress::finish() {
  if (tty_) std::fprintf(stderr, "\n");
}

}  // namespace mn::exp
