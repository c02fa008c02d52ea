// The epoch loop's end of an epoch (epoch_loop.h), on rank 0: validation with its
// cost measured for the ETA and --time-limit, the best score so far, the metrics
// line in metrics.jsonl and on stdout, best.safetensors (when improved) and then
// last.safetensors naming best's content hash, and the learning curve. It calls the
// Study's validate(), put_progress (resume.cpp), file_hash.h and plot_png.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include "experiments/common/epoch_loop.h"
#include "experiments/common/file_hash.h"
#include "runtime/error.h"

namespace mn::exp {

namespace {
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
}  // namespace

void EpochLoop::validate_and_save(int64_t epoch, const EpochState& e) {
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

void EpochLoop::save_epoch(int64_t epoch, bool improved) {
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

void EpochLoop::add_point(const Json& l) {
  auto num = [&](const std::string& k) { return l.contains(k) && l[k].is_number() ? l[k].get<double>() : NAN; };
  curves_[0].x.push_back(num("epoch"));
  curves_[0].y.push_back(num(sel_));
  curves_[1].x.push_back(num("epoch"));
  curves_[1].y.push_back(num("train_loss"));
}

}  // namespace mn::exp
