// Siamese network over any trunk (see siamese.h).
#include "nn/models/siamese.h"

#include "autograd/ops.h"
#include "autograd/ops_layers.h"
#include "nn/init.h"

namespace mn::nn {

SiameseNet::SiameseNet(const KochBranchOptions& o, Generator& g) {
  // Draw order as before the trunk was made generic: branch, head (Linear's own
  // init), then the head's N(mean, std) re-initialisation.
  branch_ = register_module("branch", std::make_shared<KochBranch>(o, g));
  LinearOptions lo(o.embedding, 1);
  lo.dtype = o.dtype;
  lo.device = o.device;
  head_ = register_module("head", std::make_shared<Linear>(lo, g));
  Tensor w = head_->weight().data(), b = head_->bias().data();
  init::normal_(w, 0.0, o.init.dense_w_std, g);
  init::normal_(b, o.init.dense_b_mean, o.init.dense_b_std, g);
}

SiameseNet::SiameseNet(std::shared_ptr<Module> trunk, int64_t head_features, Generator& g,
                       std::shared_ptr<Module> second_trunk) {
  MN_CHECK(trunk != nullptr, "SiameseNet: a trunk module is required");
  MN_CHECK(trunk != second_trunk, "SiameseNet: the second trunk must be a different module (pass null to share)");
  MN_CHECK(head_features >= 0, "SiameseNet: head_features must be >= 0, got ", head_features);
  branch_ = register_module("branch", std::move(trunk));
  if (second_trunk) second_ = register_module("second_branch", std::move(second_trunk));
  if (head_features > 0) {
    // The head follows the trunk's dtype and device.
    auto params = branch_->parameters();
    Variable any = params.empty() ? Variable() : params.front();
    LinearOptions lo(head_features, 1);
    if (any.defined()) {
      lo.dtype = any.dtype();
      lo.device = any.device();
    }
    head_ = register_module("head", std::make_shared<Linear>(lo, g));
  }
}

KochBranch& SiameseNet::branch() {
  auto* k = dynamic_cast<KochBranch*>(branch_.get());
  MN_CHECK(k != nullptr, "SiameseNet::branch(): the trunk is not a KochBranch (use trunk())");
  return *k;
}

const Variable& SiameseNet::head_weight() const {
  MN_CHECK(head_ != nullptr, "SiameseNet: this net was built without a head (head_features = 0)");
  return head_->weight();
}
const Variable& SiameseNet::head_bias() const {
  MN_CHECK(head_ != nullptr, "SiameseNet: this net was built without a head (head_features = 0)");
  return head_->bias();
}

Variable SiameseNet::embed(const Variable& x) {
  branch_->train(is_training());
  return branch_->forward(x);
}

std::vector<Variable> SiameseNet::embed_pairs(const Variable& x1, const Variable& x2) {
  int64_t N = x1.size(0);
  if (second_) {
    second_->train(is_training());
    return {embed(x1), second_->forward(x2)};
  }
  Variable e = embed(ag::concat({x1, x2}, 0));
  return {ag::narrow(e, 0, 0, N), ag::narrow(e, 0, N, N)};
}

Variable SiameseNet::logits(const Variable& e1, const Variable& e2) {
  MN_CHECK(head_ != nullptr, "SiameseNet::logits: this net was built without a head (head_features = 0)");
  Variable z = head_->forward(ag::abs_diff(e1, e2));  // (N, 1)
  return ag::reshape(z, {e1.size(0)});
}

std::vector<ParamGroup> SiameseNet::param_groups(double lr, double momentum,
                                                 const std::vector<double>& decays) const {
  MN_CHECK(decays.size() == 6, "SiameseNet::param_groups: expected 6 decays (conv1..4, dense, head), got ",
           decays.size());
  MN_CHECK(dynamic_cast<const KochBranch*>(branch_.get()) != nullptr && head_ && !second_,
           "SiameseNet::param_groups: needs Koch's net (KochBranch trunk, shared, with head); select groups "
           "by name prefix instead (nn/optim/param_groups.h)");
  std::vector<ParamGroup> groups;
  auto named = branch_->named_parameters();
  const char* names[5] = {"conv1", "conv2", "conv3", "conv4", "dense"};
  for (int i = 0; i < 5; ++i) {
    ParamGroup g;
    g.name = names[i];
    g.lr = lr;
    g.momentum = momentum;
    g.weight_decay = decays[i];
    std::string prefix = std::string(names[i]) + ".";
    for (auto& [n, v] : named)
      if (n.rfind(prefix, 0) == 0) g.params.push_back(v);
    if (i < 3)  // batch-norm after pool i belongs to that conv layer's group
      for (auto& [n, v] : named)
        if (n.rfind("bn" + std::to_string(i + 1) + ".", 0) == 0) g.params.push_back(v);
    groups.push_back(g);
  }
  ParamGroup head;
  head.name = "head";
  head.lr = lr;
  head.momentum = momentum;
  head.weight_decay = decays[5];
  head.params = {head_->weight(), head_->bias()};
  groups.push_back(head);
  return groups;
}

}  // namespace mn::nn
