// Module: the unit a model is built from. A module owns named parameters
// (Variables with requires_grad), named buffers (state that is saved but not
// trained, e.g. batch-norm running statistics) and named child modules.
// Names are dotted paths ("branch.conv1.weight"), which is also how they are
// written in checkpoints. Modules that share weights hold the same Variable
// objects (see share_parameters_from), so one optimizer step updates both.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"

namespace mn::nn {

using ag::Variable;

class Module {
 public:
  virtual ~Module() = default;

  // Single-input forward; modules with other signatures provide their own.
  virtual Variable forward(const Variable& x);
  Variable operator()(const Variable& x) { return forward(x); }

  // Recursive, depth-first in registration order, deduplicated by identity.
  std::vector<std::pair<std::string, Variable>> named_parameters() const;
  std::vector<Variable> parameters() const;
  std::vector<std::pair<std::string, Tensor*>> named_buffers();
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const {
    return children_;
  }

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Moves parameters and buffers (in place: Variables keep their identity).
  void to(Device device);
  void to(DType dtype);
  void zero_grad();
  int64_t num_parameters() const;

 protected:
  Variable& register_parameter(const std::string& name, Tensor init);
  Tensor& register_buffer(const std::string& name, Tensor init);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    children_.emplace_back(name, m);
    return m;
  }
  // Makes this module's parameter `name` the very same Variable as `v` (weight sharing).
  void share_parameter(const std::string& name, const Variable& v);

 private:
  std::vector<std::pair<std::string, Variable>> params_;
  std::vector<std::pair<std::string, std::unique_ptr<Tensor>>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// Runs children in order.
class Sequential : public Module {
 public:
  Sequential() = default;
  template <typename M>
  std::shared_ptr<M> add(const std::string& name, std::shared_ptr<M> m) {
    layers_.push_back(m);
    return register_module(name, std::move(m));
  }
  Variable forward(const Variable& x) override;
  size_t size() const { return layers_.size(); }
  const std::shared_ptr<Module>& at(size_t i) const { return layers_.at(i); }

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

}  // namespace mn::nn
