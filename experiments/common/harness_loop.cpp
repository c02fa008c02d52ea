// The harness's run loop (see harness.h): the epoch loop with validation, best
// model selection, atomic checkpoints, exact (also mid-epoch) resume, the stop
// control (signals, --stop-after, --time-limit with estimated costs), the
// whole-run ETA, learning curves, and the final summary.json and report.md.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "experiments/common/file_hash.h"
#include "experiments/common/harness_internal.h"
#include "experiments/common/provenance.h"
#include "kernels/elementwise.h"
#include "kernels/gemm_config.h"
#include "experiments/common/step_runner.h"
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

namespace {
std::string stats_text(const Stats& s, size_t max_n) {
  std::ostringstream os;
  os.precision(4);
  for (size_t i = 0; i < s.size() && i < max_n; ++i) os << (i ? " " : "") << s[i].first << " " << s[i].second;
  return os.str();
}
}  // namespace

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

// ------------------------------------------------------------- epoch loop --
namespace {
// What the convolutions and dense layers computed in (set by the harness from --precision).
Json precision_json() {
  Json j;
  j["conv"] = kernels::precision_name(kernels::conv_precision());
  j["matmul"] = kernels::precision_name(kernels::matmul_precision());
  return j;
}
}  // namespace

namespace {

struct LoopState {
  int64_t start_epoch = 0, start_iter = 0, best_epoch = -1;
  double best = -1.0 / 0.0, total_train_s = 0, last_val_s = -1, step_s = 0;
  Stats partial;  // the running sums of a resumed epoch, in the step's order
  double partial_train_s = 0;
  // XXH3 of best.safetensors as written (file_hash.h; "" before the first best,
  // or resumed from a checkpoint of a version that did not store it).
  std::string best_hash;
};

void put_progress(nn::Metadata& md, const LoopState& ls, int64_t epochs_done, int64_t iter, const Stats& sums,
                  double epoch_train_s, double best, int64_t best_epoch) {
  md["epoch"] = std::to_string(epochs_done);
  md["iter"] = std::to_string(iter);
  md["best_score"] = exact_text(best);
  md["best_epoch"] = std::to_string(best_epoch);
  std::string names;
  for (const auto& [k, v] : sums) {
    names += (names.empty() ? "" : ",") + k;
    md["partial." + k] = exact_text(v);
  }
  md["partial.names"] = names;
  md["partial.train_seconds"] = exact_text(epoch_train_s);
  md["train_seconds_total"] = exact_text(ls.total_train_s);
  md["last_val_seconds"] = exact_text(ls.last_val_s);
  md["step_seconds"] = exact_text(ls.step_s);
  if (!ls.best_hash.empty()) md["best_xxh3"] = ls.best_hash;
}

LoopState load_progress(Study& st, const Flags& f, const std::string& file, int64_t iters) {
  check_architecture_matches(st, f, file, "--resume");
  nn::Metadata md = nn::load_checkpoint(file, st.model(), st.optimizer());
  check_resume_world_size(md, file);
  LoopState ls;
  ls.start_epoch = md_int(md, "epoch", file, 0, 1000000);
  ls.start_iter = md_int(md, "iter", file, 0, 1LL << 40);
  ls.best = md_double(md, "best_score", file);
  if (std::isnan(ls.best)) ls.best = -1.0 / 0.0;
  ls.best_epoch = md_int(md, "best_epoch", file, -1, ls.start_epoch);
  ls.total_train_s = md_double(md, "train_seconds_total", file);
  ls.last_val_s = md_double(md, "last_val_seconds", file);
  ls.step_s = md_double(md, "step_seconds", file);
  ls.partial_train_s = md_double(md, "partial.train_seconds", file);
  if (auto h = md.find("best_xxh3"); h != md.end()) ls.best_hash = h->second;
  std::stringstream names(md_string(md, "partial.names", file));
  std::string k;
  while (std::getline(names, k, ','))
    if (!k.empty()) ls.partial.emplace_back(k, md_double(md, "partial." + k, file));
  const std::string steps_flag = st.steps_per_epoch_flag();
  MN_CHECK(ls.start_iter <= iters, "--resume: '", file, "' stopped at step ", ls.start_iter, " of an epoch, but an "
           "epoch has ", iters, " steps now",
           steps_flag.empty() ? std::string()
                              : " (--" + steps_flag + " " + f.text(steps_flag) + "): give the stopped run's --" +
                                    steps_flag + " (at least " + std::to_string(ls.start_iter) + ") to resume it, "
                                    "or start a new run in another --out-dir");
  st.load_state(md, file);
  return ls;
}

Json epoch_line(int64_t epoch, const Stats& sums, int64_t iters, const Stats& val, const Stats& extras,
                double train_s, double val_s, double items_per_s, const std::string& items) {
  Json j;
  j["epoch"] = epoch;
  for (const auto& [k, v] : sums) j[k] = metric_number(v / static_cast<double>(iters));
  for (const auto& [k, v] : val) j[k] = metric_number(v);
  for (const auto& [k, v] : extras) j[k] = metric_number(v);
  j["train_seconds"] = metric_number(train_s);
  j["val_seconds"] = metric_number(val_s);
  j[items + "_per_second"] = metric_number(items_per_s);
  return j;
}

double value_of(const Stats& s, const std::string& key, const char* what) {
  for (const auto& [k, v] : s)
    if (k == key) return v;
  MN_THROW("study: ", what, " has no entry '", key, "'");
}

std::string epochs_table(const std::vector<Json>& lines, const std::string& sel) {
  std::ostringstream os;
  os << "| epoch | train_loss | " << sel << " |\n|---:|---:|---:|\n";
  for (const auto& l : lines) {
    auto num = [&](const char* k) { return l.contains(k) && l[k].is_number() ? l[k].dump() : std::string("-"); };
    os << "| " << num("epoch") << " | " << num("train_loss") << " | " << num(sel.c_str()) << " |\n";
  }
  return os.str();
}

// The epoch loop in named phases: start (resume, outputs), per epoch the training
// steps (with the reads of their statistics), validation and the checkpoints, a
// resumable stop at any step boundary, and the final test. The loop's state lives in
// the members; each phase is a method a reader can hold in their head.
class EpochLoop {
 public:
  EpochLoop(Study& st, Context& ctx)
      : st_(st), ctx_(ctx), f_(ctx.flags()), rank0_(ctx.rank() == 0), dist_(ctx.world_size() > 1),
        last_(ctx.out_path("last.safetensors")),
        best_path_(ctx.out_path("best.safetensors")), epochs_(f_.i64("epochs")), iters_(st.steps_per_epoch()),
        items_(st.items_per_step()), sel_(st.selection_metric()), item_name_(st.items_name()) {
    MN_CHECK(iters_ > 0, st.name(), ": steps_per_epoch() must be positive");
  }

  int run() {
    start();
    for (int64_t epoch = ls_.start_epoch + 1; epoch <= epochs_; ++epoch) {
      st_.begin_epoch(epoch);
      EpochState e = begin_epoch_state(epoch);
      if (const int rc = train_steps(epoch, e); rc != kExitOk) return rc;
      ctx_.before_step = false;
      if (ctx_.stop_requested(val_estimate())) return stop_now(epoch, iters_, e.sums, e.train_s);
      if (rank0_) validate_and_save(epoch, e);  // the other ranks go on and wait in their next collective
    }
    if (g_stop_signal) {
      std::printf("\nstopped by a signal after the last epoch; %s holds the trained model: --resume runs the final "
                  "test.\n", last_.c_str());
      return kExitResumable;
    }
    ctx_.before_step = false;
    if (!rank0_) return kExitOk;  // the final test runs on rank 0
    return final_test();
  }

 private:
  // One epoch's running state: the summed step statistics and training time, and the
  // steps since the last host read (summed on the step's device).
  struct EpochState {
    int64_t first_it = 1;
    Stats sums;
    double train_s = 0;
    std::chrono::steady_clock::time_point seg_start;
    int64_t seg_items = 0;
    Tensor pending;
    int64_t pending_first = 0, last_it = 0;
    double seg_seconds() const {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - seg_start).count();
    }
  };

  // Resume (or not), config.txt, the metrics log, the step runner, the curves so far.
  void start() {
    if (ctx_.resuming()) {
      ls_ = load_progress(st_, f_, last_, iters_);
      std::printf("resuming after epoch %lld%s from %s\n", static_cast<long long>(ls_.start_epoch),
                  ls_.start_iter ? (" and " + std::to_string(ls_.start_iter) + " steps of the next").c_str() : "",
                  last_.c_str());
    }
    runner_ = std::make_unique<StepRunner>(st_, f_, ctx_.device());
    // Host reads of the step statistics: every step on the CPU (free there), every
    // 50 on a GPU (each read waits for the device's queue to drain).
    log_every_ = f_.i64("log-every") > 0 ? f_.i64("log-every") : (ctx_.device().is_cuda() ? 50 : 1);
    if (!rank0_) return;  // rank 0 alone writes config.txt, metrics.jsonl and the curves
    write_file_atomic(ctx_.out_path("config.txt"), f_.to_config());
    log_ = &ctx_.open_log(ctx_.resuming() ? ls_.start_epoch : -1);
    curves_.resize(2);
    curves_[0].title = sel_;
    curves_[1].title = "train_loss";
    curves_[1].right_axis = true;
    for (const auto& l : log_->lines()) add_point(l);
  }

  EpochState begin_epoch_state(int64_t epoch) {
    EpochState e;
    const bool resumed_epoch = epoch == ls_.start_epoch + 1;
    e.first_it = resumed_epoch ? ls_.start_iter + 1 : 1;
    e.sums = resumed_epoch ? ls_.partial : Stats{};
    e.train_s = resumed_epoch ? ls_.partial_train_s : 0.0;
    ctx_.bar().phase("epoch " + std::to_string(epoch) + "/" + std::to_string(epochs_), iters_, e.first_it - 1);
    e.seg_start = std::chrono::steady_clock::now();
    e.last_it = e.first_it - 1;
    return e;
  }

  // Cost estimates for --time-limit and the ETA.
  double val_estimate() const {
    if (ls_.last_val_s >= 0) return ls_.last_val_s;
    // Not measured yet: a forward pass per validation item at the training cost per
    // item (forward + backward + update: about 3x a forward, so this errs on the safe side).
    return items_ > 0 && ls_.step_s > 0 ? st_.validation_work() * ls_.step_s / items_ : 0.0;
  }
  void update_eta(int64_t epoch, int64_t it, bool validated) {
    const double steps_left = static_cast<double>((epochs_ - epoch) * iters_ + (iters_ - it));
    const double vals_left = static_cast<double>(epochs_ - epoch) + (validated ? 0 : 1);
    ctx_.eta_seconds = ls_.step_s > 0 ? steps_left * ls_.step_s + (vals_left + 1) * val_estimate() : -1;
  }

  // The steps of one epoch from e.first_it: kExitOk at the epoch's end, or the stop's
  // or the failure's status.
  int train_steps(int64_t epoch, EpochState& e) {
    for (int64_t it = e.first_it; it <= iters_; ++it) {
      ctx_.before_step = true;
      if (ctx_.stop_requested(ls_.step_s)) {
        if (read_pending(epoch, e) != kExitOk) return kExitFailed;
        const double s = e.seg_seconds();
        ls_.total_train_s += s;
        return stop_now(epoch, it - 1, e.sums, e.train_s + s);
      }
      if (const int rc = one_step(epoch, it, e); rc != kExitOk) return rc;
    }
    ctx_.bar().finish();
    const double seg_s = e.first_it <= iters_ ? e.seg_seconds() : 0.0;
    e.train_s += seg_s;
    ls_.total_train_s += seg_s;
    return kExitOk;
  }

  // One training step: its statistics checked and added to the pending sum, and every
  // --log-every steps (and at the epoch's end) read into the epoch's sums and shown.
  int one_step(int64_t epoch, int64_t it, EpochState& e) {
    DeviceStats s = runner_->step();
    MN_CHECK(!s.names.empty() && s.values.defined() && s.values.numel() == static_cast<int64_t>(s.names.size()),
             st_.name(), ": train_step() returned ", s.names.size(), " stat names and ",
             s.values.defined() ? s.values.numel() : 0, " values");
    ctx_.count_step();
    if (e.sums.empty() && it == 1)
      for (const auto& k : s.names) e.sums.emplace_back(k, 0.0);
    MN_CHECK(e.sums.size() == s.names.size(), st_.name(), ": train_step() returned ", s.names.size(),
             " stats, the epoch has ", e.sums.size(), " (resumed from a checkpoint of another version?)");
    for (size_t i = 0; i < s.names.size(); ++i)
      MN_CHECK(e.sums[i].first == s.names[i], st_.name(), ": train_step() stat ", i, " is '", s.names[i],
               "', expected '", e.sums[i].first, "'");
    Tensor v = s.values.dtype() == DType::F64 ? s.values.contiguous().view({s.values.numel()})
                                               : s.values.to(DType::F64).contiguous().view({s.values.numel()});
    if (e.pending.defined() && e.pending.device() == v.device()) {
      e.pending = kernels::add(e.pending, v);
    } else {
      if (read_pending(epoch, e) != kExitOk) return kExitFailed;
      e.pending = v.clone();
      e.pending_first = it;
    }
    e.last_it = it;
    e.seg_items += items_;
    if ((it - e.first_it + 1) % log_every_ != 0 && it != iters_) return kExitOk;
    if (read_pending(epoch, e) != kExitOk) return kExitFailed;
    show_progress(epoch, it, e);
    return kExitOk;
  }

  // The pending statistics read to the host and added to the epoch's sums; a
  // non-finite loss stops the run (kExitFailed) naming the steps.
  int read_pending(int64_t epoch, EpochState& e) {
    if (!e.pending.defined()) return kExitOk;
    const std::vector<double> v = e.pending.to_double_vector();
    e.pending = Tensor();
    if (!std::isfinite(v[0])) {
      ctx_.bar().finish();
      const std::string when = e.pending_first == e.last_it
                                   ? "step " + std::to_string(e.last_it)
                                   : "one of steps " + std::to_string(e.pending_first) + "-" + std::to_string(e.last_it);
      std::fprintf(stderr, "\nerror: the %s became %s at epoch %lld %s; stopping. The last good checkpoint "
                   "is %s (after epoch %lld).\n", e.sums[0].first.c_str(), std::isnan(v[0]) ? "NaN" : "infinite",
                   static_cast<long long>(epoch), when.c_str(), last_.c_str(), static_cast<long long>(epoch - 1));
      return kExitFailed;
    }
    for (size_t i = 0; i < v.size(); ++i) e.sums[i].second += v[i];
    return kExitOk;
  }

  void show_progress(int64_t epoch, int64_t it, const EpochState& e) {
    const double secs = e.seg_seconds();
    ls_.step_s = secs / static_cast<double>(it - e.first_it + 1);
    update_eta(epoch, it, false);
    Stats shown;
    for (const auto& [k, val] : e.sums) shown.emplace_back(k, val / static_cast<double>(it));
    char rate[48];
    std::snprintf(rate, sizeof rate, "%.0f %s/s",
                  secs > 0 ? (items_ ? e.seg_items / secs : (it - e.first_it + 1) / secs) : 0.0,
                  items_ ? item_name_.c_str() : "steps");
    ctx_.bar().update(it, stats_text(shown, 2), rate, ctx_.eta_seconds);
  }

  // A resumable stop after `done` steps of `epoch`: last.safetensors with the partial
  // epoch, exit status 3. A stop before the first step of a fresh run is an error.
  int stop_now(int64_t epoch, int64_t done, const Stats& sums, double epoch_train_s) {
    if (ctx_.steps_this_run() == 0 && ctx_.stop_reason().rfind("--time-limit", 0) == 0)
      throw TimeLimitTooShort("--time-limit " + f_.text("time-limit") + " s is too short for even one training "
                              "step: setting up took " + Json(std::round(ctx_.run_seconds() * 10) / 10).dump() +
                              " s and a checkpoint write about " + Json(std::round(ctx_.save_seconds * 10) / 10).dump() +
                              " s; give a longer --time-limit" +
                              (ctx_.resuming() ? std::string(" (" + last_ + " is unchanged)")
                                               : " (nothing was saved, so there is nothing to --resume: run it again "
                                                 "without --resume)"));
    nn::Metadata md = progress_metadata();
    put_progress(md, ls_, epoch - 1, done, sums, epoch_train_s, ls_.best, ls_.best_epoch);
    if (rank0_) nn::save_checkpoint(last_, st_.model(), st_.optimizer(), md);
    ctx_.bar().finish();
    std::printf("\nstopped: %s, at epoch %lld after %lld of %lld steps%s. The progress is saved in %s; "
                "continue with the same command and --resume.\n", ctx_.stop_reason().c_str(),
                static_cast<long long>(epoch), static_cast<long long>(done), static_cast<long long>(iters_),
                done == iters_ ? " (validation pending)" : "", last_.c_str());
    std::fflush(stdout);
    return kExitResumable;
  }

  nn::Metadata progress_metadata() const {
    nn::Metadata md;
    st_.save_state(md);
    md["study"] = st_.name();
    md["config"] = f_.to_json();
    if (dist_) md["world_size"] = std::to_string(ctx_.world_size());
    return md;
  }

  // The epoch's validation, its metrics line, the best and last checkpoints, the curve.
  void validate_and_save(int64_t epoch, const EpochState& e) {
    update_eta(epoch, iters_, false);
    ctx_.bar().phase("validation " + std::to_string(epoch) + "/" + std::to_string(epochs_), 1, 0);
    ctx_.bar().update(0, "", "", ctx_.eta_seconds);
    const auto val_start = std::chrono::steady_clock::now();
    const Stats val = st_.validate();
    const double val_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - val_start).count();
    ls_.last_val_s = val_s;
    update_eta(epoch, iters_, true);
    ctx_.bar().update(1, "", "", ctx_.eta_seconds);
    ctx_.bar().finish();
    const double score = value_of(val, sel_, "validate()");
    const bool improved = score > ls_.best;
    if (improved) {
      ls_.best = score;
      ls_.best_epoch = epoch;
    }
    const double ips = e.train_s > 0 ? (items_ ? iters_ * items_ : iters_) / e.train_s : 0.0;
    const Json line = epoch_line(epoch, e.sums, iters_, val, st_.epoch_extras(), e.train_s, val_s, ips,
                                 items_ ? item_name_ : "steps");
    log_->write(line);
    Stats means;
    for (const auto& [k, v] : e.sums) means.emplace_back(k, v / static_cast<double>(iters_));
    std::printf("epoch %lld: %s | validation: %s (best %s %.4g at epoch %lld)\n", static_cast<long long>(epoch),
                stats_text(means, 8).c_str(), stats_text(val, 8).c_str(), sel_.c_str(), ls_.best,
                static_cast<long long>(ls_.best_epoch));
    std::fflush(stdout);
    save_epoch(epoch, improved);
    add_point(line);
    plot_png(ctx_.out_path("learning_curve.png"), st_.plot_title(), "epoch", sel_, "training loss", curves_);
  }

  void save_epoch(int64_t epoch, bool improved) {
    const auto save_start = std::chrono::steady_clock::now();
    nn::Metadata md = progress_metadata();
    put_progress(md, ls_, epoch, 0, {}, 0.0, ls_.best, ls_.best_epoch);
    if (improved) {
      // best first, then last.safetensors naming best's content hash: a kill in
      // between leaves a last.safetensors whose hash no longer matches the new
      // best, which the final test refuses instead of scoring another model.
      md.erase("best_xxh3");
      nn::save_checkpoint(best_path_, st_.model(), nullptr, md);
      ls_.best_hash = file_xxh3(best_path_);
      md["best_xxh3"] = ls_.best_hash;
    }
    nn::save_checkpoint(last_, st_.model(), st_.optimizer(), md);
    ctx_.save_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - save_start).count();
  }

  void add_point(const Json& l) {
    auto num = [&](const std::string& k) { return l.contains(k) && l[k].is_number() ? l[k].get<double>() : NAN; };
    curves_[0].x.push_back(num("epoch"));
    curves_[0].y.push_back(num(sel_));
    curves_[1].x.push_back(num("epoch"));
    curves_[1].y.push_back(num("train_loss"));
  }

  // The final test with the model selected on validation, summary.json and report.md.
  int final_test() {
    const double total_items =
        static_cast<double>(epochs_) * static_cast<double>(iters_) * std::max<int64_t>(items_, 1);
    Json& sum = ctx_.summary();
    sum["study"] = st_.name();
    sum["device"] = device_name(ctx_.device());
    sum["precision"] = precision_json();
    sum["config"] = Json::parse(f_.to_json());
    sum["best_" + sel_] = metric_number(ls_.best);
    sum["best_epoch"] = ls_.best_epoch;
    sum["model_selection"] = st_.keeps_last_epoch() ? "last epoch" : "best validation " + sel_;
    sum["cuda_graph"] = runner_->status();
    sum["train_seconds"] = metric_number(ls_.total_train_s);
    sum[std::string("train_") + (items_ ? item_name_ : "steps") + "_per_second"] =
        metric_number(ls_.total_train_s > 0 ? total_items / ls_.total_train_s : 0);
    sum["best_checkpoint"] = load_best_model();
    if (dist_) {
      Json dp = st_.data_parallel_summary();
      dp["ranks"] = ctx_.world_size();
      dp["backend"] = ctx_.device_comm().backend();
      sum["data_parallel"] = dp;
    }
    const std::string test = st_.final_test(sum);
    std::ostringstream rep;
    rep << "# " << st_.name() << ": report\n\n"
        << "- device: " << device_name(ctx_.device()) << "\n"
        << "- precision: " << precision_json()["conv"].get<std::string>() << " convolutions, "
        << precision_json()["matmul"].get<std::string>() << " dense layers (distances, miners, losses: fp32)\n"
        << "- " << epochs_ << " epochs x " << iters_ << " steps, " << format_duration(ls_.total_train_s)
        << " of training\n"
        << model_line() << data_parallel_line(sum)
        << "- outputs: metrics.jsonl, learning_curve.png, last/best.safetensors, summary.json, config.txt\n\n"
        << "## Epochs\n\n" << epochs_table(log_->lines(), sel_) << "\n";
    if (!test.empty()) rep << "## Final test (best validation model)\n\n" << test << "\n";
    ctx_.report(rep.str());
    return kExitOk;
  }

  std::string data_parallel_line(const Json& sum) const {
    if (!dist_) return "";
    std::string l = "- data parallel: " + std::to_string(ctx_.world_size()) + " ranks (" +
                    sum["data_parallel"]["backend"].get<std::string>() + "), each computing 1/" +
                    std::to_string(ctx_.world_size()) + " of every batch, gradients averaged";
    const Json& dp = sum["data_parallel"];
    if (dp.contains("gradient_buckets"))
      l += " (" + dp["gradient_buckets"].dump() + " bucket(s), " + dp["gradient_bytes_per_step"].dump() +
           " bytes per step)";
    if (dp.contains("mining")) l += "; mining: " + dp["mining"].get<std::string>();
    return l + "\n";
  }

  std::string model_line() const {
    if (st_.keeps_last_epoch()) return "- model: the last epoch's (the study reports its final model; no selection on "
                                       "validation)\n";
    std::ostringstream o;
    o << "- best validation " << sel_ << ": " << ls_.best << " at epoch " << ls_.best_epoch << "\n";
    return o.str();
  }

  // Loads best.safetensors (verified against the hash taken when it was written) for
  // the final test; null when no epoch had a finite validation score (the last model).
  Json load_best_model() {
    if (ls_.best_epoch <= 0) return nullptr;
    // The model scored below must be the one summary.json names as best: hash the
    // file before and after loading it and compare with the hash taken when written.
    const std::string before = file_xxh3(best_path_);
    MN_CHECK(ls_.best_hash.empty() || before == ls_.best_hash, "final test: '", best_path_, "' is not the checkpoint "
             "of the best epoch ", ls_.best_epoch, " (its content hash is ", before, ", the run wrote ", ls_.best_hash,
             "): the file was replaced or its write was interrupted; rerun the study in a new --out-dir");
    nn::load_checkpoint(best_path_, st_.model(), nullptr);
    const std::string after = file_xxh3(best_path_);
    MN_CHECK(after == before, "final test: '", best_path_, "' changed while it was being loaded; is another run "
             "writing to this --out-dir?");
    Json b;
    b["file"] = "best.safetensors";
    b["epoch"] = ls_.best_epoch;
    b["xxh3_64"] = before;
    b["verified"] = !ls_.best_hash.empty();  // false only for runs resumed from an older version's checkpoint
    return b;
  }

  Study& st_;
  Context& ctx_;
  const Flags& f_;
  const bool rank0_, dist_;  // rank 0 alone validates and writes; dist_: more than one rank
  const std::string last_, best_path_;
  const int64_t epochs_, iters_, items_;
  const std::string sel_, item_name_;
  LoopState ls_;
  MetricsLog* log_ = nullptr;
  std::unique_ptr<StepRunner> runner_;
  int64_t log_every_ = 1;
  std::vector<Series> curves_;
};

int train_epochs(Study& st, Context& ctx) { return EpochLoop(st, ctx).run(); }

}  // namespace

namespace {
// The architecture flags (Study::architecture_keys) whose value did not come
// from `file`'s metadata config, each as "--key value (where it came from)".
std::string flags_not_from_file(const Study& st, const Flags& f, const std::string& file) {
  const nn::Metadata md = nn::read_safetensors_metadata(file);
  auto c = md.find("config");
  const Json cfg = c == md.end() ? Json() : Json::parse(c->second, nullptr, false);
  std::string out;
  for (const auto& k : st.architecture_keys()) {
    if (!f.declared(k) || f.origin(k) == Flags::Origin::Checkpoint) continue;
    const Flags::Origin o = f.origin(k);
    const std::string from = o == Flags::Origin::CommandLine ? "the command line"
                             : o == Flags::Origin::Config    ? "the --config file"
                             : o == Flags::Origin::Preset    ? "a preset"
                                                             : "the default";
    const bool stored = cfg.is_object() && cfg.contains(k);
    const std::string theirs = !stored ? "" : cfg[k].is_string() ? cfg[k].get<std::string>() : cfg[k].dump();
    if (stored && theirs == f.text(k)) continue;
    out += (out.empty() ? "--" : ", --") + k + " " + f.text(k) + " (" + from + "; the file's config " +
           (stored ? "has " + theirs : "has no '" + k + "': written by an older version or edited?") + ")";
  }
  return out;
}
}  // namespace

void check_architecture_matches(Study& st, const Flags& f, const std::string& file, const char* flag) {
  const std::map<std::string, Shape> shapes = nn::read_safetensors_shapes(file);
  std::set<std::string> model_names;
  std::string mismatch;  // the first tensor of the model the file lacks or has in another shape
  auto visit = [&](const std::string& name, const Tensor& t) {
    model_names.insert(name);
    auto it = shapes.find(name);
    if (!mismatch.empty()) return;
    if (it == shapes.end())
      mismatch = "has no tensor '" + name + "' (" + shape_str(t.shape()) + " in the model)";
    else if (it->second != t.shape())
      mismatch = "has tensor '" + name + "' of shape " + shape_str(it->second) + " but the model's is " +
                 shape_str(t.shape());
  };
  for (const auto& [name, v] : st.model().named_parameters()) visit(name, v.data());
  for (const auto& [name, b] : st.model().named_buffers())
    if (b->defined()) visit(name, *b);
  std::string unused;  // tensors of the file the model does not have (not the optimizer's)
  int64_t n_unused = 0;
  for (const auto& [name, s] : shapes)
    if (!model_names.count(name) && name.rfind("optim.", 0) != 0) {
      if (++n_unused <= 4) unused += (unused.empty() ? "'" : ", '") + name + "' " + shape_str(s);
    }
  if (mismatch.empty() && n_unused == 0) return;
  const std::string sources = flags_not_from_file(st, f, file);
  const std::string why = sources.empty() ? "the model was built from its metadata config, which therefore disagrees "
                                            "with its tensors (edited, or written by another version)"
                                          : "the architecture flags not taken from its metadata config: " + sources;
  const bool resuming = std::string(flag) == "--resume";
  MN_CHECK(mismatch.empty(), flag, ": '", file, "' ", mismatch, ": the architecture flags build the model and win "
           "over the file, whose tensors do not fit them; ", why, resuming ? ". This run cannot be resumed; start a "
           "new one in another --out-dir" : ". Give the architecture flags that match its tensors");
  std::fprintf(stderr, "warning: %s: '%s' holds %lld tensor%s the model does not have (%s%s): the architecture flags "
               "build the model and win over the file, so these weights are ignored; %s\n", flag, file.c_str(),
               static_cast<long long>(n_unused), n_unused == 1 ? "" : "s", unused.c_str(), n_unused > 4 ? ", ..." : "",
               why.c_str());
}

// The ranks' shards of each batch and the averaged gradients depend on the world's
// size: a run continues with the size it started with.
void check_resume_world_size(const nn::Metadata& md, const std::string& file) {
  const int64_t saved = md.count("world_size") ? md_int(md, "world_size", file, 1, 1 << 20) : 1;
  const int now = world_size_from_env();
  MN_CHECK(saved == now, "--resume: '", file, "' was written by a run over ", saved,
           saved == 1 ? " process" : " ranks", " but this run has ", now, ": resume it with ",
           saved == 1 ? std::string("a single process (no mpirun)") : "mpirun -np " + std::to_string(saved),
           " (changing the number of ranks mid-run is not supported), or start a new run in another --out-dir");
}

void check_resume_checkpoint(const std::string& out_dir, const std::string& ckpt) {
  struct stat s;
  if (::stat(ckpt.c_str(), &s) == 0 || errno != ENOENT) {
    check_regular_file(ckpt, "--resume");
    return;
  }
  // No checkpoint: say whether a run was started in --out-dir (it writes
  // config.txt before its first step) and why it left nothing to resume.
  std::ifstream cfg(out_dir + "/config.txt");
  if (!cfg) {
    MN_THROW("--resume: cannot open '", ckpt, "': ", std::strerror(ENOENT), "; no run was started in --out-dir '",
             out_dir, "' (it has no config.txt either): start one without --resume");
  }
  std::string line, limit;
  while (std::getline(cfg, line))
    if (line.rfind("time-limit = ", 0) == 0) limit = line.substr(13);
  const bool had_limit = !limit.empty() && std::strtod(limit.c_str(), nullptr) > 0;
  MN_THROW("--resume: cannot open '", ckpt, "': ", std::strerror(ENOENT), "; the run started in --out-dir '", out_dir,
           "' (its config.txt exists) stopped before it saved anything: a run writes last.safetensors only when it "
           "stops resumably (exit status 3) or at the end of an epoch, and ",
           had_limit ? "either its --time-limit " + limit + " s (config.txt) was too short for even one training "
                       "step, which refuses a new run before it starts, or it failed before its first checkpoint"
                     : std::string("it failed before its first checkpoint (see that run's error)"),
           ". Start the run again without --resume", had_limit ? " and with a longer --time-limit" : "");
}

int run_training(Study& st, Context& ctx) {
  int rc;
  if (st.epoch_shaped()) {
    st.setup(ctx);
    rc = train_epochs(st, ctx);
  } else {
    st.setup(ctx);
    ctx.summary()["study"] = st.name();
    ctx.summary()["device"] = device_name(ctx.device());
    ctx.summary()["precision"] = precision_json();
    ctx.summary()["config"] = Json::parse(ctx.flags().to_json());
    write_file_atomic(ctx.out_path("config.txt"), ctx.flags().to_config());
    rc = st.run(ctx);
  }
  if (rc == kExitOk && ctx.rank() == 0) ctx.finish_outputs();
  return rc;
}

}  // namespace mn::exp
