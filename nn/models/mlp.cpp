// MLP trunk (see mlp.h).
#include "nn/models/mlp.h"

#include "autograd/ops_conv.h"

namespace mn::nn {

MLP::MLP(const MLPOptions& o, Generator& g) : opt_(o) {
  MN_CHECK(o.sizes.size() >= 2, "MLP: sizes needs the input and at least one layer size, got ",
           o.sizes.size(), " value(s)");
  for (int64_t s : o.sizes) MN_CHECK(s > 0, "MLP: layer sizes must be positive, got ", s);
  MN_CHECK(o.dropout >= 0 && o.dropout < 1, "MLP: dropout must be in [0, 1), got ", o.dropout);
  // Same construction of the mask generator as KochBranch: one draw from g.
  dropout_gen_ = std::make_unique<Generator>(g.next_u32() * 0x9E3779B97F4A7C15ull + 1, 0);
  for (size_t i = 0; i + 1 < o.sizes.size(); ++i) {
    LinearOptions lo(o.sizes[i], o.sizes[i + 1]);
    lo.dtype = o.dtype;
    lo.device = o.device;
    fcs_.push_back(register_module("fc" + std::to_string(i + 1), std::make_shared<Linear>(lo, g)));
    if (o.dropout > 0 && i + 2 < o.sizes.size())
      drops_.push_back(std::make_shared<Dropout>(o.dropout, *dropout_gen_));
  }
  act_ = std::make_shared<Activation>(o.activation, o.act_params);
}

Variable MLP::forward(const Variable& x) {
  Variable h = x.dim() == 2 ? x : ag::flatten_batch(x);
  MN_CHECK(h.dim() == 2 && h.size(1) == opt_.sizes.front(), "MLP: expected input (N, ", opt_.sizes.front(),
           ") (or (N, ...) with that many features), got ", x.data().desc());
  for (size_t i = 0; i < fcs_.size(); ++i) {
    h = fcs_[i]->forward(h);
    const bool last = i + 1 == fcs_.size();
    if (!last || opt_.activate_output) h = act_->forward(h);
    if (!last && !drops_.empty()) {
      drops_[i]->train(is_training());
      h = drops_[i]->forward(h);
    }
  }
  return h;
}

}  // namespace mn::nn
