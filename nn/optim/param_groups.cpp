// Parameter groups by name prefix (see param_groups.h).
#include "nn/optim/param_groups.h"

namespace mn::nn {

ParamGroup hyper(double lr, double weight_decay, double momentum) {
  ParamGroup g;
  g.lr = lr;
  g.weight_decay = weight_decay;
  g.momentum = momentum;
  return g;
}

std::vector<ParamGroup> param_groups_by_prefix(const Module& model, const std::vector<GroupSpec>& specs) {
  MN_CHECK(!specs.empty(), "param_groups_by_prefix: no groups given");
  const auto named = model.named_parameters();
  auto starts = [](const std::string& n, const std::string& p) { return n.rfind(p, 0) == 0; };
  std::vector<ParamGroup> groups;
  for (const GroupSpec& s : specs) {
    MN_CHECK(!s.prefixes.empty(), "param_groups_by_prefix: group '", s.name, "' has no prefixes");
    for (const std::string& p : s.prefixes) {
      bool any = false;
      for (const auto& [n, v] : named) any = any || starts(n, p);
      MN_CHECK(any, "param_groups_by_prefix: prefix '", p, "' of group '", s.name,
               "' matches no parameter of the model (", named.size(), " parameters, e.g. '",
               named.empty() ? std::string() : named.front().first, "')");
    }
    ParamGroup g = s.hyper;
    g.params.clear();
    g.name = s.name;
    groups.push_back(g);
  }
  std::string unmatched;
  for (const auto& [n, v] : named) {
    bool placed = false;
    for (size_t i = 0; i < specs.size() && !placed; ++i)
      for (const std::string& p : specs[i].prefixes)
        if (starts(n, p)) {
          groups[i].params.push_back(v);
          placed = true;
          break;
        }
    if (!placed) unmatched += (unmatched.empty() ? "" : ", ") + n;
  }
  MN_CHECK(unmatched.empty(), "param_groups_by_prefix: parameters in no group: ", unmatched,
           " (add a group with the prefix \"\" to collect the rest)");
  for (const ParamGroup& g : groups)
    MN_CHECK(!g.params.empty(), "param_groups_by_prefix: group '", g.name,
             "' gets no parameters (every match was claimed by an earlier group)");
  return groups;
}

}  // namespace mn::nn
