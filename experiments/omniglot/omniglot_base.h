// What the two Omniglot studies share (see omniglot_study.h): flags and the
// CPU demo preset, data (StudyData), the optimizer and its schedules,
// validation (verification + one-shot tasks), the final test (Lake's 400
// trials, --test-dir tasks) and the RNG state in checkpoints. A subclass adds
// its network, training step and scoring through the protected hooks.
// Definitions: omniglot_base.cpp (flags, set-up, checkpoints), omniglot_eval.cpp
// (scores, validation, the final test), one_shot_report.{h,cpp} (its JSON and lines).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "autograd/variable.h"
#include "data/tasks.h"
#include "experiments/common/harness.h"
#include "experiments/omniglot/one_shot_report.h"
#include "experiments/omniglot/study_data.h"
#include "nn/models/conv4.h"
#include "nn/distributed.h"
#include "nn/models/koch.h"
#include "nn/optim/optimizer.h"
#include "nn/optim/param_groups.h"
#include "nn/optim/schedule.h"

namespace mn::exp {

// A loss's stats tensor (nn::LossOutput::stats: loss, active terms, mean
// positive, mean negative, normaliser) as a step's DeviceStats under `names`:
// the first four, the active count divided by `n`; computed on the loss's
// device with no host read.
DeviceStats loss_device_stats(const Tensor& stats, double n, std::vector<std::string> names);
// The same with n on the device (one int64, e.g. a miner's count; 0 gives 0).
DeviceStats loss_device_stats(const Tensor& stats, const Tensor& n, std::vector<std::string> names);

class OmniglotStudy : public Study {
 public:
  int64_t default_epochs() const override { return 50; }
  void declare_flags(Flags& f) override;
  void apply_presets(Flags& f, Device device, bool evaluating) override;
  void announce_presets(const Flags& f) const override;
  void check_flags(const Flags& f, bool evaluating) const override;
  std::vector<std::string> architecture_keys() const override;
  std::vector<std::string> resume_may_change() const override {
    return {"eval-batch", "test-dir", "test-tasks", "test-way", "tta", "tta-scale", "ensemble"};
  }
  bool can_evaluate() const override { return true; }
  void setup(RunContext& ctx) override;

  int64_t steps_per_epoch() const override { return f_->i64("iters"); }
  std::string steps_per_epoch_flag() const override { return "iters"; }
  void begin_epoch(int64_t epoch) override;
  Stats validate() override;
  std::string selection_metric() const override { return "val_one_shot_percent"; }
  int64_t validation_work() const override;
  Stats epoch_extras() const override { return {{"lr", opt_->group(0).lr}}; }
  std::string final_test(Json& out) override;
  // The gradient reduction of a data-parallel run: buckets, bytes per step, and how many
  // buckets the last step started inside its backward.
  Json data_parallel_summary() const override;
  nn::Optimizer* optimizer() override { return opt_.get(); }
  void save_state(nn::Metadata& md) const override;
  void load_state(const nn::Metadata& md, const std::string& file) override;

  // What the split steps of both binaries bake into a CUDA graph: the
  // optimizer's hyper-parameters and the input tensors' addresses.
  std::string graph_key() const override {
    return opt_->graph_key() + "|inputs " + std::to_string(inputs_.generation());
  }

 protected:
  // ---- what a network kind adds ----
  virtual void declare_kind_flags(Flags& f) = 0;
  virtual void check_kind_flags(const Flags&) const {}
  virtual void build_net(const nn::KochBranchOptions& o, Generator& init) = 0;
  virtual std::vector<nn::ParamGroup> param_groups() const = 0;
  // How many groups param_groups() will return for these flags (checked against
  // --group-lr / --group-momentum before any data is loaded).
  virtual size_t param_group_count(const Flags& f) const = 0;
  // The generator of the trunk's dropout masks (saved in checkpoints); null when
  // the trunk has no dropout (conv4). In a data-parallel run each rank's is seeded
  // with rank_stream_seed (rank 0's checkpoint restores them all).
  virtual Generator* dropout_generator() const = 0;
  // Flag values of a named preset for this net kind (empty: the kind has no such
  // preset); `f` holds what the user set, which a preset may adapt to.
  virtual std::vector<std::pair<const char*, const char*>> preset_values(const std::string& preset,
                                                                         const Flags& f) const;
  // Triplets per loader batch (0: the loader is not used, e.g. online mining).
  virtual int64_t loader_triplets() const = 0;
  // Validation verification accuracy in [0, 1].
  virtual double verification_accuracy() = 0;
  // (Q, 1, S, S) x (C, 1, S, S) inputs -> (Q, C) distances or similarities.
  virtual Tensor score_inputs(const Tensor& queries, const Tensor& candidates) = 0;
  // The same for inputs seen through several views (--tta; element 0 the
  // images themselves): by default the mean of the views' scores; a net with an
  // embedding scores the mean embeddings instead (triplet_study.cpp).
  virtual Tensor score_views(const std::vector<Tensor>& queries, const std::vector<Tensor>& candidates);
  virtual data::ScoreKind score_kind() const = 0;

  // ---- data-parallel runs (mpirun -np N; harness.h, Study::data_parallel) ----
  // Every rank draws the same global batch from the shared seed; rank r computes
  // rows [r * n / N, (r + 1) * n / N) of it (my_rows) and the gradients are averaged
  // over ranks (dp_, made in setup when N > 1).
  Tensor my_rows(const Tensor& t) const;
  // loss.backward(), through dp_'s bucketed all-reduce in a data-parallel run.
  void backward(const ag::Variable& loss);
  int rank_ = 0, world_ = 1;
  Communicator* comm_ = nullptr;  // the device's communicator (MPI or NCCL) when world_ > 1
  std::unique_ptr<nn::DataParallel> dp_;
  int64_t sync_bn_layers_ = 0;  // --sync-bn: the BatchNorm layers synchronised over the ranks

  // ---- shared helpers ----
  // Embeds `x` in chunks of --eval-batch with `embed` (no gradient).
  template <typename F>
  ag::Variable embed_chunked(const Tensor& x, F embed) const;
  // Calls fn(i, n, slice) for consecutive chunks [i, i + n) of `count` validation
  // items (eval-batch / 3 each, so a triplet chunk is one eval batch); slice(v)
  // is the validation images v[i..i+n) as inputs.
  template <typename F>
  void for_validation_chunks(size_t count, F fn) const;
  // --trunk conv4: the trunk's options from the flags, and its parameter groups
  // (conv, [dense], [head]) with --lr and the decays.
  nn::Conv4Options conv4_options(Device device) const;
  std::vector<nn::GroupSpec> conv4_group_specs(bool head) const;
  // A comma-separated list flag, one value per parameter group (empty: `def` for all).
  std::vector<double> per_group(const std::string& key, size_t n, double def) const;

  const Flags* f_ = nullptr;
  Device device_;
  Generator init_gen_, sample_gen_;
  StepInputs inputs_;  // what prepare_step() draws and compute_step() reads
  std::unique_ptr<StudyData> data_;
  std::unique_ptr<nn::Optimizer> opt_;
  std::unique_ptr<nn::LrSchedule> lr_sched_;
  std::unique_ptr<nn::MomentumRamp> mom_sched_;
  uint64_t loader_seed_ = 0, loader_offset_ = 0;
  bool loader_started_ = false;

 private:
  std::string applied_preset_;  // the preset apply_presets applied ("": none)
  // `what`: the evaluation, named in the error when a score is not finite;
  // the mean over `views` views of both sides (1: the images alone; --tta).
  Tensor score_matrix(const Tensor& queries_u8, const Tensor& candidates_u8, const char* what, int64_t views = 1);
  // Validation one-shot accuracy (%) with `views` views.
  double val_one_shot_percent(int64_t views);
  // `left_out`: the alphabets of --test-dir with fewer than --test-way characters.
  bool test_dir_eval(data::OneShotResult* r, std::vector<GroupScore>* groups, std::vector<std::string>* left_out);

  // ---- --ensemble (omniglot_ensemble.cpp): the final test scored by several networks ----
  // Member 0 is the model as the final test found it, the others --ensemble's
  // checkpoints: their parameters and buffers in model_tensors() order.
  std::vector<std::vector<Tensor>> members_;
  std::vector<Tensor> model_tensors();
  void check_ensemble_files(const Flags& f) const;  // in check_flags: files, study, architecture flags
  void check_ensemble_tensors();                    // in setup: the tensors' names and shapes
  void load_ensemble();
  void use_member(size_t i);  // copies member i's tensors into the model
  void drop_ensemble();       // the model back to member 0; no members
  // score() once per member (one member: itself), averaged.
  Tensor ensemble_scores(const std::function<Tensor()>& score);
  // Loads the members; the report's lines (validation alone vs ensemble).
  std::string begin_ensemble(Json& out);
};

// A data-parallel rank's dropout seed: `seed` itself for rank 0, a SplitMix64 of
// (seed, rank) for the others (distinct streams, the same offsets).
uint64_t rank_stream_seed(uint64_t seed, int rank);

// --ensemble's comma-separated checkpoint paths; throws on an empty item.
std::vector<std::string> ensemble_paths(const std::string& list);

// Throws naming the evaluation `what` when one of the network's `values`
// (distances, similarities, logits) is NaN or Inf: no accuracy is computed from them.
void check_finite_scores(const std::vector<double>& v, const std::string& what, const char* values);

// The values of a comma-separated per-group list flag (empty: none); throws
// naming the flag unless there are exactly `n`.
std::vector<double> per_group_list(const Flags& f, const std::string& key, size_t n);

template <typename F>
ag::Variable OmniglotStudy::embed_chunked(const Tensor& x, F embed) const {
  const int64_t n = x.size(0), step = f_->i64("eval-batch");
  std::vector<ag::Variable> parts;
  for (int64_t i = 0; i < n; i += step) parts.push_back(embed(ag::Variable(x.narrow(0, i, std::min(step, n - i)))));
  return parts.size() == 1 ? parts[0] : ag::concat(parts, 0);
}

template <typename F>
void OmniglotStudy::for_validation_chunks(size_t count, F fn) const {
  const size_t chunk = static_cast<size_t>(std::max<int64_t>(1, f_->i64("eval-batch") / 3));
  for (size_t i = 0; i < count; i += chunk) {
    const size_t n = std::min(chunk, count - i);
    auto slice = [&](const std::vector<int64_t>& v) {
      return data_->val_input(std::vector<int64_t>(v.begin() + i, v.begin() + i + n));
    };
    fn(i, n, slice);
  }
}

}  // namespace mn::exp
