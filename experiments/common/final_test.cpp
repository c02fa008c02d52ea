// The epoch loop's end of the run (epoch_loop.h), on rank 0: best.safetensors
// loaded and verified against the content hash taken when it was written, the
// study's final test, summary.json's fields (device, precision, config, best
// epoch, throughput, CUDA graph, data parallel) and report.md's header, model and
// epochs table. It calls the Study's final_test(), precision_json
// (harness_flags.cpp) and file_hash.h; the Context writes the files.
#include <algorithm>
#include <sstream>
#include <string>

#include "experiments/common/epoch_loop.h"
#include "experiments/common/file_hash.h"
#include "runtime/error.h"

namespace mn::exp {

namespace {
std::string epochs_table(const std::vector<Json>& lines, const std::string& sel) {
  std::ostringstream os;
  os << "| epoch | train_loss | " << sel << " |\n|---:|---:|---:|\n";
  for (const auto& l : lines) {
    auto num = [&](const char* k) { return l.contains(k) && l[k].is_number() ? l[k].dump() : std::string("-"); };
    os << "| " << num("epoch") << " | " << num("train_loss") << " | " << num(sel.c_str()) << " |\n";
  }
  return os.str();
}
}  // namespace

int EpochLoop::final_test() {
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

std::string EpochLoop::data_parallel_line(const Json& sum) const {
  if (!dist_) return "";
  std::string l = "- data parallel: " + std::to_string(ctx_.world_size()) + " ranks (" +
                  sum["data_parallel"]["backend"].get<std::string>() + "), each computing 1/" +
                  std::to_string(ctx_.world_size()) + " of every batch, gradients averaged";
  const Json& dp = sum["data_parallel"];
  if (dp.contains("gradient_buckets"))
    l += " (" + dp["gradient_buckets"].dump() + " bucket(s), " + dp["gradient_bytes_per_step"].dump() +
         " bytes per step)";
  if (dp.contains("mining")) l += "; mining: " + dp["mining"].get<std::string>();
  if (dp.contains("batch_norm")) l += "; batch-norm statistics: " + dp["batch_norm"].get<std::string>();
  return l + "\n";
}

std::string EpochLoop::model_line() const {
  if (st_.keeps_last_epoch()) return "- model: the last epoch's (the study reports its final model; no selection on "
                                     "validation)\n";
  std::ostringstream o;
  o << "- best validation " << sel_ << ": " << ls_.best << " at epoch " << ls_.best_epoch << "\n";
  return o.str();
}

Json EpochLoop::load_best_model() {
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

}  // namespace mn::exp
