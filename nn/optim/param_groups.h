// Optimizer parameter groups selected by parameter-name prefix, for layer-wise
// learning rates, momenta and weight decays (Koch et al.'s per-layer settings,
// the triplet study's conv / dense decays) as configuration:
//
//   auto groups = nn::param_groups_by_prefix(net, {
//       {"conv",  {"branch.conv", "branch.bn"}, nn::hyper(1e-4, /*decay*/ 2e-4)},
//       {"dense", {"branch.dense"},             nn::hyper(1e-4, 1e-3)},
//       {"rest",  {""},                         nn::hyper(1e-4)}});   // optional catch-all
//
// Rules:
//   - prefixes are plain string prefixes of the dotted names of
//     Module::named_parameters() ("branch.conv" matches branch.conv1.weight ...
//     branch.conv4.bias); the empty prefix matches every name (a default group);
//   - a parameter joins the FIRST group (in the given order) with a matching
//     prefix; weights shared between branches are one Variable and appear once;
//   - inside a group, parameters keep the model's named_parameters() order;
//     groups keep the given order (their names are the optimizer state names);
//   - mn::Error when a prefix matches no parameter name, when a group ends up
//     empty (all its parameters were claimed by earlier groups), or when a
//     parameter matches no group (the message lists them; add a "" group to
//     collect them).
#pragma once
#include <string>
#include <vector>

#include "nn/module.h"
#include "nn/optim/optimizer.h"

namespace mn::nn {

struct GroupSpec {
  std::string name;
  std::vector<std::string> prefixes;
  ParamGroup hyper;  // lr, momentum, weight_decay, betas, ... (its params and name are ignored)
};

// A ParamGroup carrying only hyperparameters, for GroupSpec::hyper.
ParamGroup hyper(double lr, double weight_decay = 0.0, double momentum = 0.0);

std::vector<ParamGroup> param_groups_by_prefix(const Module& model, const std::vector<GroupSpec>& specs);

}  // namespace mn::nn
