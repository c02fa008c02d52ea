// A one-line progress display for a whole run: phase (epoch e/E, validation,
// fold f/F, ...), a bar for the phase, named stats, throughput and the ETA of
// the *whole run* (the caller estimates it: remaining steps, validations and
// final test at their measured costs). On a terminal it redraws in place at
// most 5 times a second; otherwise (logs, CI) it prints a plain line about
// every 10 % of a phase so logs stay short.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace mn::exp {

class Progress {
 public:
  Progress();
  // Starts a phase of `total` units with `first_done` already done.
  void phase(std::string label, int64_t total, int64_t first_done = 0);
  // `done` units of the phase; `stats` e.g. "loss 0.21 active 40.0%"; `rate`
  // e.g. "190 img/s" (empty: none); `eta_s` < 0: unknown.
  void update(int64_t done, const std::string& stats, const std::string& rate, double eta_s);
  void finish();  // ends the line of a phase on a terminal
  // Draws nothing (the ranks other than 0 of a data-parallel run: their progress is rank 0's).
  void set_quiet(bool q) { quiet_ = q; }

 private:
  std::string label_;
  int64_t total_ = 0;
  bool tty_;
  bool quiet_ = false;
  int last_decile_ = -1;
  std::chrono::steady_clock::time_point last_draw_;
};

// "1h02m", "3m05s", "12s"; "?" when unknown.
std::string format_duration(double seconds);

}  // namespace mn::exp
