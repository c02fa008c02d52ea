// Optimizers over parameter groups: SGD (momentum, Nesterov), Adam, AdamW, and
// global gradient-norm clipping.
//
// Each ParamGroup carries its own hyperparameters (per-layer learning rates,
// momenta and L2 decays, as in Koch et al. and the Omniglot study). step()
// makes ONE fused launch per group for SGD, and one for all groups of a dtype and
// device for Adam / AdamW (kernels/optim.h; per group with MN_OPTIM_ONE_LAUNCH=0):
// the {param, grad, state, numel} descriptor table is kept in a cached device buffer
// and only re-uploaded when the tensors change. Weights shared between siamese
// or triplet branches are the same Variable, so they are updated once; a
// Variable listed twice across groups is an error.
//
// Step counting: each group has one step counter, advanced by every step() in
// which at least one of its parameters has a gradient; parameters without a
// gradient are skipped. (PyTorch counts per parameter; the two agree whenever
// every parameter of a group gets a gradient, which is the case in training.)
// A step() captured in a CUDA graph is counted at each replay (cuda::on_replay),
// not at the capture.
//
// Optimizer state names (state_dict(), also the checkpoint names, see
// nn/checkpoint.h), with G = the group's name or "group<i>" when unnamed and
// P = the parameter's index inside its group:
//   optim.G.step                 int64 scalar, the group's step count
//   optim.G.lr, optim.G.momentum float64 scalars, the current (scheduled) values
//   optim.G.P.momentum_buffer    SGD (when momentum was ever non-zero)
//   optim.G.P.exp_avg, optim.G.P.exp_avg_sq    Adam / AdamW
#pragma once
#include <array>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "kernels/optim.h"

namespace mn::nn {

struct ParamGroup {
  std::vector<ag::Variable> params;
  double lr = 1e-3;
  double momentum = 0.0;      // SGD
  double weight_decay = 0.0;  // L2 added to the gradient (SGD, Adam); decoupled in AdamW
  double dampening = 0.0;     // SGD
  bool nesterov = false;      // SGD
  std::pair<double, double> betas{0.9, 0.999};  // Adam / AdamW
  double eps = 1e-8;                           // Adam / AdamW
  std::string name;           // used in state names and error messages
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One fused update per group.
  void step();
  // Zeroes the gradients of every parameter (in place, keeps the buffers so the
  // cached descriptor tables stay valid).
  void zero_grad();
  // step() then zero_grad(), the same values, with each gradient zeroed by the update
  // kernel right after it is read instead of by a fill per parameter. (zero_grad()
  // zeroes exactly the gradients step() reads: those of parameters that have one.)
  void step_and_zero_grad();

  // Scales all gradients (every group) so their global L2 norm is at most
  // max_norm: one reduction over all parameters on their device, then one
  // scaling launch that reads the norm on the device. Returns the norm before
  // clipping (the only device-to-host copy). Parameters must share one device.
  double clip_grad_norm(double max_norm, double eps = 1e-6);
  // The same without the copy: the norm before clipping as a float64 scalar on
  // the gradients' device (undefined when no parameter has a gradient), so a
  // GPU step that clips need not wait for the device.
  Tensor clip_grad_norm_on_device(double max_norm, double eps = 1e-6);

  // The host values the update kernels take as arguments (every group's
  // learning rate, momentum, dampening, decay, betas, eps, and whether its
  // momentum has started): a CUDA graph that captured a step replays them, so
  // a change needs a new capture (runtime/graph.h, experiments/common).
  std::string graph_key() const;

  void add_param_group(ParamGroup g);
  size_t num_groups() const { return groups_.size(); }
  ParamGroup& group(size_t i);
  const ParamGroup& group(size_t i) const;
  ParamGroup& group(const std::string& name);
  std::vector<ParamGroup>& groups() { return groups_; }
  int64_t step_count(size_t group) const;
  const char* kind() const { return kind_; }
  // "name" or "group<i>"
  std::string group_label(size_t i) const;

  // Live views of the state (tensors share storage with the optimizer's).
  std::vector<std::pair<std::string, Tensor>> state_dict() const;
  // Copies state from `tensors` (any device; converted). Every name that
  // state_dict() would produce for the current groups must be present with the
  // same shape; `source` (a file name) is quoted in errors.
  void load_state_dict(const std::map<std::string, Tensor>& tensors,
                       const std::string& source = "state dict");

  // Number of times the descriptor tables were (re)uploaded, summed over groups.
  int64_t plan_uploads() const;

 protected:
  Optimizer(std::vector<ParamGroup> groups, const char* kind);

  struct GroupState {
    std::vector<const void*> ids;                // Variable identities, parallel to params
    std::vector<std::array<Tensor, 2>> slots;    // per parameter: state0, state1
    int64_t step = 0;
    bool momentum_started = false;
    kernels::MultiTensorPlan plan;
    // Adam on a GPU: the step count on the device (kernels::AdamHyper::
    // device_step), the count's source of truth once made: a CUDA graph that
    // replays the update advances it without the host. Remade from `step`
    // after load_state (device_step_stale).
    Tensor device_step;
    bool device_step_stale = true;
  };

  // How many state slots (0..2) group `g` needs now, and their names.
  virtual int num_slots(const ParamGroup& g) const = 0;
  virtual const char* slot_name(int k) const = 0;
  // Launches the update of one group over the descriptors already set in st.plan
  // (zero_grad: the kernel zeroes each gradient after reading it).
  virtual void launch(const ParamGroup& g, GroupState& st, DType dtype, Device device,
                      bool zero_grad) = 0;
  // A group whose update joins one launch with the other groups' (launch_groups)
  // instead of launch(); its step count is advanced as for launch().
  struct PendingGroup {
    size_t group;
    DType dtype;
    Device device;
    std::vector<kernels::MultiTensorDesc> descs;
  };
  virtual bool joins_group_launch(const ParamGroup&, Device) const { return false; }
  virtual void launch_groups(std::vector<PendingGroup>&, bool /*zero_grad*/) {}
  // The tables of the multi-group launches, one per launch of a step (in order), and
  // their device ticket counters (kernels::fused_adam_step_groups).
  struct BatchPlan {
    kernels::MultiTensorPlan plan;
    Tensor done;
  };
  std::vector<BatchPlan> batch_plans_;

  std::vector<ParamGroup> groups_;
  std::vector<GroupState> states_;

 private:
  void sync_state(size_t gi);
  void check_unique_params() const;
  void step_impl(bool zero_grad);
  std::vector<kernels::MultiTensorDesc> group_descs(size_t gi, DType& dtype, Device& device);
  const char* kind_;
  std::vector<std::pair<std::pair<DType, Device>, kernels::MultiTensorPlan>> clip_plans_;
  Tensor clip_sumsq_;
};

// SGD with optional momentum (PyTorch's form: buf = mom * buf + (1 - damp) * g,
// the first step buf = g) and Nesterov; weight decay is L2 added to the gradient.
class SGD : public Optimizer {
 public:
  explicit SGD(std::vector<ParamGroup> groups);
  // One group over all `params`.
  SGD(std::vector<ag::Variable> params, double lr, double momentum = 0.0,
      double weight_decay = 0.0, bool nesterov = false);

 protected:
  int num_slots(const ParamGroup& g) const override;
  const char* slot_name(int k) const override;
  void launch(const ParamGroup& g, GroupState& st, DType dtype, Device device,
              bool zero_grad) override;
};

// Adam (weight decay as L2 in the gradient) or, with decoupled = true, AdamW
// (p *= 1 - lr * wd before the Adam update).
class Adam : public Optimizer {
 public:
  explicit Adam(std::vector<ParamGroup> groups, bool decoupled = false);
  Adam(std::vector<ag::Variable> params, double lr, double weight_decay = 0.0,
       std::pair<double, double> betas = {0.9, 0.999}, double eps = 1e-8);

 protected:
  int num_slots(const ParamGroup&) const override { return 2; }
  const char* slot_name(int k) const override { return k == 0 ? "exp_avg" : "exp_avg_sq"; }
  void launch(const ParamGroup& g, GroupState& st, DType dtype, Device device,
              bool zero_grad) override;
  bool joins_group_launch(const ParamGroup& g, Device device) const override;
  void launch_groups(std::vector<PendingGroup>& pending, bool zero_grad) override;
  kernels::AdamHyper hyper(const ParamGroup& g, GroupState& st, Device device) const;
  bool decoupled_;
};

class AdamW : public Adam {
 public:
  explicit AdamW(std::vector<ParamGroup> groups) : Adam(std::move(groups), true) {}
  AdamW(std::vector<ag::Variable> params, double lr, double weight_decay = 1e-2,
        std::pair<double, double> betas = {0.9, 0.999}, double eps = 1e-8);
};

// Standalone global-norm clipping over any parameter list (builds its tables
// each call; Optimizer::clip_grad_norm caches them). Returns the norm.
double clip_grad_norm(const std::vector<ag::Variable>& params, double max_norm,
                      double eps = 1e-6);

}  // namespace mn::nn
