// Triplet network over any trunk (see triplet.h).
#include "nn/models/triplet.h"

#include "autograd/ops.h"

namespace mn::nn {

TripletNet::TripletNet(const KochBranchOptions& o, TripletShare share, Generator& g)
    : TripletNet([&]() -> std::shared_ptr<Module> { return std::make_shared<KochBranch>(o, g); }, share) {}

TripletNet::TripletNet(const std::function<std::shared_ptr<Module>()>& make_trunk, TripletShare share)
    : share_(share) {
  branch_ = register_module("branch", make_trunk());
  MN_CHECK(branch_ != nullptr, "TripletNet: the trunk builder returned no module");
  if (share == TripletShare::DisjointAnchor) {
    anchor_branch_ = register_module("anchor_branch", make_trunk());
    MN_CHECK(anchor_branch_ != nullptr && anchor_branch_ != branch_,
             "TripletNet: disjoint sharing needs the trunk builder to return a new module each call");
  }
}

TripletNet::TripletNet(std::shared_ptr<Module> trunk, std::shared_ptr<Module> anchor_trunk)
    : share_(anchor_trunk ? TripletShare::DisjointAnchor : TripletShare::Full) {
  MN_CHECK(trunk != nullptr, "TripletNet: a trunk module is required");
  MN_CHECK(trunk != anchor_trunk, "TripletNet: the anchor trunk must be a different module (pass null to share)");
  branch_ = register_module("branch", std::move(trunk));
  if (anchor_trunk) anchor_branch_ = register_module("anchor_branch", std::move(anchor_trunk));
}

KochBranch& TripletNet::branch() {
  auto* k = dynamic_cast<KochBranch*>(branch_.get());
  MN_CHECK(k != nullptr, "TripletNet::branch(): the trunk is not a KochBranch (use trunk())");
  return *k;
}

Variable TripletNet::embed_anchor(const Variable& x) {
  Module& b = anchor_branch_ ? *anchor_branch_ : *branch_;
  b.train(is_training());
  return b.forward(x);
}

Variable TripletNet::embed_candidate(const Variable& x) {
  branch_->train(is_training());
  return branch_->forward(x);
}

std::vector<Variable> TripletNet::embed_triplets(const Variable& a, const Variable& p, const Variable& n) {
  int64_t N = a.size(0);
  if (share_ == TripletShare::Full) {
    Variable e = embed_candidate(ag::concat({a, p, n}, 0));
    return {ag::narrow(e, 0, 0, N), ag::narrow(e, 0, N, N), ag::narrow(e, 0, 2 * N, N)};
  }
  Variable ea = embed_anchor(a);
  Variable e = embed_candidate(ag::concat({p, n}, 0));
  return {ea, ag::narrow(e, 0, 0, N), ag::narrow(e, 0, N, N)};
}

std::vector<ParamGroup> TripletNet::param_groups(double lr, double conv_decay, double dense_decay) const {
  ParamGroup conv, dense;
  conv.name = "conv";
  dense.name = "dense";
  conv.lr = dense.lr = lr;
  conv.weight_decay = conv_decay;
  dense.weight_decay = dense_decay;
  for (auto* m : {branch_.get(), anchor_branch_.get()}) {
    if (!m) continue;
    auto* b = dynamic_cast<const KochBranch*>(m);
    MN_CHECK(b != nullptr, "TripletNet::param_groups: the trunk is not a KochBranch; select groups by "
                           "name prefix instead (nn/optim/param_groups.h)");
    for (auto& v : b->conv_parameters()) conv.params.push_back(v);
    for (auto& v : b->dense_parameters()) dense.params.push_back(v);
  }
  return {conv, dense};
}

}  // namespace mn::nn
