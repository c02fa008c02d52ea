// omniglot_siamese: Koch et al.'s siamese CNN (the study's baseline). Training
// turns B/2 loader triplets into B pairs (a, p) genuine and (a, n) impostor
// with Koch's weighted-L1 + logistic head and BCE loss; scoring is the head's
// similarity logit for every (query, candidate) pair. --trunk conv4 puts the
// same head on the conv4 trunk (the CPU demo's default, as in omniglot_triplet).
#include <algorithm>

#include "autograd/ops.h"
#include "experiments/omniglot/omniglot_base.h"
#include "experiments/omniglot/omniglot_study.h"
#include "nn/losses/losses.h"

namespace mn::exp {
namespace {

using ag::Variable;

class SiameseStudy : public OmniglotStudy {
 public:
  std::string name() const override { return "omniglot_siamese"; }
  std::string description() const override {
    return "Koch et al.'s siamese CNN on Omniglot one-shot (the study's baseline; --trunk conv4 for the few-shot "
           "literature's trunk).";
  }
  std::string plot_title() const override { return "siamese CNN on Omniglot"; }
  nn::Module& model() override { return *net_; }
  int64_t items_per_step() const override { return 3 * (f_->i64("batch") / 2); }
  // mpirun -np N: each rank scores 1/N of the genuine and 1/N of the impostor pairs.
  bool data_parallel() const override { return true; }

 protected:
  void declare_kind_flags(Flags& f) override {
    f.add_string("sampling", "random", "training pairs (from triplets): random, or offline SSIM mining",
                 {"random", "hard-positive", "semi-hard-negative", "ssim-both"});
  }
  void check_kind_flags(const Flags& f) const override {
    MN_CHECK(f.i64("batch") % 2 == 0, "--batch ", f.i64("batch"), ": the siamese net trains on half genuine, half "
             "impostor pairs and needs an even number; use ", f.i64("batch") + 1);
    const int n = world_size_from_env();
    MN_CHECK(n <= 1 || (f.i64("batch") / 2) % n == 0, "--batch ", f.i64("batch"), ": its ", f.i64("batch") / 2,
             " genuine and ", f.i64("batch") / 2, " impostor pairs do not split evenly over the ", n,
             " ranks of mpirun -np ", n, "; give a --batch that is a multiple of ", 2 * n);
  }

  // --trunk conv4: Koch's head (weighted L1 of the two embeddings, a logistic
  // unit) on the conv4 trunk's features, with PyTorch's Linear initialisation.
  void build_net(const nn::KochBranchOptions& o, Generator& init) override {
    if (f_->str("trunk") == "conv4") {
      auto trunk = std::make_shared<nn::Conv4>(conv4_options(o.device), init);
      const int64_t features = trunk->output_features();
      net_ = std::make_unique<nn::SiameseNet>(std::move(trunk), features, init);
      return;
    }
    net_ = std::make_unique<nn::SiameseNet>(o, init);
  }
  std::vector<nn::ParamGroup> param_groups() const override {
    if (f_->str("trunk") == "conv4") return nn::param_groups_by_prefix(*net_, conv4_group_specs(true));
    const double cd = f_->f64("conv-decay"), dd = f_->f64("dense-decay");
    return net_->param_groups(f_->f64("lr"), f_->f64("momentum"), {cd, cd, cd, cd, dd, dd});
  }
  size_t param_group_count(const Flags& f) const override {
    return f.str("trunk") == "conv4" ? (f.i64("embedding") > 0 ? 3 : 2) : 6;
  }
  Generator* dropout_generator() const override {
    if (f_->str("trunk") == "koch") return &net_->branch().dropout_generator();
    return static_cast<const nn::Conv4&>(net_->trunk()).dropout_generator();
  }

  // The CPU demo: as the triplet binary's (conv4 on 28x28 images with the rotated
  // characters, a dense 128-d embedding, Adam at 1e-3) with the siamese head and
  // random pairs, 64 pairs (128 images) per iteration like the triplet demo's
  // 16 x 8; --trunk koch keeps the Koch net's scaled-down demo.
  std::vector<std::pair<const char*, const char*>> preset_values(const std::string& preset,
                                                                 const Flags& f) const override {
    if (preset != "cpu-demo" || (f.user_set("trunk") && f.str("trunk") == "koch"))
      return OmniglotStudy::preset_values(preset, f);
    return {{"trunk", "conv4"},  {"image-size", "28"},   {"rotations", "true"},     {"input-norm", "true"},
            {"embedding", "128"}, {"optimizer", "adam"},  {"lr", "1e-3"},           {"conv-decay", "0"},
            {"dense-decay", "0"}, {"batch", "64"},        {"epochs", "15"},         {"iters", "200"},
            {"val-triplets", "2000"}, {"val-tasks", "320"}, {"eval-batch", "500"}};
  }
  int64_t loader_triplets() const override { return f_->i64("batch") / 2; }

  // The step in two parts (harness.h, split_step): the pairs are drawn and
  // copied into the same input tensors every step, then the device work runs
  // on them (a CUDA graph on a GPU, where the step allows). Its stats stay on
  // the device (the harness reads them every --log-every steps).
  bool split_step() const override { return world_ == 1; }
  // Data-parallel runs are not split: their collectives stay out of CUDA graphs.
  DeviceStats train_step_on_device() override {
    prepare_step();
    return compute_step();
  }
  // This rank's pairs: the loader builds this rank's shard of each batch's triplets (the
  // draws are every rank's), so its B/N pairs are the shard's B/2N genuine then B/2N
  // impostor pairs: every rank scores both kinds (the whole batch with one rank).
  void prepare_step() override {
    PairBatch pb = data_->pair_batch(f_->i64("batch") / world_);
    inputs_.keep(0, pb.left);
    inputs_.keep(1, pb.right);
    inputs_.keep(2, pb.target);
  }

  DeviceStats compute_step() override {
    const int64_t B = f_->i64("batch");
    auto e = net_->embed_pairs(Variable(inputs_[0]), Variable(inputs_[1]));
    nn::LossOutput out = nn::koch_siamese_loss(e[0], e[1], net_->head_weight(), net_->head_bias(), inputs_[2]);
    backward(out.loss);
    opt_->step_and_zero_grad();  // the update zeroes the gradients it read
    return loss_device_stats(out.stats, static_cast<double>(B / world_),
                             {"train_loss", "active_share", "mean_weighted_l1_genuine", "mean_weighted_l1_impostor"});
  }

  // Share of the fixed validation pairs whose logit has the right sign.
  double verification_accuracy() override {
    ag::NoGradGuard ng;
    net_->eval();
    double correct = 0;
    const auto& P = data_->val_pairs();
    for_validation_chunks(P.left.size(), [&](size_t i, size_t n, auto slice) {
      auto e = net_->embed_pairs(Variable(slice(P.left)), Variable(slice(P.right)));
      auto z = net_->logits(e[0], e[1]).data().to_double_vector();
      check_finite_scores(z, "validation (verification pairs)", "logits");
      for (size_t k = 0; k < n; ++k) correct += ((z[k] > 0) == (P.genuine[i + k] != 0)) ? 1.0 : 0.0;
    });
    const size_t total = P.left.size();
    net_->train();
    return total ? correct / total : 0.0;
  }

  Tensor score_inputs(const Tensor& qi, const Tensor& ci) override {
    auto embed = [&](const Variable& x) { return net_->embed(x); };
    Variable eq = embed_chunked(qi, embed), ec = embed_chunked(ci, embed);
    const int64_t Q = eq.size(0), C = ec.size(0);
    // Every (query, candidate) pair through the head: broadcast to (Q*C, E).
    Variable a = ag::reshape(ag::expand(ag::unsqueeze(eq, 1), {Q, C, eq.size(1)}), {Q * C, eq.size(1)});
    Variable b = ag::reshape(ag::expand(ag::unsqueeze(ec, 0), {Q, C, ec.size(1)}), {Q * C, ec.size(1)});
    return ag::reshape(net_->logits(a, b), {Q, C}).data();
  }
  data::ScoreKind score_kind() const override { return data::ScoreKind::Similarity; }

 private:
  std::unique_ptr<nn::SiameseNet> net_;
};

}  // namespace

std::unique_ptr<Study> make_omniglot_siamese_study() { return std::make_unique<SiameseStudy>(); }

}  // namespace mn::exp
