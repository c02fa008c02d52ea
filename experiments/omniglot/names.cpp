// Flag names -> objects for the Omniglot study, through the registries (see names.h).
#include "experiments/omniglot/names.h"

#include <algorithm>

#include "nn/losses/loss.h"
#include "nn/registry.h"
#include "runtime/error.h"

namespace mn::exp {
namespace {

// The triplet kinds the fused kernels implement under their registered names.
const std::pair<const char*, nn::TripletKind> kFusedTriplet[] = {
    {"schroff", nn::TripletKind::Schroff},          {"kumar", nn::TripletKind::Kumar},
    {"global", nn::TripletKind::Global},            {"global-triplet", nn::TripletKind::GlobalTriplet},
    {"softmax", nn::TripletKind::SoftmaxRatio},     {"margin-l2", nn::TripletKind::MarginL2},
    {"soft-margin", nn::TripletKind::SoftMargin}};

// The study's online samplings -> registered miner names and the kernel kind they run.
struct OnlineSampling {
  const char* flag;
  const char* miner;  // nn::miner_registry() name ("" : no miner)
  kernels::MinerKind kind;
};
const OnlineSampling kOnline[] = {
    {"batch-hard", "batch-hard", kernels::MinerKind::BatchHard},
    {"online-semi-hard", "semi-hard-or-hardest", kernels::MinerKind::SemiHard},
    {"online-random-negative", "random-violating", kernels::MinerKind::RandomViolating},
    {"online-balanced", "none", kernels::MinerKind::BatchHard /* unused: no miner */}};

}  // namespace

std::vector<std::string> activation_names() {
  // The Koch branch applies any kernels::Act; the registry is the list of names.
  return nn::activation_registry().names();
}

kernels::Act activation_by_name(const std::string& s) { return nn::activation_kind(s); }

bool is_fused_triplet_loss(const std::string& s) {
  return std::any_of(std::begin(kFusedTriplet), std::end(kFusedTriplet),
                     [&](const auto& e) { return s == e.first; });
}

bool is_whole_batch_loss(const std::string& s) {
  if (!nn::loss_registry().contains(s) || is_fused_triplet_loss(s)) return false;
  try {
    return nn::make_loss(s)->tuples() == nn::TupleKind::None;
  } catch (const Error&) {
    return false;  // a loss that needs model parts to exist (koch-siamese, lmnn) is not one of these
  }
}

std::vector<std::string> triplet_study_loss_names() {
  std::vector<std::string> out;
  for (const auto& n : nn::loss_registry().names())
    if (is_fused_triplet_loss(n) || is_whole_batch_loss(n)) out.push_back(n);
  return out;
}

nn::TripletKind triplet_loss_by_name(const std::string& s) {
  nn::loss_registry().get(s);  // an unknown name lists every registered loss
  for (const auto& [name, kind] : kFusedTriplet)
    if (s == name) return kind;
  MN_THROW("--loss ", s, ": not a triplet loss of the fused kernels (", "schroff, kumar, global, global-triplet, "
           "softmax, margin-l2, soft-margin); whole-batch losses need --sampling online-balanced");
}

bool is_online_sampling(const std::string& s) {
  return std::any_of(std::begin(kOnline), std::end(kOnline), [&](const auto& e) { return s == e.flag; });
}

kernels::MinerKind miner_by_name(const std::string& s) {
  for (const auto& e : kOnline)
    if (s == e.flag && std::string(e.miner) != "none") {
      nn::miner_registry().get(e.miner);  // the miner the study's name stands for is registered
      return e.kind;
    }
  MN_THROW("--sampling: '", s, "' is not an online miner (batch-hard, online-semi-hard, online-random-negative)");
}

std::vector<std::string> optimizer_names() { return nn::optimizer_registry().names(); }

std::unique_ptr<nn::Optimizer> optimizer_by_name(const std::string& s, std::vector<nn::ParamGroup> groups) {
  // Adam and AdamW take no SGD momentum; the groups carry the SGD ramp's value.
  if (s != "sgd")
    for (auto& g : groups) g.momentum = 0;
  return nn::optimizer_registry().get(s)(std::move(groups));
}

}  // namespace mn::exp
