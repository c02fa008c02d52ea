// One registry of names for everything a study selects by a flag string: losses,
// miners, activations, optimizers, schedules (and, in data/ or experiments/,
// samplers: Registry<F> is a plain template, any layer can hold one).
//
//   Registry<LossFactory>& r = loss_registry();
//   r.get("multi-similarity")(cfg)      // throws mn::Error listing the valid names
//   r.help()                            // "  name   help" lines, for --help
//
// Why getters instead of self-registering static objects: the library is a
// static archive, and an object file that only holds a static registrar is
// never pulled in by the linker (and static initialisation order across files
// is unspecified). Each getter owns a function-local static registry and fills
// it on first use by calling register_builtin_*() explicitly, so every
// built-in name is present whatever the program links or calls first.
// Names are kept in registration order (the order --help lists them in).
#pragma once
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/activation.h"
#include "nn/layers/activation.h"
#include "nn/optim/optimizer.h"
#include "nn/optim/schedule.h"
#include "runtime/error.h"

namespace mn::nn {

template <typename Factory>
class Registry {
 public:
  // `what` names the kind of thing in messages ("loss", "miner", ...).
  explicit Registry(std::string what) : what_(std::move(what)) {}

  // Adds a name; an empty or duplicate name is an error (two factories for one
  // flag value would make the choice depend on registration order).
  Registry& add(const std::string& name, const std::string& help, Factory factory) {
    MN_CHECK(!name.empty(), what_, " registry: cannot register an empty name");
    MN_CHECK(!contains(name), what_, " registry: '", name, "' is already registered");
    entries_.push_back({name, help, std::move(factory)});
    return *this;
  }
  bool contains(const std::string& name) const { return find(name) != nullptr; }
  // The factory registered under `name`; an unknown name throws mn::Error that
  // lists every valid name.
  const Factory& get(const std::string& name) const {
    const Entry* e = find(name);
    MN_CHECK(e != nullptr, "unknown ", what_, " '", name, "'; valid ", what_, " names: ", joined());
    return e->factory;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : entries_) out.push_back(e.name);
    return out;
  }
  const std::string& help(const std::string& name) const {
    get(name);
    return find(name)->help;
  }
  // One line per name: "  name  help", names padded to one column.
  std::string help() const {
    size_t w = 0;
    for (const auto& e : entries_) w = std::max(w, e.name.size());
    std::string out;
    for (const auto& e : entries_)
      out += "  " + e.name + std::string(w - e.name.size() + 2, ' ') + e.help + "\n";
    return out;
  }
  // "a, b, c"
  std::string joined() const {
    std::string out;
    for (const auto& e : entries_) out += (out.empty() ? "" : ", ") + e.name;
    return out;
  }
  const std::string& what() const { return what_; }
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string name, help;
    Factory factory;
  };
  const Entry* find(const std::string& name) const {
    for (const auto& e : entries_)
      if (e.name == name) return &e;
    return nullptr;
  }
  std::string what_;
  std::vector<Entry> entries_;
};

// A registry filled by `fill` (a register_builtin_*() function); the getters
// hold the result in a function-local static:
//   static Registry<F> r = filled_registry<F>("loss", register_builtin_losses);
template <typename Factory>
Registry<Factory> filled_registry(const char* what, void (*fill)(Registry<Factory>&)) {
  Registry<Factory> r(what);
  fill(r);
  return r;
}

// ---- activations: relu, elu, selu, softplus, sigmoid, tanh -------------------
// The factory gets the parameters (ELU alpha, Softplus beta / threshold).
using ActivationFactory = std::function<std::shared_ptr<Activation>(const kernels::ActParams&)>;
Registry<ActivationFactory>& activation_registry();
// The kernel enum of an activation name (for options structs such as
// KochBranchOptions::activation); unknown names throw listing the valid ones.
kernels::Act activation_kind(const std::string& name);

// ---- optimizers: sgd, adam, adamw ---------------------------------------------
// Hyperparameters live in the groups (ParamGroup: lr, momentum, decay, betas...).
using OptimizerFactory = std::function<std::unique_ptr<Optimizer>(std::vector<ParamGroup>)>;
Registry<OptimizerFactory>& optimizer_registry();

// ---- learning-rate schedules: constant, exponential, step ---------------------
struct ScheduleConfig {
  double gamma = 0.99;       // exponential: per-epoch factor; step: factor per step
  int64_t step_epochs = 8;   // step: epochs between decays
  int64_t total_epochs = 1;  // cosine: the epochs it decays over (a run's --epochs)
};
using ScheduleFactory =
    std::function<std::unique_ptr<LrSchedule>(Optimizer&, const ScheduleConfig&)>;
Registry<ScheduleFactory>& schedule_registry();

}  // namespace mn::nn
