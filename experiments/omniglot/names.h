// Where the Omniglot study turns a flag's name into an object: one small
// function per kind, so they can move to nn/registry.h in one place. The
// valid names are the flags' choices (omniglot_base.cpp); these functions
// throw on any other.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kernels/activation.h"
#include "kernels/miners.h"
#include "nn/losses/losses.h"
#include "nn/optim/optimizer.h"

namespace mn::exp {

kernels::Act activation_by_name(const std::string& name);           // --activation
nn::TripletKind triplet_loss_by_name(const std::string& name);      // --loss
kernels::MinerKind miner_by_name(const std::string& name);          // online --sampling
bool is_online_sampling(const std::string& name);                   // --sampling mined in the batch?
std::unique_ptr<nn::Optimizer> optimizer_by_name(const std::string& name, std::vector<nn::ParamGroup> groups);

}  // namespace mn::exp
