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
      signals_(std::make_unique<SignalGuard>()) {}
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

int train_epochs(Study& st, Context& ctx) {
  const Flags& f = ctx.flags();
  const std::string last = ctx.out_path("last.safetensors"), best_path = ctx.out_path("best.safetensors");
  const int64_t epochs = f.i64("epochs"), iters = st.steps_per_epoch(), items = st.items_per_step();
  MN_CHECK(iters > 0, st.name(), ": steps_per_epoch() must be positive");
  LoopState ls;
  if (ctx.resuming()) {
    ls = load_progress(st, f, last, iters);
    std::printf("resuming after epoch %lld%s from %s\n", static_cast<long long>(ls.start_epoch),
                ls.start_iter ? (" and " + std::to_string(ls.start_iter) + " steps of the next").c_str() : "",
                last.c_str());
  }
  write_file_atomic(ctx.out_path("config.txt"), f.to_config());
  MetricsLog& log = ctx.open_log(ctx.resuming() ? ls.start_epoch : -1);
  const std::string sel = st.selection_metric(), item_name = st.items_name();
  StepRunner runner(st, f, ctx.device());
  // Host reads of the step statistics: every step on the CPU (free there), every
  // 50 on a GPU (each read waits for the device's queue to drain).
  const int64_t log_every = f.i64("log-every") > 0 ? f.i64("log-every") : (ctx.device().is_cuda() ? 50 : 1);

  // Cost estimates for --time-limit and the ETA.
  auto val_estimate = [&] {
    if (ls.last_val_s >= 0) return ls.last_val_s;
    // Not measured yet: a forward pass per validation item at the training
    // cost per item (forward + backward + update: about 3x a forward, so this
    // errs on the safe side).
    return items > 0 && ls.step_s > 0 ? st.validation_work() * ls.step_s / items : 0.0;
  };
  auto update_eta = [&](int64_t epoch, int64_t it, bool validated) {
    const double steps_left = static_cast<double>((epochs - epoch) * iters + (iters - it));
    const double vals_left = static_cast<double>(epochs - epoch) + (validated ? 0 : 1);
    ctx.eta_seconds = ls.step_s > 0 ? steps_left * ls.step_s + (vals_left + 1) * val_estimate() : -1;
  };
  auto stop_now = [&](int64_t epoch, int64_t done, const Stats& sums, double epoch_train_s) {
    if (ctx.steps_this_run() == 0 && ctx.stop_reason().rfind("--time-limit", 0) == 0)
      throw TimeLimitTooShort("--time-limit " + f.text("time-limit") + " s is too short for even one training "
                              "step: setting up took " + Json(std::round(ctx.run_seconds() * 10) / 10).dump() +
                              " s and a checkpoint write about " + Json(std::round(ctx.save_seconds * 10) / 10).dump() +
                              " s; give a longer --time-limit" +
                              (ctx.resuming() ? std::string(" (" + last + " is unchanged)")
                                              : " (nothing was saved, so there is nothing to --resume: run it again "
                                                "without --resume)"));
    nn::Metadata md;
    st.save_state(md);
    md["study"] = st.name();
    md["config"] = f.to_json();
    put_progress(md, ls, epoch - 1, done, sums, epoch_train_s, ls.best, ls.best_epoch);
    nn::save_checkpoint(last, st.model(), st.optimizer(), md);
    ctx.bar().finish();
    std::printf("\nstopped: %s, at epoch %lld after %lld of %lld steps%s. The progress is saved in %s; "
                "continue with the same command and --resume.\n", ctx.stop_reason().c_str(),
                static_cast<long long>(epoch), static_cast<long long>(done), static_cast<long long>(iters),
                done == iters ? " (validation pending)" : "", last.c_str());
    std::fflush(stdout);
    return kExitResumable;
  };

  std::vector<Series> curves(2);
  curves[0].title = sel;
  curves[1].title = "train_loss";
  curves[1].right_axis = true;
  auto add_point = [&](const Json& l) {
    auto num = [&](const std::string& k) { return l.contains(k) && l[k].is_number() ? l[k].get<double>() : NAN; };
    curves[0].x.push_back(num("epoch"));
    curves[0].y.push_back(num(sel));
    curves[1].x.push_back(num("epoch"));
    curves[1].y.push_back(num("train_loss"));
  };
  for (const auto& l : log.lines()) add_point(l);

  for (int64_t epoch = ls.start_epoch + 1; epoch <= epochs; ++epoch) {
    st.begin_epoch(epoch);
    const bool resumed_epoch = epoch == ls.start_epoch + 1;
    const int64_t first_it = resumed_epoch ? ls.start_iter + 1 : 1;
    Stats sums = resumed_epoch ? ls.partial : Stats{};
    double epoch_train_s = resumed_epoch ? ls.partial_train_s : 0.0;
    ctx.bar().phase("epoch " + std::to_string(epoch) + "/" + std::to_string(epochs), iters, first_it - 1);
    const auto seg_start = std::chrono::steady_clock::now();
    auto seg_seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - seg_start).count(); };
    int64_t seg_items = 0;
    // The steps since the last read: their statistics summed on the step's
    // device (DeviceStats), read into `sums` every --log-every steps, before a
    // stop and at the end of the epoch: one host read per interval.
    Tensor pending;
    int64_t pending_first = 0, last_it = first_it - 1;
    auto read_pending = [&]() -> int {
      if (!pending.defined()) return kExitOk;
      const std::vector<double> v = pending.to_double_vector();
      pending = Tensor();
      if (!std::isfinite(v[0])) {
        ctx.bar().finish();
        const std::string when = pending_first == last_it
                                     ? "step " + std::to_string(last_it)
                                     : "one of steps " + std::to_string(pending_first) + "-" + std::to_string(last_it);
        std::fprintf(stderr, "\nerror: the %s became %s at epoch %lld %s; stopping. The last good checkpoint "
                     "is %s (after epoch %lld).\n", sums[0].first.c_str(), std::isnan(v[0]) ? "NaN" : "infinite",
                     static_cast<long long>(epoch), when.c_str(), last.c_str(), static_cast<long long>(epoch - 1));
        return kExitFailed;
      }
      for (size_t i = 0; i < v.size(); ++i) sums[i].second += v[i];
      return kExitOk;
    };
    for (int64_t it = first_it; it <= iters; ++it) {
      ctx.before_step = true;
      if (ctx.stop_requested(ls.step_s)) {
        if (read_pending() != kExitOk) return kExitFailed;
        const double s = seg_seconds();
        ls.total_train_s += s;
        return stop_now(epoch, it - 1, sums, epoch_train_s + s);
      }
      DeviceStats s = runner.step();
      MN_CHECK(!s.names.empty() && s.values.defined() && s.values.numel() == static_cast<int64_t>(s.names.size()),
               st.name(), ": train_step() returned ", s.names.size(), " stat names and ",
               s.values.defined() ? s.values.numel() : 0, " values");
      ctx.count_step();
      if (sums.empty() && it == 1) for (const auto& k : s.names) sums.emplace_back(k, 0.0);
      MN_CHECK(sums.size() == s.names.size(), st.name(), ": train_step() returned ", s.names.size(),
               " stats, the epoch has ", sums.size(), " (resumed from a checkpoint of another version?)");
      for (size_t i = 0; i < s.names.size(); ++i)
        MN_CHECK(sums[i].first == s.names[i], st.name(), ": train_step() stat ", i, " is '", s.names[i],
                 "', expected '", sums[i].first, "'");
      Tensor v = s.values.dtype() == DType::F64 ? s.values.contiguous().view({s.values.numel()})
                                                 : s.values.to(DType::F64).contiguous().view({s.values.numel()});
      if (pending.defined() && pending.device() == v.device()) {
        pending = kernels::add(pending, v);
      } else {
        if (read_pending() != kExitOk) return kExitFailed;
        pending = v.clone();
        pending_first = it;
      }
      last_it = it;
      seg_items += items;
      if ((it - first_it + 1) % log_every != 0 && it != iters) continue;
      if (read_pending() != kExitOk) return kExitFailed;
      const double e = seg_seconds();
      ls.step_s = e / static_cast<double>(it - first_it + 1);
      update_eta(epoch, it, false);
      Stats shown;
      for (const auto& [k, val] : sums) shown.emplace_back(k, val / static_cast<double>(it));
      char rate[48];
      std::snprintf(rate, sizeof rate, "%.0f %s/s", e > 0 ? (items ? seg_items / e : (it - first_it + 1) / e) : 0.0,
                    items ? item_name.c_str() : "steps");
      ctx.bar().update(it, stats_text(shown, 2), rate, ctx.eta_seconds);
    }
    ctx.bar().finish();
    const double seg_s = first_it <= iters ? seg_seconds() : 0.0;
    epoch_train_s += seg_s;
    ls.total_train_s += seg_s;
    ctx.before_step = false;
    if (ctx.stop_requested(val_estimate())) return stop_now(epoch, iters, sums, epoch_train_s);

    update_eta(epoch, iters, false);
    ctx.bar().phase("validation " + std::to_string(epoch) + "/" + std::to_string(epochs), 1, 0);
    ctx.bar().update(0, "", "", ctx.eta_seconds);
    const auto val_start = std::chrono::steady_clock::now();
    const Stats val = st.validate();
    const double val_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - val_start).count();
    ls.last_val_s = val_s;
    update_eta(epoch, iters, true);
    ctx.bar().update(1, "", "", ctx.eta_seconds);
    ctx.bar().finish();
    const double score = value_of(val, sel, "validate()");
    const bool improved = score > ls.best;
    if (improved) {
      ls.best = score;
      ls.best_epoch = epoch;
    }
    const double ips = epoch_train_s > 0 ? (items ? iters * items : iters) / epoch_train_s : 0.0;
    const Json line = epoch_line(epoch, sums, iters, val, st.epoch_extras(), epoch_train_s, val_s, ips,
                                 items ? item_name : "steps");
    log.write(line);
    Stats means;
    for (const auto& [k, v] : sums) means.emplace_back(k, v / static_cast<double>(iters));
    std::printf("epoch %lld: %s | validation: %s (best %s %.4g at epoch %lld)\n", static_cast<long long>(epoch),
                stats_text(means, 8).c_str(), stats_text(val, 8).c_str(), sel.c_str(), ls.best,
                static_cast<long long>(ls.best_epoch));
    std::fflush(stdout);
    const auto save_start = std::chrono::steady_clock::now();
    nn::Metadata md;
    st.save_state(md);
    md["study"] = st.name();
    md["config"] = f.to_json();
    put_progress(md, ls, epoch, 0, {}, 0.0, ls.best, ls.best_epoch);
    if (improved) {
      // best first, then last.safetensors naming best's content hash: a kill in
      // between leaves a last.safetensors whose hash no longer matches the new
      // best, which the final test refuses instead of scoring another model.
      md.erase("best_xxh3");
      nn::save_checkpoint(best_path, st.model(), nullptr, md);
      ls.best_hash = file_xxh3(best_path);
      md["best_xxh3"] = ls.best_hash;
    }
    nn::save_checkpoint(last, st.model(), st.optimizer(), md);
    ctx.save_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - save_start).count();
    add_point(line);
    plot_png(ctx.out_path("learning_curve.png"), st.plot_title(), "epoch", sel, "training loss", curves);
  }
  if (g_stop_signal) {
    std::printf("\nstopped by a signal after the last epoch; %s holds the trained model: --resume runs the final "
                "test.\n", last.c_str());
    return kExitResumable;
  }
  ctx.before_step = false;

  // Final test with the model selected on validation.
  const double total_items = static_cast<double>(epochs) * static_cast<double>(iters) * std::max<int64_t>(items, 1);
  Json& sum = ctx.summary();
  sum["study"] = st.name();
  sum["device"] = device_name(ctx.device());
  sum["precision"] = precision_json();
  sum["config"] = Json::parse(f.to_json());
  sum["best_" + sel] = metric_number(ls.best);
  sum["best_epoch"] = ls.best_epoch;
  sum["cuda_graph"] = runner.status();
  sum["train_seconds"] = metric_number(ls.total_train_s);
  sum[std::string("train_") + (items ? item_name : "steps") + "_per_second"] =
      metric_number(ls.total_train_s > 0 ? total_items / ls.total_train_s : 0);
  if (ls.best_epoch > 0) {
    // The model scored below must be the one summary.json names as best: hash
    // the file before and after loading it and compare with the hash taken
    // when it was written.
    const std::string before = file_xxh3(best_path);
    MN_CHECK(ls.best_hash.empty() || before == ls.best_hash, "final test: '", best_path, "' is not the checkpoint "
             "of the best epoch ", ls.best_epoch, " (its content hash is ", before, ", the run wrote ", ls.best_hash,
             "): the file was replaced or its write was interrupted; rerun the study in a new --out-dir");
    nn::load_checkpoint(best_path, st.model(), nullptr);
    const std::string after = file_xxh3(best_path);
    MN_CHECK(after == before, "final test: '", best_path, "' changed while it was being loaded; is another run "
             "writing to this --out-dir?");
    Json b;
    b["file"] = "best.safetensors";
    b["epoch"] = ls.best_epoch;
    b["xxh3_64"] = before;
    b["verified"] = !ls.best_hash.empty();  // false only for runs resumed from an older version's checkpoint
    sum["best_checkpoint"] = b;
  } else {
    sum["best_checkpoint"] = nullptr;  // no finite validation score: the final test uses the last model
  }
  const std::string test = st.final_test(sum);
  std::ostringstream rep;
  rep << "# " << st.name() << ": report\n\n"
      << "- device: " << device_name(ctx.device()) << "\n"
      << "- precision: " << precision_json()["conv"].get<std::string>() << " convolutions, "
      << precision_json()["matmul"].get<std::string>() << " dense layers (distances, miners, losses: fp32)\n"
      << "- " << epochs << " epochs x " << iters << " steps, " << format_duration(ls.total_train_s) << " of training\n"
      << "- best validation " << sel << ": " << ls.best << " at epoch " << ls.best_epoch << "\n"
      << "- outputs: metrics.jsonl, learning_curve.png, last/best.safetensors, summary.json, config.txt\n\n"
      << "## Epochs\n\n" << epochs_table(log.lines(), sel) << "\n";
  if (!test.empty()) rep << "## Final test (best validation model)\n\n" << test << "\n";
  ctx.report(rep.str());
  return kExitOk;
}

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
  if (rc == kExitOk) ctx.finish_outputs();
  return rc;
}

}  // namespace mn::exp
