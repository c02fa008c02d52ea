// Objective (nn/objective.h): distance -> miner -> loss -> reduction.
#include "nn/objective.h"

#include "autograd/ops.h"
#include "kernels/distance.h"

namespace mn::nn {

std::vector<std::pair<std::string, double>> ObjectiveOutput::named_stats() const {
  kernels::LossStatsHost h = kernels::read_stats(stats);
  // A fixed-size miner's count is on the device: read it here, where the stats are read too.
  const double n = valid.defined() ? valid.to_double_vector()[0] : static_cast<double>(tuples);
  return {{"loss", h.loss},
          {"active", h.active},
          {"tuples", n},
          {"active_fraction", n > 0 ? h.active / n : 0.0},
          {"mean_pos", h.mean_pos},
          {"mean_neg", h.mean_neg}};
}

Objective::Objective(std::shared_ptr<Miner> miner, std::shared_ptr<Loss> loss)
    : miner_(std::move(miner)), loss_(std::move(loss)) {
  MN_CHECK(miner_ && loss_, "Objective: a miner and a loss are required");
  MN_CHECK(miner_->output() == loss_->tuples(), "Objective: loss '", loss_->name(), "' needs ",
           tuple_kind_name(loss_->tuples()), " but miner '", miner_->name(), "' emits ",
           tuple_kind_name(miner_->output()),
           loss_->tuples() == TupleKind::None ? " (this loss mines inside its own kernel: use miner 'none')" : "");
}

Objective Objective::from_names(const std::string& loss, const std::string& miner,
                                const LossConfig& lcfg, const MinerConfig& mcfg) {
  return Objective(make_miner(miner, mcfg), make_loss(loss, lcfg));
}

Tensor Objective::mining_distance(const ag::Variable& emb) const {
  const Tensor e = loss_->mining_embedding(emb);
  // One implementation for every metric (kernels/distance.h); the bool overload
  // kept by the miners is the same computation for the two L2 forms.
  return kernels::pairwise_distance_matrix(e, miner_->distance().value_or(loss_->distance()));
}

ObjectiveOutput Objective::operator()(const ag::Variable& emb, const Tensor& labels, Generator* gen) {
  MN_CHECK(emb.defined() && emb.dim() == 2, "Objective: embeddings must be (B, D), got ",
           emb.defined() ? shape_str(emb.shape()) : std::string("undefined"));
  MN_CHECK(labels.numel() == emb.size(0), "Objective: ", emb.size(0), " embeddings but ",
           labels.numel(), " labels");
  Mined mined;
  if (miner_->output() != TupleKind::None) mined = miner_->mine(mining_distance(emb), labels, gen);
  ObjectiveOutput out;
  const int64_t B = emb.size(0);
  out.tuples = miner_->output() == TupleKind::None ? B * (B - 1) : mined.count();
  out.valid = mined.valid;
  if (mined.valid.defined()) {
    out.tuples = -1;  // on the device (valid): the padded loss handles none mined
  } else if (miner_->output() != TupleKind::None && out.tuples == 0) {
    // Nothing mined: a zero loss in the graph (zero gradients), zero stats.
    out.loss = ag::mul(ag::sum(emb), 0.0);
    out.stats = Tensor::zeros({kernels::kStatsLen}, emb.dtype(), emb.device());
    return out;
  }
  LossOutput lo = loss_->compute(emb, labels, mined);
  out.loss = lo.loss;
  out.stats = lo.stats;
  return out;
}

}  // namespace mn::nn
