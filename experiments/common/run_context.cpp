// The harness's RunContext (harness_internal.h's Context): the stop control
// (SIGINT / SIGTERM, --stop-after, --time-limit with the next step's estimated
// cost; every rank stops at the same step boundary), the progress line, the
// metrics log, save_progress for custom studies, and finish_outputs (summary.json
// and report.md). It calls the public harness (harness.h) and provenance.h only;
// the epoch loop reads the signal through stop_signal_received().
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <memory>
#include <sstream>

#include "experiments/common/harness_internal.h"
#include "experiments/common/provenance.h"
#include "nn/module.h"
#include "runtime/error.h"

namespace mn::exp {

// ------------------------------------------------------------ stop control --
// SIGINT / SIGTERM ask the run to stop at the next step boundary and save its
// progress (a second signal kills as usual). Installed while a Context lives.
namespace {
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) {
  g_stop_signal = sig;
  std::signal(sig, SIG_DFL);
  static const char msg[] = "\n[signal] stopping after the current step and saving the progress "
                            "(signal again to abort at once)\n";
  ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof msg - 1);  // async-signal-safe
  (void)ignored;
}
}  // namespace

bool stop_signal_received() { return g_stop_signal != 0; }

struct Context::SignalGuard {
  using Handler = void (*)(int);
  Handler old_int, old_term;
  SignalGuard() {
    g_stop_signal = 0;
    old_int = std::signal(SIGINT, on_stop_signal);
    old_term = std::signal(SIGTERM, on_stop_signal);
  }
  ~SignalGuard() {
    std::signal(SIGINT, old_int);
    std::signal(SIGTERM, old_term);
  }
};

Context::Context(Flags& f, Device d, std::string study_name)
    : f_(f), device_(d), out_(f.str("out-dir")), study_(std::move(study_name)), start_(std::chrono::steady_clock::now()),
      signals_(std::make_unique<SignalGuard>()) {
  bar_.set_quiet(world().rank() != 0);
}
Context::~Context() = default;

double Context::run_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

MetricsLog& Context::open_log(long long keep_up_to) {
  log_ = std::make_unique<MetricsLog>(out_path("metrics.jsonl"), keep_up_to);
  return *log_;
}

void Context::log_metrics(const Json& line) {
  if (!log_) open_log(resuming() ? 1LL << 62 : -1);
  log_->write(line);
}

std::string stats_text(const Stats& s, size_t max_n) {
  std::ostringstream os;
  os.precision(4);
  for (size_t i = 0; i < s.size() && i < max_n; ++i) os << (i ? " " : "") << s[i].first << " " << s[i].second;
  return os.str();
}

void Context::progress(const std::string& label, int64_t done, int64_t total, const Stats& stats) {
  if (label != phase_label_ || total != phase_total_) {  // a new phase (not every call: logs print per 10 %)
    bar_.finish();
    bar_.phase(label, total, done);
    phase_label_ = label;
    phase_total_ = total;
  }
  bar_.update(done, stats_text(stats, 3), "", eta_seconds);
}

bool Context::stop_requested(double next_cost_s) {
  reason_.clear();
  const double limit = f_.f64("time-limit");
  const int64_t stop_after = f_.i64("stop-after");
  if (g_stop_signal) reason_ = g_stop_signal == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)";
  else if (before_step && stop_after > 0 && steps_this_run_ >= stop_after)
    reason_ = "--stop-after " + std::to_string(stop_after) + " steps";
  else if (limit > 0 && run_seconds() + next_cost_s + save_seconds > limit)
    reason_ = "--time-limit " + Json(limit).dump() + " s";
  if (world_size() > 1) {  // every rank stops at the same step boundary: when any rank would
    Tensor any = Tensor::from_vector<int32_t>({reason_.empty() ? 0 : 1}, {1});
    comm().all_reduce(any, ReduceOp::Max);
    if (any.to_vector<int32_t>()[0] != 0 && reason_.empty()) reason_ = "another rank stopped (a signal or its clock)";
  }
  return !reason_.empty();
}

void Context::save_progress(nn::Module* model, const nn::Optimizer* opt, nn::Metadata md) {
  md["study"] = study_;
  md["config"] = f_.to_json();
  const std::string path = out_path("last.safetensors");
  if (model) {
    nn::save_checkpoint(path, *model, opt, md);
    return;
  }
  nn::NamedTensors state;
  if (opt)
    for (auto& [name, t] : opt->state_dict()) state.emplace_back(name, t);
  nn::write_safetensors(path, state, md);
}

void Context::finish_outputs() {
  // Provenance (set by run_study): this invocation's wall time, and the block in the report.
  if (summary_.contains("provenance")) {
    summary_["provenance"]["wall_seconds"] = std::round(run_seconds() * 10) / 10;
    report_ += "\n## Provenance\n\n" + provenance_markdown(summary_["provenance"]);
  }
  write_file_atomic(out_path("summary.json"), summary_.dump(2) + "\n");
  write_file_atomic(out_path("report.md"), report_);
  std::printf("\n%s", report_.c_str());
  std::fflush(stdout);
}

}  // namespace mn::exp
