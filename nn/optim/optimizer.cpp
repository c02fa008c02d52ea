// Optimizer base (group bookkeeping, state allocation, state dict, clipping)
// and the SGD / Adam / AdamW front ends; the arithmetic lives in kernels/optim.
#include "nn/optim/optimizer.h"

#include "kernels/elementwise.h"
#include "kernels/gemm_config.h"

#include <cmath>
#include <cstdio>
#include <unordered_map>
#include <unordered_set>

#include "runtime/error.h"
#include "runtime/graph.h"

namespace mn::nn {

using kernels::MultiTensorDesc;
using kernels::MultiTensorPlan;

Optimizer::Optimizer(std::vector<ParamGroup> groups, const char* kind) : kind_(kind) {
  for (auto& g : groups) add_param_group(std::move(g));
}

void Optimizer::add_param_group(ParamGroup g) {
  for (size_t i = 0; i < g.params.size(); ++i)
    MN_CHECK(g.params[i].defined(), kind_, ": parameter ", i, " of group '", g.name,
             "' is undefined");
  MN_CHECK(g.lr >= 0.0, kind_, ": group '", g.name, "' has negative learning rate ", g.lr);
  groups_.push_back(std::move(g));
  states_.emplace_back();
  check_unique_params();
}

void Optimizer::check_unique_params() const {
  std::unordered_set<const void*> seen;
  for (size_t gi = 0; gi < groups_.size(); ++gi)
    for (const auto& v : groups_[gi].params)
      MN_CHECK(seen.insert(v.id()).second, kind_, ": a parameter appears twice (group '",
               group_label(gi), "'); shared weights must be listed once");
}

ParamGroup& Optimizer::group(size_t i) {
  MN_CHECK(i < groups_.size(), kind_, ": group ", i, " out of range (", groups_.size(), ")");
  return groups_[i];
}
const ParamGroup& Optimizer::group(size_t i) const {
  MN_CHECK(i < groups_.size(), kind_, ": group ", i, " out of range (", groups_.size(), ")");
  return groups_[i];
}
ParamGroup& Optimizer::group(const std::string& name) {
  for (auto& g : groups_)
    if (g.name == name) return g;
  MN_THROW(kind_, ": no parameter group named '", name, "'");
}

int64_t Optimizer::step_count(size_t g) const {
  MN_CHECK(g < states_.size(), kind_, ": group ", g, " out of range");
  return states_[g].step;
}

std::string Optimizer::group_label(size_t i) const {
  return groups_[i].name.empty() ? "group" + std::to_string(i) : groups_[i].name;
}

int64_t Optimizer::plan_uploads() const {
  int64_t n = 0;
  for (auto& s : states_) n += s.plan.uploads();
  for (auto& b : batch_plans_) n += b.plan.uploads();
  return n;
}

// Keeps the per-parameter state aligned with the group's current parameter list
// (matched by Variable identity, so reordering or adding parameters keeps the
// state of the others) and on each parameter's device and dtype.
void Optimizer::sync_state(size_t gi) {
  ParamGroup& g = groups_[gi];
  GroupState& st = states_[gi];
  const int nslots = num_slots(g);
  bool same = st.ids.size() == g.params.size();
  for (size_t i = 0; same && i < g.params.size(); ++i) same = st.ids[i] == g.params[i].id();
  if (!same) {
    std::unordered_map<const void*, std::array<Tensor, 2>> old;
    for (size_t i = 0; i < st.ids.size(); ++i) old[st.ids[i]] = st.slots[i];
    st.ids.clear();
    st.slots.clear();
    for (auto& v : g.params) {
      st.ids.push_back(v.id());
      auto it = old.find(v.id());
      st.slots.push_back(it == old.end() ? std::array<Tensor, 2>{} : it->second);
    }
  }
  for (size_t i = 0; i < g.params.size(); ++i) {
    const Tensor& p = g.params[i].data();
    for (int k = 0; k < 2; ++k) {
      Tensor& s = st.slots[i][k];
      if (k < nslots && !s.defined()) {
        s = Tensor::zeros(p.shape(), p.dtype(), p.device());
      } else if (s.defined() && (s.device() != p.device() || s.dtype() != p.dtype())) {
        s = s.to(p.device()).to(p.dtype());  // the module was moved after the optimizer was built
      }
    }
  }
}

// The descriptors of group gi's parameters that have a gradient, with their dtype and
// device (one of each per group, else an error naming the group).
std::vector<MultiTensorDesc> Optimizer::group_descs(size_t gi, DType& dtype, Device& device) {
  ParamGroup& g = groups_[gi];
  GroupState& st = states_[gi];
  std::vector<MultiTensorDesc> descs;
  bool first = true;
  for (size_t i = 0; i < g.params.size(); ++i) {
    ag::Variable& v = g.params[i];
    if (!v.has_grad()) continue;
    const Tensor& p = v.data();
    const Tensor& gr = v.grad();
    if (first) {
      dtype = p.dtype();
      device = p.device();
      first = false;
    }
    MN_CHECK(is_floating(p.dtype()), kind_, ": group '", group_label(gi), "' parameter ", i,
             " has dtype ", dtype_name(p.dtype()));
    MN_CHECK(p.dtype() == dtype && p.device() == device, kind_, ": group '", group_label(gi),
             "' mixes ", dtype_name(dtype), " on ", device.str(), " with ", p.desc(),
             " (parameter ", i, "); split it into groups");
    MN_CHECK(gr.shape() == p.shape() && gr.dtype() == p.dtype() && gr.device() == p.device(),
             kind_, ": group '", group_label(gi), "' parameter ", i, " is ", p.desc(),
             " but its gradient is ", gr.desc());
    MN_CHECK(p.is_contiguous() && gr.is_contiguous(), kind_, ": group '", group_label(gi),
             "' parameter ", i, " or its gradient is not contiguous");
    MultiTensorDesc d;
    d.param = p.raw_data();
    d.grad = gr.raw_data();
    d.state0 = st.slots[i][0].defined() ? st.slots[i][0].raw_data() : nullptr;
    d.state1 = st.slots[i][1].defined() ? st.slots[i][1].raw_data() : nullptr;
    d.numel = p.numel();
    descs.push_back(d);
  }
  return descs;
}

void Optimizer::step() { step_impl(false); }
void Optimizer::step_and_zero_grad() { step_impl(true); }

void Optimizer::step_impl(bool zero_grad) {
  ag::NoGradGuard no_grad;
  std::vector<PendingGroup> pending;  // groups left to launch_groups()
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    sync_state(gi);
    GroupState& st = states_[gi];
    DType dtype = DType::F32;
    Device device;
    std::vector<MultiTensorDesc> descs = group_descs(gi, dtype, device);
    if (descs.empty()) continue;
    st.plan.set(descs);
    ++st.step;
    if (joins_group_launch(groups_[gi], device)) pending.push_back({gi, dtype, device, std::move(descs)});
    else launch(groups_[gi], st, dtype, device, zero_grad);
    if (step_mode() == StepMode::Capture) {
      // A captured update runs at each replay, not now: the host count follows the
      // replays (it is saved in checkpoints; Adam also counts on the device).
      --st.step;
      cuda::on_replay([this, gi] { ++states_[gi].step; });
    }
  }
  if (!pending.empty()) launch_groups(pending, zero_grad);
}

void Optimizer::zero_grad() {
  for (auto& g : groups_)
    for (auto& v : g.params) v.zero_grad();
}

std::vector<std::pair<std::string, Tensor>> Optimizer::state_dict() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const std::string pre = "optim." + group_label(gi) + ".";
    const GroupState& st = states_[gi];
    // Adam on a GPU counts on the device (GroupState::device_step): a replayed graph moved it.
    const int64_t step = st.device_step.defined() && !st.device_step_stale
                             ? static_cast<int64_t>(st.device_step.narrow(0, 0, 1).item())
                             : st.step;
    out.emplace_back(pre + "step", Tensor::scalar(static_cast<double>(step), DType::I64));
    out.emplace_back(pre + "lr", Tensor::scalar(groups_[gi].lr, DType::F64));
    out.emplace_back(pre + "momentum", Tensor::scalar(groups_[gi].momentum, DType::F64));
    for (size_t i = 0; i < st.slots.size(); ++i)
      for (int k = 0; k < 2; ++k)
        if (st.slots[i][k].defined())
          out.emplace_back(pre + std::to_string(i) + "." + slot_name(k), st.slots[i][k]);
  }
  return out;
}

void Optimizer::load_state_dict(const std::map<std::string, Tensor>& tensors,
                                const std::string& source) {
  auto get = [&](const std::string& name) -> const Tensor& {
    auto it = tensors.find(name);
    MN_CHECK(it != tensors.end(), kind_, ": '", source, "' has no tensor '", name,
             "' (optimizer state of a different configuration?)");
    return it->second;
  };
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    sync_state(gi);
    GroupState& st = states_[gi];
    const std::string pre = "optim." + group_label(gi) + ".";
    const Tensor& step = get(pre + "step");
    MN_CHECK(step.numel() == 1, kind_, ": '", source, "' tensor '", pre, "step' has shape ",
             shape_str(step.shape()), ", expected a scalar");
    st.step = static_cast<int64_t>(step.item());
    st.momentum_started = st.step > 0;
    st.device_step_stale = true;
    groups_[gi].lr = get(pre + "lr").item();
    groups_[gi].momentum = get(pre + "momentum").item();
    const int nslots = num_slots(groups_[gi]);
    for (size_t i = 0; i < groups_[gi].params.size(); ++i) {
      for (int k = 0; k < 2; ++k) {
        const std::string name = pre + std::to_string(i) + "." + slot_name(k);
        Tensor& dst = st.slots[i][k];
        auto it = tensors.find(name);
        if (it == tensors.end()) {
          // Adam's moments always exist once a step was taken. An SGD momentum
          // buffer is absent when the saved run never used momentum: start it
          // fresh (the next step initialises it to the gradient).
          const bool is_sgd = std::string(kind_) == "SGD";
          MN_CHECK(is_sgd || k >= nslots || st.step == 0, kind_, ": '", source,
                   "' has no tensor '", name, "'");
          if (dst.defined()) dst.zero_();
          if (is_sgd && k == 0) st.momentum_started = false;
          continue;
        }
        const Tensor& p = groups_[gi].params[i].data();
        MN_CHECK(it->second.shape() == p.shape(), kind_, ": '", source, "' tensor '", name,
                 "' has shape ", shape_str(it->second.shape()), " but parameter ", i,
                 " of group '", group_label(gi), "' has shape ", shape_str(p.shape()));
        if (!dst.defined()) dst = Tensor::zeros(p.shape(), p.dtype(), p.device());
        dst.copy_(it->second);
      }
    }
  }
}

std::string Optimizer::graph_key() const {
  std::string k = kind_;
  char buf[256];
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const ParamGroup& g = groups_[gi];
    std::snprintf(buf, sizeof buf, "|%.17g,%.17g,%.17g,%.17g,%d,%.17g,%.17g,%.17g,%d", g.lr, g.momentum,
                  g.dampening, g.weight_decay, g.nesterov ? 1 : 0, g.betas.first, g.betas.second, g.eps,
                  gi < states_.size() && states_[gi].momentum_started ? 1 : 0);
    k += buf;
  }
  return k;
}

double Optimizer::clip_grad_norm(double max_norm, double eps) {
  Tensor norm = clip_grad_norm_on_device(max_norm, eps);
  return norm.defined() ? norm.item() : 0.0;
}

Tensor Optimizer::clip_grad_norm_on_device(double max_norm, double eps) {
  MN_CHECK(max_norm > 0.0, kind_, "::clip_grad_norm: max_norm must be positive, got ", max_norm);
  ag::NoGradGuard no_grad;
  // Descriptors per (dtype, device); plans persist so tables are uploaded once.
  std::vector<std::pair<std::pair<DType, Device>, std::vector<MultiTensorDesc>>> by_type;
  for (auto& g : groups_)
    for (auto& v : g.params) {
      if (!v.has_grad()) continue;
      const Tensor& gr = v.grad();
      MN_CHECK(gr.is_contiguous(), kind_, "::clip_grad_norm: non-contiguous gradient");
      std::pair<DType, Device> key{gr.dtype(), gr.device()};
      auto it = by_type.begin();
      while (it != by_type.end() && !(it->first.first == key.first && it->first.second == key.second)) ++it;
      if (it == by_type.end()) {
        by_type.push_back({key, {}});
        it = by_type.end() - 1;
      }
      MultiTensorDesc d;
      d.grad = gr.raw_data();
      d.numel = gr.numel();
      it->second.push_back(d);
    }
  if (by_type.empty()) return Tensor();
  const Device device = by_type[0].first.second;
  for (auto& [key, descs] : by_type)
    MN_CHECK(key.second == device, kind_, "::clip_grad_norm: gradients on ", device.str(), " and ",
             key.second.str(), "; clipping needs one device");
  if (!clip_sumsq_.defined() || clip_sumsq_.device() != device)
    clip_sumsq_ = Tensor::scalar(0.0, DType::F64, device);
  else
    clip_sumsq_.zero_();
  if (clip_plans_.size() != by_type.size()) clip_plans_.resize(by_type.size());
  for (size_t k = 0; k < by_type.size(); ++k) {
    clip_plans_[k].first = by_type[k].first;
    clip_plans_[k].second.set(by_type[k].second);
    kernels::fused_grad_sumsq(clip_plans_[k].second, by_type[k].first.first, device, clip_sumsq_);
  }
  for (size_t k = 0; k < by_type.size(); ++k)
    kernels::fused_clip_scale(clip_plans_[k].second, by_type[k].first.first, device, clip_sumsq_,
                              max_norm, eps);
  return kernels::sqrt(clip_sumsq_);  // a fresh tensor: the next call reuses clip_sumsq_
}

double clip_grad_norm(const std::vector<ag::Variable>& params, double max_norm, double eps) {
  // A throwaway SGD(lr 0) holds the tables; only its clipping path runs.
  SGD holder(params, 0.0);
  return holder.clip_grad_norm(max_norm, eps);
}

// ---- SGD ------------------------------------------------------------------------

SGD::SGD(std::vector<ParamGroup> groups) : Optimizer(std::move(groups), "SGD") {}

SGD::SGD(std::vector<ag::Variable> params, double lr, double momentum, double weight_decay,
         bool nesterov)
    : Optimizer({}, "SGD") {
  ParamGroup g;
  g.params = std::move(params);
  g.lr = lr;
  g.momentum = momentum;
  g.weight_decay = weight_decay;
  g.nesterov = nesterov;
  add_param_group(std::move(g));
}

int SGD::num_slots(const ParamGroup& g) const { return g.momentum != 0.0 ? 1 : 0; }
const char* SGD::slot_name(int k) const { return k == 0 ? "momentum_buffer" : "unused"; }

void SGD::launch(const ParamGroup& g, GroupState& st, DType dtype, Device device, bool zero_grad) {
  MN_CHECK(!g.nesterov || (g.momentum > 0.0 && g.dampening == 0.0),
           "SGD: Nesterov momentum needs momentum > 0 and zero dampening (group '", g.name, "')");
  kernels::SgdHyper h;
  h.lr = g.lr;
  h.momentum = g.momentum;
  h.dampening = g.dampening;
  h.weight_decay = g.weight_decay;
  h.nesterov = g.nesterov;
  h.first_step = g.momentum != 0.0 && !st.momentum_started;
  if (g.momentum != 0.0) st.momentum_started = true;
  h.zero_grad = zero_grad;
  kernels::fused_sgd_step(st.plan, dtype, device, h);
}

// ---- Adam / AdamW -----------------------------------------------------------------

Adam::Adam(std::vector<ParamGroup> groups, bool decoupled)
    : Optimizer(std::move(groups), decoupled ? "AdamW" : "Adam"), decoupled_(decoupled) {}

Adam::Adam(std::vector<ag::Variable> params, double lr, double weight_decay,
           std::pair<double, double> betas, double eps)
    : Optimizer({}, "Adam"), decoupled_(false) {
  ParamGroup g;
  g.params = std::move(params);
  g.lr = lr;
  g.weight_decay = weight_decay;
  g.betas = betas;
  g.eps = eps;
  add_param_group(std::move(g));
}

// The group's hyperparameters for this update; on a GPU also its device step count.
kernels::AdamHyper Adam::hyper(const ParamGroup& g, GroupState& st, Device device) const {
  MN_CHECK(g.betas.first >= 0.0 && g.betas.first < 1.0 && g.betas.second >= 0.0 &&
               g.betas.second < 1.0,
           kind(), ": betas must be in [0, 1), got (", g.betas.first, ", ", g.betas.second,
           ") in group '", g.name, "'");
  kernels::AdamHyper h;
  h.lr = g.lr;
  h.beta1 = g.betas.first;
  h.beta2 = g.betas.second;
  h.eps = g.eps;
  h.weight_decay = g.weight_decay;
  h.decoupled = decoupled_;
  h.step = st.step;
  if (device.is_cuda()) {
    // The count lives on the device (a replayed graph advances it there); the
    // kernel adds this update's 1 to the count before it.
    if (!st.device_step.defined() || st.device_step.device() != device || st.device_step_stale) {
      st.device_step = Tensor::from_vector(std::vector<double>{static_cast<double>(st.step - 1), 0.0, 0.0}, {3}, device);
      st.device_step_stale = false;
    }
    h.device_step = st.device_step.data<double>();
  }
  return h;
}

void Adam::launch(const ParamGroup& g, GroupState& st, DType dtype, Device device, bool zero_grad) {
  kernels::AdamHyper h = hyper(g, st, device);
  h.zero_grad = zero_grad;
  kernels::fused_adam_step(st.plan, dtype, device, h);
}

bool Adam::joins_group_launch(const ParamGroup&, Device device) const {
  return !device.is_cuda() || kernels::cuda_speedups().optim_one_launch;
}

// Groups of one dtype and device, kMaxAdamGroups at a time, in one launch each; the
// batch's table is remade (and re-uploaded) only when a pointer, size or group changes.
void Adam::launch_groups(std::vector<PendingGroup>& pending, bool zero_grad) {
  std::vector<bool> done(pending.size(), false);
  size_t batch = 0;
  for (size_t a = 0; a < pending.size(); ++a) {
    if (done[a]) continue;
    std::vector<MultiTensorDesc> descs;
    std::vector<kernels::AdamHyper> hs;
    for (size_t b = a; b < pending.size() && hs.size() < size_t(kernels::kMaxAdamGroups); ++b) {
      PendingGroup& pg = pending[b];
      if (done[b] || pg.dtype != pending[a].dtype || pg.device != pending[a].device) continue;
      hs.push_back(hyper(groups_[pg.group], states_[pg.group], pg.device));
      for (MultiTensorDesc d : pg.descs) {
        d.group = static_cast<int64_t>(hs.size() - 1);
        descs.push_back(d);
      }
      done[b] = true;
    }
    if (batch_plans_.size() <= batch) batch_plans_.emplace_back();
    BatchPlan& bp = batch_plans_[batch++];
    bp.plan.set(descs);
    const Device device = pending[a].device;
    if (device.is_cuda() && (!bp.done.defined() || bp.done.device() != device))
      bp.done = Tensor::zeros({1}, DType::I32, device);  // the blocks' ticket counter
    kernels::fused_adam_step_groups(bp.plan, pending[a].dtype, device, hs, zero_grad, bp.done);
  }
}

AdamW::AdamW(std::vector<ag::Variable> params, double lr, double weight_decay,
             std::pair<double, double> betas, double eps)
    : Adam(std::vector<ParamGroup>{}, true) {
  ParamGroup g;
  g.params = std::move(params);
  g.lr = lr;
  g.weight_decay = weight_decay;
  g.betas = betas;
  g.eps = eps;
  add_param_group(std::move(g));
}

}  // namespace mn::nn
