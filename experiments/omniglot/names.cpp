// Flag names -> objects for the Omniglot study (see names.h).
#include "experiments/omniglot/names.h"

#include "runtime/error.h"

namespace mn::exp {

kernels::Act activation_by_name(const std::string& s) {
  if (s == "relu") return kernels::Act::ReLU;
  if (s == "elu") return kernels::Act::ELU;
  if (s == "selu") return kernels::Act::SELU;
  MN_THROW("--activation: unknown activation '", s, "' (relu, elu, selu)");
}

nn::TripletKind triplet_loss_by_name(const std::string& s) {
  if (s == "schroff") return nn::TripletKind::Schroff;
  if (s == "kumar") return nn::TripletKind::Kumar;
  if (s == "global") return nn::TripletKind::Global;
  if (s == "global-triplet") return nn::TripletKind::GlobalTriplet;
  if (s == "softmax") return nn::TripletKind::SoftmaxRatio;
  MN_THROW("--loss: unknown triplet loss '", s, "' (schroff, kumar, global, global-triplet, softmax)");
}

bool is_online_sampling(const std::string& s) {
  return s == "batch-hard" || s == "online-semi-hard" || s == "online-random-negative";
}

kernels::MinerKind miner_by_name(const std::string& s) {
  if (s == "batch-hard") return kernels::MinerKind::BatchHard;
  if (s == "online-semi-hard") return kernels::MinerKind::SemiHard;
  if (s == "online-random-negative") return kernels::MinerKind::RandomViolating;
  MN_THROW("--sampling: '", s, "' is not an online miner (batch-hard, online-semi-hard, online-random-negative)");
}

std::unique_ptr<nn::Optimizer> optimizer_by_name(const std::string& s, std::vector<nn::ParamGroup> groups) {
  if (s == "adam") {
    for (auto& g : groups) g.momentum = 0;
    return std::make_unique<nn::Adam>(groups);
  }
  if (s == "sgd") return std::make_unique<nn::SGD>(groups);
  MN_THROW("--optimizer: unknown optimizer '", s, "' (adam, sgd)");
}

}  // namespace mn::exp
