// Where the Omniglot study turns a flag's name into an object: every name is
// looked up in the library's registries (nn/registry.h, nn/losses/loss.h,
// nn/miners/miner.h), so --help lists the registered names and an unknown name
// is an error that lists them. The study's own spellings of its online
// samplings map onto registered miner names here.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kernels/activation.h"
#include "kernels/miners.h"
#include "nn/losses/losses.h"
#include "nn/optim/optimizer.h"

namespace mn::exp {

// --activation: the activations the Koch branch supports, from the registry.
std::vector<std::string> activation_names();
kernels::Act activation_by_name(const std::string& name);
// --loss of omniglot_triplet: every registered loss that trains from triplets
// (the fused triplet kinds) or from a whole labelled batch (multi-similarity).
std::vector<std::string> triplet_study_loss_names();
bool is_fused_triplet_loss(const std::string& name);  // schroff, kumar, ...: the fused triplet kinds
bool is_whole_batch_loss(const std::string& name);    // multi-similarity: needs a P x K batch, no miner
nn::TripletKind triplet_loss_by_name(const std::string& name);
// --sampling: mined in a P x K batch? ("online-balanced" is a P x K batch with no miner)
bool is_online_sampling(const std::string& name);
kernels::MinerKind miner_by_name(const std::string& name);
// --optimizer: the optimizer registry's names.
std::vector<std::string> optimizer_names();
std::unique_ptr<nn::Optimizer> optimizer_by_name(const std::string& name, std::vector<nn::ParamGroup> groups);

}  // namespace mn::exp
