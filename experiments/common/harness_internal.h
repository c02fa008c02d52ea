// The harness's private parts, shared by its files (studies include harness.h):
//   harness.cpp          run_study (flags to exit status), run_training, --evaluate,
//                        --export-weights
//   harness_flags.cpp    the harness's flags, the precision and device choice,
//                        study_config
//   resume.cpp           the resume contract, the checks of a checkpoint given to
//                        --resume or --evaluate, the epoch loop's stored progress
//   ranks.cpp            a data-parallel run's ranks (join_world, rank_device, end_run)
//   run_context.cpp      Context: the stop control (signals, --stop-after,
//                        --time-limit), progress, finish_outputs
//   epoch_loop.h         the epoch loop (epoch_loop.cpp, epoch_validation.cpp,
//                        final_test.cpp), private to them and resume.cpp
//   harness_util.cpp     file and folder checks, StepInputs, checkpoint metadata readers
// The declarations below are grouped by the file that defines them.
#pragma once
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include "experiments/common/harness.h"
#include "kernels/gemm_config.h"
#include "runtime/error.h"

namespace mn::exp {

// --time-limit too short for even one step: a usage error (exit status 2).
struct TimeLimitTooShort : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A usage error: exit status 2 (a bad flag, not a failed run). Made from an
// mn::Error it keeps that error's check and source location for MN_DEBUG_ERRORS.
struct UsageError : Error {
  explicit UsageError(const std::string& msg) : Error(msg, __FILE__, __LINE__) {}
  explicit UsageError(const Error& e) : Error(e) {}
};

// ---- harness_flags.cpp ----
// Declares the harness's flags (harness.h) in `f`, those of the study's shape.
void declare_harness_flags(Flags& f, const Study& st);
// The precisions of this run from --precision (or the legacy --tf32) and the device.
struct PrecisionChoice {
  kernels::Precision conv = kernels::Precision::FP32, matmul = kernels::Precision::FP32;
};
PrecisionChoice choose_precision(const Flags& f, const Device& device);
// "precision tf32: TF32 tensor cores for convolutions and dense layers" and the like.
std::string precision_words(const PrecisionChoice& c);
// {"conv": ..., "matmul": ...}: the precisions set now (summary.json's "precision").
Json precision_json();
// --device: auto, cpu, cuda or cuda:N (a usage error when misspelt, an error without CUDA).
Device choose_device(const Flags& f);

// ---- resume.cpp ----
// --resume: the resume contract (harness.h) applied to `f` from `ckpt`'s metadata.
void apply_resume_contract(Flags& f, const Study& st, const std::string& ckpt);
// --evaluate: checks `ckpt` is this study's and restores its architecture flags.
void apply_evaluate_checkpoint(Flags& f, const Study& st, const std::string& ckpt);
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

// ---- ranks.cpp ----
// Under mpirun -np N > 1: joins the run's world (a usage error when the study does not
// run data-parallel), shares the node's cores, appends the rank to `prog`, and
// silences stdout off rank 0.
void join_world(Study& st, const Flags& f, std::string& prog);
// Whether join_world joined a world of more than one rank.
bool world_joined();
// The device of this rank (--device cuda under mpirun: the local rank's GPU).
Device rank_device(Device d, const Flags& f);
// Returns `code`; a failure under mpirun ends every rank (MPI_Abort).
int end_run(int code);

// ---- harness_util.cpp ----
// Throws naming `flag` when `path` does not exist or is not a regular file.
void check_regular_file(const std::string& path, const std::string& flag);

// ---- run_context.cpp ----
// Whether SIGINT or SIGTERM arrived while a Context lived (the stop control).
bool stop_signal_received();
// The first `max_n` statistics as "name value ..." (4 significant digits).
std::string stats_text(const Stats& s, size_t max_n);

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

// ---- harness.cpp ----
// The epoch-shaped run (or Study::run for custom studies), then the outputs.
int run_training(Study& st, Context& ctx);

// ---- epoch_loop.cpp ----
// The epoch loop of an epoch-shaped study (EpochLoop, epoch_loop.h): its exit status.
int train_epochs(Study& st, Context& ctx);

}  // namespace mn::exp
