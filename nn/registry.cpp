// The built-in activations, optimizers and schedules of the name registry
// (nn/registry.h). Losses and miners register next to their code
// (nn/losses/loss.cpp, nn/miners/miner.cpp).
#include "nn/registry.h"

namespace mn::nn {
namespace {

// lr(e) = base: for studies whose protocol has no schedule.
class ConstantLr : public LrSchedule {
 public:
  explicit ConstantLr(Optimizer& opt) : LrSchedule(opt) {}
  double factor(int64_t) const override { return 1.0; }
};

template <typename A>
ActivationFactory plain() {
  return [](const kernels::ActParams&) { return std::make_shared<A>(); };
}

void register_builtin_activations(Registry<ActivationFactory>& r) {
  r.add("relu", "max(0, x)", plain<ReLU>());
  r.add("elu", "x > 0 ? x : alpha (e^x - 1)  (alpha, default 1)",
        [](const kernels::ActParams& p) { return std::make_shared<ELU>(p.alpha); });
  r.add("selu", "scaled ELU (Klambauer et al.)", plain<SELU>());
  r.add("softplus", "log(1 + e^(beta x)) / beta, linear above threshold",
        [](const kernels::ActParams& p) { return std::make_shared<Softplus>(p.beta, p.threshold); });
  r.add("sigmoid", "1 / (1 + e^-x)", plain<Sigmoid>());
  r.add("tanh", "tanh(x)", plain<Tanh>());
}

void register_builtin_optimizers(Registry<OptimizerFactory>& r) {
  r.add("sgd", "SGD with per-group momentum (Nesterov optional) and L2 decay",
        [](std::vector<ParamGroup> g) -> std::unique_ptr<Optimizer> { return std::make_unique<SGD>(std::move(g)); });
  r.add("adam", "Adam, weight decay as L2 in the gradient",
        [](std::vector<ParamGroup> g) -> std::unique_ptr<Optimizer> { return std::make_unique<Adam>(std::move(g)); });
  r.add("adamw", "AdamW, decoupled weight decay",
        [](std::vector<ParamGroup> g) -> std::unique_ptr<Optimizer> { return std::make_unique<AdamW>(std::move(g)); });
}

void register_builtin_schedules(Registry<ScheduleFactory>& r) {
  r.add("constant", "lr stays at each group's base lr",
        [](Optimizer& o, const ScheduleConfig&) -> std::unique_ptr<LrSchedule> {
          return std::make_unique<ConstantLr>(o);
        });
  r.add("exponential", "lr = base * gamma^epoch (Koch: gamma 0.99)",
        [](Optimizer& o, const ScheduleConfig& c) -> std::unique_ptr<LrSchedule> {
          return std::make_unique<ExponentialDecay>(o, c.gamma);
        });
  r.add("step", "lr = base * gamma^floor(epoch / step_epochs) (sampling study: 0.1 every 8)",
        [](Optimizer& o, const ScheduleConfig& c) -> std::unique_ptr<LrSchedule> {
          return std::make_unique<StepDecay>(o, c.step_epochs, c.gamma);
        });
  r.add("cosine", "lr = base * (1 + cos(pi * epoch / total_epochs)) / 2, per epoch (SGDR without restarts)",
        [](Optimizer& o, const ScheduleConfig& c) -> std::unique_ptr<LrSchedule> {
          return std::make_unique<CosineDecay>(o, c.total_epochs);
        });
}

}  // namespace

Registry<ActivationFactory>& activation_registry() {
  static Registry<ActivationFactory> r = filled_registry<ActivationFactory>("activation", register_builtin_activations);
  return r;
}

kernels::Act activation_kind(const std::string& name) {
  return activation_registry().get(name)(kernels::ActParams{})->kind();
}

Registry<OptimizerFactory>& optimizer_registry() {
  static Registry<OptimizerFactory> r = filled_registry<OptimizerFactory>("optimizer", register_builtin_optimizers);
  return r;
}

Registry<ScheduleFactory>& schedule_registry() {
  static Registry<ScheduleFactory> r = filled_registry<ScheduleFactory>("schedule", register_builtin_schedules);
  return r;
}

}  // namespace mn::nn
