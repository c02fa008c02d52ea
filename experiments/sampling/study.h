// The sampling study (Srivastava & Breuer, "Impact of Sampling Techniques on
// Siamese Neural Networks"; study-protocols.md, "Sampling study"): seven pair
// and triplet sampling strategies training Bielski's 2-d EmbeddingNet on
// MNIST, KMNIST or Fashion-MNIST with one class held out of training.
//
// One run = one cell of the study's tables (--dataset x --strategy); the
// sampling_grid binary runs all 21 cells and writes results.md.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "experiments/common/harness.h"
#include "experiments/sampling/data.h"
#include "experiments/sampling/eval.h"
#include "kernels/miners.h"
#include "nn/losses/loss.h"
#include "nn/models/embedding_net.h"
#include "nn/optim/optimizer.h"
#include "nn/optim/schedule.h"

namespace mn::exp::sampling {

enum class Strategy {
  RandomOfflinePair = 0,
  HardNegativeOnlinePair,
  AllPositiveOnlinePair,
  RandomOfflineTriplet,
  AllPositiveOnlineTriplet,
  RandomNegativeOnlineTriplet,
  SemiHardNegativeOnlineTriplet
};
struct StrategyInfo {
  Strategy id;
  const char* flag;   // --strategy value
  const char* title;  // the study's table row
  bool online, pairs;
};
const std::vector<StrategyInfo>& strategies();
const StrategyInfo& strategy_by_flag(const std::string& flag);
const std::vector<std::string>& dataset_names();  // mnist, kmnist, fashion-mnist
// The study's held-out class per data set ([code]): MNIST 0, KMNIST 0, Fashion 1.
int32_t default_unseen_class(const std::string& dataset);

std::unique_ptr<Study> make_sampling_study();

class SamplingStudy : public Study {
 public:
  std::string name() const override { return "sampling"; }
  std::string description() const override {
    return "Sampling study: seven pair/triplet sampling strategies on MNIST, KMNIST or Fashion-MNIST with one "
           "class unseen (defaults = the study's protocol).";
  }
  int64_t default_epochs() const override { return 20; }
  void declare_flags(Flags& f) override;
  void check_flags(const Flags& f, bool evaluating) const override;
  std::vector<std::string> architecture_keys() const override { return {"embedding-dim"}; }
  std::vector<std::string> resume_may_change() const override { return {"eval-batch", "data-dir"}; }
  bool can_evaluate() const override { return true; }
  void setup(RunContext& ctx) override;

  int64_t steps_per_epoch() const override;
  int64_t items_per_step() const override;
  void begin_epoch(int64_t epoch) override;
  Stats train_step() override;
  Stats validate() override;
  // The study evaluates its final model (no model selection on the test set):
  // the selection metric is the epoch index, so best.safetensors is the last epoch.
  std::string selection_metric() const override { return "epoch_index"; }
  bool keeps_last_epoch() const override { return true; }  // the study reports the 20th epoch's model
  int64_t validation_work() const override;
  Stats epoch_extras() const override { return {{"lr", opt_->group(0).lr}}; }
  std::string final_test(Json& out) override;
  nn::Module& model() override { return *net_; }
  nn::Optimizer* optimizer() override { return opt_.get(); }
  void save_state(nn::Metadata& md) const override;
  void load_state(const nn::Metadata& md, const std::string& file) override;
  std::string plot_title() const override;

 private:
  // One training step's loss, the study's training accuracy (a share) and tuples.
  struct StepResult {
    double loss = 0, acc = 0;
    int64_t tuples = 0;
  };
  StepResult online_step(int64_t step, Generator& mine_gen);
  StepResult online_pairs(const ag::Variable& e, const Tensor& labels, const HostEmb& he, Generator& mine_gen);
  StepResult online_all_triplets(const ag::Variable& e, const Tensor& labels, const HostEmb& he);
  StepResult online_mined_triplets(const ag::Variable& e, const Tensor& labels, const HostEmb& he,
                                   Generator& mine_gen);
  StepResult offline_step(int64_t step);
  // Embeddings of images `idx` of a split (no gradient, eval-batch chunks).
  HostEmb embed(const SplitImages& s, const std::vector<int64_t>& idx);
  HostEmb embed_all(const SplitImages& s);
  // The study's accuracy of this strategy on test images `subset` (of test10), as its code computes it.
  double study_test_accuracy(const HostEmb& e, const std::vector<int64_t>& subset, bool ten_classes);
  // The triplet miner's settings for this strategy.
  kernels::MinerParams miner_params() const;
  void scatter_png(const HostEmb& e, const std::string& png, const std::string& title) const;
  Stats untrained_metrics();

  const Flags* f_ = nullptr;
  Device device_;
  uint64_t seed_ = 0;
  std::string out_dir_;
  StrategyInfo st_{};
  std::unique_ptr<StudyImages> data_;
  std::unique_ptr<nn::EmbeddingNet> net_;
  std::unique_ptr<nn::Optimizer> opt_;
  std::unique_ptr<nn::StepDecay> sched_;
  std::shared_ptr<nn::Loss> batch_all_;  // All Positive Online Triplet
  Generator init_gen_;
  // The current epoch's plan and position (a pure function of seed and epoch).
  int64_t epoch_ = 0, cursor_ = 0, resume_epoch_ = -1, resume_iter_ = 0;
  std::vector<std::vector<int64_t>> batches_;
  OfflinePlan plan_;
  // Fixed test tuples.
  FixedPairs pairs10_, pairs9_;
  FixedTriplets trip10_, trip9_, couple10_, couple9_;
  Stats untrained_;
};

}  // namespace mn::exp::sampling
