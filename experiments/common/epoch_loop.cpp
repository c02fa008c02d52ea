// The epoch loop's run and training phases (epoch_loop.h): the constructor, run()
// (epochs x steps, a stop between them, then the final test), start (resume,
// config.txt, the metrics log, the step runner), the training steps with their
// checks and the reads of their statistics, the progress line and the ETA, and a
// resumable stop (stop_now). It calls the Context (run_context.cpp), the StepRunner,
// put_progress / load_progress (resume.cpp) and the other phases' methods.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "experiments/common/epoch_loop.h"
#include "kernels/elementwise.h"
#include "runtime/error.h"

namespace mn::exp {

EpochLoop::EpochLoop(Study& st, Context& ctx)
    : st_(st), ctx_(ctx), f_(ctx.flags()), rank0_(ctx.rank() == 0), dist_(ctx.world_size() > 1),
      last_(ctx.out_path("last.safetensors")),
      best_path_(ctx.out_path("best.safetensors")), epochs_(f_.i64("epochs")), iters_(st.steps_per_epoch()),
      items_(st.items_per_step()), sel_(st.selection_metric()), item_name_(st.items_name()) {
  MN_CHECK(iters_ > 0, st.name(), ": steps_per_epoch() must be positive");
}

int EpochLoop::run() {
  start();
  for (int64_t epoch = ls_.start_epoch + 1; epoch <= epochs_; ++epoch) {
    st_.begin_epoch(epoch);
    EpochState e = begin_epoch_state(epoch);
    if (const int rc = train_steps(epoch, e); rc != kExitOk) return rc;
    ctx_.before_step = false;
    if (ctx_.stop_requested(val_estimate())) return stop_now(epoch, iters_, e.sums, e.train_s);
    if (rank0_) validate_and_save(epoch, e);  // the other ranks go on and wait in their next collective
  }
  if (stop_signal_received()) {
    std::printf("\nstopped by a signal after the last epoch; %s holds the trained model: --resume runs the final "
                "test.\n", last_.c_str());
    return kExitResumable;
  }
  ctx_.before_step = false;
  if (!rank0_) return kExitOk;  // the final test runs on rank 0
  return final_test();
}

void EpochLoop::start() {
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

EpochLoop::EpochState EpochLoop::begin_epoch_state(int64_t epoch) {
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

double EpochLoop::val_estimate() const {
  if (ls_.last_val_s >= 0) return ls_.last_val_s;
  // Not measured yet: a forward pass per validation item at the training cost per
  // item (forward + backward + update: about 3x a forward, so this errs on the safe side).
  return items_ > 0 && ls_.step_s > 0 ? st_.validation_work() * ls_.step_s / items_ : 0.0;
}

void EpochLoop::update_eta(int64_t epoch, int64_t it, bool validated) {
  const double steps_left = static_cast<double>((epochs_ - epoch) * iters_ + (iters_ - it));
  const double vals_left = static_cast<double>(epochs_ - epoch) + (validated ? 0 : 1);
  ctx_.eta_seconds = ls_.step_s > 0 ? steps_left * ls_.step_s + (vals_left + 1) * val_estimate() : -1;
}

int EpochLoop::train_steps(int64_t epoch, EpochState& e) {
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

int EpochLoop::one_step(int64_t epoch, int64_t it, EpochState& e) {
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

int EpochLoop::read_pending(int64_t epoch, EpochState& e) {
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

void EpochLoop::show_progress(int64_t epoch, int64_t it, const EpochState& e) {
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

int EpochLoop::stop_now(int64_t epoch, int64_t done, const Stats& sums, double epoch_train_s) {
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

nn::Metadata EpochLoop::progress_metadata() const {
  nn::Metadata md;
  st_.save_state(md);
  md["study"] = st_.name();
  md["config"] = f_.to_json();
  if (dist_) md["world_size"] = std::to_string(ctx_.world_size());
  return md;
}

int train_epochs(Study& st, Context& ctx) { return EpochLoop(st, ctx).run(); }

}  // namespace mn::exp
