// omniglot_triplet: the triplet CNN with Koch-style branches (the study's own
// model). Training draws random or SSIM-mined triplets from the loader, or
// mines them online in P x K batches; scoring is the Euclidean distance of the
// anchor embedding to each candidate's.
#include <algorithm>
#include <climits>

#include "autograd/ops.h"
#include "experiments/omniglot/names.h"
#include "experiments/omniglot/omniglot_base.h"
#include "experiments/omniglot/omniglot_study.h"
#include "kernels/miners.h"
#include "nn/losses/losses.h"

namespace mn::exp {
namespace {

using ag::Variable;

class TripletStudy : public OmniglotStudy {
 public:
  std::string name() const override { return "omniglot_triplet"; }
  std::string description() const override {
    return "Triplet CNN with Koch-style branches on Omniglot one-shot (defaults = the study's final model).";
  }
  std::string plot_title() const override { return "triplet CNN on Omniglot"; }
  nn::Module& model() override { return *net_; }
  int64_t items_per_step() const override { return 3 * f_->i64("batch"); }

 protected:
  void declare_kind_flags(Flags& f) override {
    f.add_string("loss", "global", "triplet loss", {"schroff", "kumar", "global", "global-triplet", "softmax"});
    f.add_double("margin", 0.01, "margin m of the Schroff / Kumar losses and of online mining", 0.0);
    f.add_double("global-l", 0.8, "global loss: weight l of the mean term", 0.0);
    f.add_double("global-t", 0.4, "global loss: margin t", 0.0);
    f.add_double("global-g", 1.0, "global + triplet: weight g of the Kumar term", 0.0);
    f.add_string("share", "full", "weight sharing of the three branches", {"full", "disjoint-anchor"});
    f.add_string("sampling", "random", "training triplets: random (the study); offline SSIM mining of "
                 "hard positives, semi-hard negatives or both; or online mining in P x K batches (P = batch, K = 3)",
                 {"random", "hard-positive", "semi-hard-negative", "ssim-both", "batch-hard", "online-semi-hard",
                  "online-random-negative"});
  }

  void check_kind_flags(const Flags& f) const override {
    if (is_online_sampling(f.str("sampling")))
      MN_CHECK(f.i64("batch") >= 2, "--batch ", f.i64("batch"), " with --sampling ", f.str("sampling"),
               ": online mining needs at least 2 classes per batch (P = --batch); use --batch 2 or more");
  }

  void build_net(const nn::KochBranchOptions& o, Generator& init) override {
    auto share = f_->str("share") == "full" ? nn::TripletShare::Full : nn::TripletShare::DisjointAnchor;
    net_ = std::make_unique<nn::TripletNet>(o, share, init);
  }
  std::vector<nn::ParamGroup> param_groups() const override {
    return net_->param_groups(f_->f64("lr"), f_->f64("conv-decay"), f_->f64("dense-decay"));
  }
  nn::KochBranch& branch() const override { return net_->branch(); }
  int64_t loader_triplets() const override {
    return is_online_sampling(f_->str("sampling")) ? 0 : f_->i64("batch");
  }

  nn::TripletLossOptions loss_options() const {
    nn::TripletLossOptions lo;
    lo.kind = triplet_loss_by_name(f_->str("loss"));
    lo.margin = f_->f64("margin");
    lo.global_l = f_->f64("global-l");
    lo.global_t = f_->f64("global-t");
    lo.global_g = f_->f64("global-g");
    return lo;
  }

  Stats stats(const nn::LossOutput& out, double n) const {
    auto h = out.host_stats();
    return {{"train_loss", h.loss}, {"active_share", h.active / n}, {"mean_d_pos", h.mean_pos},
            {"mean_d_neg", h.mean_neg}};
  }

  Stats train_step() override {
    const int64_t B = f_->i64("batch");
    Stats s;
    if (is_online_sampling(f_->str("sampling"))) {
      // P x K batch (3B images, as many as B random triplets), mined on the device
      // from the detached squared distances of the batch's embeddings.
      PKBatch pk = data_->pk_batch(B, 3, sample_gen_);
      Variable e = net_->embed_candidate(Variable(pk.images));
      kernels::MinerParams mp;
      mp.kind = miner_by_name(f_->str("sampling"));
      mp.margin = f_->f64("margin");
      mp.fallback = kernels::SemiHardFallback::Hardest;
      Tensor dist = kernels::pairwise_distance_matrix(e.data(), true);
      kernels::MinedTriplets mined = kernels::mine_triplets(dist, pk.labels, mp, &sample_gen_);
      if (mined.triplets.size(0) == 0)  // nothing violates: no update
        return {{"train_loss", 0}, {"active_share", 0}, {"mean_d_pos", 0}, {"mean_d_neg", 0}};
      nn::LossOutput out = nn::triplet_loss(e, mined.triplets, loss_options());
      out.loss.backward();
      s = stats(out, static_cast<double>(mined.triplets.size(0)));
    } else {
      TripletBatch tb = data_->triplet_batch();
      auto e = net_->embed_triplets(Variable(tb.anchors), Variable(tb.positives), Variable(tb.negatives));
      nn::LossOutput out = nn::triplet_loss(e[0], e[1], e[2], loss_options());
      out.loss.backward();
      s = stats(out, static_cast<double>(B));
    }
    opt_->step();
    opt_->zero_grad();
    return s;
  }

  // Share of the fixed validation triplets with d(a, p) < d(a, n) (ties count half).
  double verification_accuracy() override {
    ag::NoGradGuard ng;
    net_->eval();
    double correct = 0;
    const auto& T = data_->val_triplets();
    for_validation_chunks(T.anchors.size(), [&](size_t, size_t n, auto slice) {
      auto e = net_->embed_triplets(Variable(slice(T.anchors)), Variable(slice(T.positives)),
                                    Variable(slice(T.negatives)));
      auto dp = ag::l2_distance(e[0], e[1], true).data().to_double_vector();
      auto dn = ag::l2_distance(e[0], e[2], true).data().to_double_vector();
      for (size_t k = 0; k < n; ++k) correct += dp[k] < dn[k] ? 1.0 : (dp[k] == dn[k] ? 0.5 : 0.0);
    });
    const size_t total = T.anchors.size();
    net_->train();
    return total ? correct / total : 0.0;
  }

  Tensor score_inputs(const Tensor& qi, const Tensor& ci) override {
    Variable eq = embed_chunked(qi, [&](const Variable& x) { return net_->embed_anchor(x); });
    Variable ec = embed_chunked(ci, [&](const Variable& x) { return net_->embed_candidate(x); });
    return ag::pairwise_distance(eq, ec, kernels::Pairwise::Euclidean).data();
  }
  data::ScoreKind score_kind() const override { return data::ScoreKind::Cost; }

 private:
  std::unique_ptr<nn::TripletNet> net_;
};

}  // namespace

std::unique_ptr<Study> make_omniglot_triplet_study() { return std::make_unique<TripletStudy>(); }

}  // namespace mn::exp
