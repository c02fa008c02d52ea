// The harness's private parts shared by harness.cpp and harness_loop.cpp: the
// RunContext implementation with the stop control (signals, --stop-after,
// --time-limit) and the epoch loop's entry point. Studies include harness.h.
#pragma once
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include "experiments/common/harness.h"

namespace mn::exp {

// --time-limit too short for even one step: a usage error (exit status 2).
struct TimeLimitTooShort : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws naming `flag` when `path` does not exist or is not a regular file.
void check_regular_file(const std::string& path, const std::string& flag);
// --resume: check_regular_file of `ckpt`; when it does not exist, the error says
// whether a run was started in `out_dir` and why it saved nothing.
void check_resume_checkpoint(const std::string& out_dir, const std::string& ckpt);
// --resume: the checkpoint's "world_size" (1 when absent) must be this run's number of
// ranks (the launcher's); throws naming both and the command that resumes it.
void check_resume_world_size(const nn::Metadata& md, const std::string& file);
// Before `file` is loaded into the model built from the flags (`flag`: --evaluate
// or --resume). The flags win: a tensor of the model that the file lacks or holds
// in another shape is an error, a tensor of the file that the model does not have
// (its weights would be ignored) a warning; both name the architecture flags that
// did not come from the file's metadata config.
void check_architecture_matches(Study& st, const Flags& f, const std::string& file, const char* flag);

class Context : public RunContext {
 public:
  Context(Flags& f, Device d, std::string study_name);
  ~Context() override;

  const Flags& flags() const override { return f_; }
  Device device() const override { return device_; }
  uint64_t seed() const override { return static_cast<uint64_t>(f_.i64("seed")); }
  const std::string& out_dir() const override { return out_; }
  std::string out_path(const std::string& file) const override { return out_ + "/" + file; }
  bool resuming() const override { return f_.flag("resume"); }

  void log_metrics(const Json& line) override;
  void progress(const std::string& label, int64_t done, int64_t total, const Stats& stats) override;
  bool stop_requested(double next_cost_s) override;
  void count_step() override { ++steps_this_run_; }
  void save_progress(nn::Module* model, const nn::Optimizer* opt, nn::Metadata md) override;
  Json& summary() override { return summary_; }
  void report(const std::string& markdown) override { report_ += markdown; }

  // --- for the harness ---
  MetricsLog& open_log(long long keep_up_to);
  MetricsLog* log() { return log_.get(); }
  Progress& bar() { return bar_; }
  double run_seconds() const;
  // Why the last stop_requested() said yes ("" when it did not).
  const std::string& stop_reason() const { return reason_; }
  int64_t steps_this_run() const { return steps_this_run_; }
  // Measured cost of a checkpoint write (1 s until measured).
  double save_seconds = 1.0;
  // Set to the remaining-work estimate of the run, shown as the ETA.
  double eta_seconds = -1;
  const std::string& report_text() const { return report_; }
  // Writes summary.json and report.md, prints the report.
  void finish_outputs();
  // Stop requests only before steps (false while validating or testing).
  bool before_step = true;

 private:
  Flags& f_;
  Device device_;
  std::string out_, study_;
  std::unique_ptr<MetricsLog> log_;
  Progress bar_;
  Json summary_ = Json::object();
  std::string report_, reason_, phase_label_;
  int64_t phase_total_ = -1;
  std::chrono::steady_clock::time_point start_;
  int64_t steps_this_run_ = 0;
  struct SignalGuard;
  std::unique_ptr<SignalGuard> signals_;
};

// The epoch-shaped run (or Study::run for custom studies), then the outputs.
int run_training(Study& st, Context& ctx);

}  // namespace mn::exp
