// A one-line progress bar for training loops: iteration, loss, active-triplet
// share, images/s and ETA. On a terminal it redraws in place; otherwise (logs,
// CI) it prints a plain line about every 10 % so logs stay short.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace mn::exp {

class Progress {
 public:
  // `first_done`: iterations already done before this bar starts (a resumed
  // epoch); the rate and ETA count only the iterations run under this bar.
  Progress(std::string label, int64_t total, int64_t first_done = 0);
  // Called after each iteration with its metrics; `images` processed in it.
  void update(int64_t done, double loss, double active_share, int64_t images);
  void finish();
  double images_per_second() const;
  double elapsed_seconds() const;

 private:
  std::string label_;
  int64_t total_, first_done_;
  bool tty_;
  int64_t images_ = 0;
  int last_decile_ = -1;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// "1h02m", "3m05s", "12s".
std::string format_duration(double seconds);

}  // namespace mn::exp
