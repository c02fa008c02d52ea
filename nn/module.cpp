// Module and Sequential (nn/module.h): registration of parameters, buffers and
// children; recursive traversal with dotted names (deduplicated by identity, so
// shared weights appear once, under the name where they were first reached);
// train/eval; in-place device and dtype moves; zero_grad.
#include "nn/module.h"

#include <functional>
#include <unordered_set>

#include "runtime/error.h"

namespace mn::nn {

Variable Module::forward(const Variable&) {
  MN_THROW("Module::forward: this module has no single-input forward; call its own forward");
}

std::vector<std::pair<std::string, Variable>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Variable>> out;
  std::unordered_set<const void*> seen;
  std::unordered_set<const Module*> visited;
  // Depth-first pre-order in registration order: own parameters, then each child.
  std::function<void(const Module&, const std::string&)> visit = [&](const Module& m,
                                                                     const std::string& prefix) {
    if (!visited.insert(&m).second) return;  // a child module registered twice
    for (const auto& [name, v] : m.params_) {
      if (!v.defined()) continue;
      if (!seen.insert(v.id()).second) continue;
      out.emplace_back(prefix + name, v);
    }
    for (const auto& [cname, child] : m.children_) {
      if (child) visit(*child, prefix + cname + ".");
    }
  };
  visit(*this, "");
  return out;
}

std::vector<Variable> Module::parameters() const {
  std::vector<Variable> out;
  for (auto& [n, v] : named_parameters()) out.push_back(v);
  return out;
}

std::vector<std::pair<std::string, Tensor*>> Module::named_buffers() {
  std::vector<std::pair<std::string, Tensor*>> out;
  std::unordered_set<const Tensor*> seen;
  std::unordered_set<const Module*> visited;
  std::function<void(Module&, const std::string&)> visit = [&](Module& m,
                                                               const std::string& prefix) {
    if (!visited.insert(&m).second) return;
    for (auto& [name, b] : m.buffers_) {
      if (!seen.insert(b.get()).second) continue;
      out.emplace_back(prefix + name, b.get());
    }
    for (auto& [cname, child] : m.children_) {
      if (child) visit(*child, prefix + cname + ".");
    }
  };
  visit(*this, "");
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_)
    if (c) c->train(on);
}

void Module::to(Device device) {
  for (auto& [name, v] : named_parameters()) {
    if (v.device() != device) {
      v.set_data(v.data().to(device));
      if (v.has_grad()) v.set_grad(v.grad().to(device));
    }
  }
  for (auto& [name, b] : named_buffers()) {
    if (b->defined() && b->device() != device) *b = b->to(device);
  }
}

void Module::to(DType dtype) {
  MN_CHECK(is_floating(dtype), "Module::to: target dtype must be float32 or float64, got ",
           dtype_name(dtype));
  for (auto& [name, v] : named_parameters()) {
    if (is_floating(v.dtype()) && v.dtype() != dtype) {
      v.set_data(v.data().to(dtype));
      if (v.has_grad()) v.set_grad(v.grad().to(dtype));
    }
  }
  // Integer buffers (counters) keep their dtype.
  for (auto& [name, b] : named_buffers()) {
    if (b->defined() && is_floating(b->dtype()) && b->dtype() != dtype) *b = b->to(dtype);
  }
}

void Module::zero_grad() {
  for (auto& [name, v] : named_parameters()) v.zero_grad();
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& [name, v] : named_parameters()) n += v.numel();
  return n;
}

Variable& Module::register_parameter(const std::string& name, Tensor init) {
  MN_CHECK(!name.empty() && name.find('.') == std::string::npos,
           "Module::register_parameter: bad name '", name, "' (non-empty, no dots)");
  MN_CHECK(init.defined(), "Module::register_parameter: '", name, "' is undefined");
  for (auto& [n, v] : params_)
    MN_CHECK(n != name, "Module::register_parameter: '", name, "' registered twice");
  Variable v(std::move(init), /*requires_grad=*/true);
  v.set_name(name);
  params_.emplace_back(name, std::move(v));
  return params_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor init) {
  MN_CHECK(!name.empty() && name.find('.') == std::string::npos,
           "Module::register_buffer: bad name '", name, "' (non-empty, no dots)");
  for (auto& [n, b] : buffers_)
    MN_CHECK(n != name, "Module::register_buffer: '", name, "' registered twice");
  buffers_.emplace_back(name, std::make_unique<Tensor>(std::move(init)));
  return *buffers_.back().second;
}

void Module::share_parameter(const std::string& name, const Variable& v) {
  MN_CHECK(v.defined(), "Module::share_parameter: '", name, "': source Variable is undefined");
  for (auto& [n, p] : params_) {
    if (n == name) {
      MN_CHECK(!p.defined() || p.shape() == v.shape(), "Module::share_parameter: '", name,
               "' has shape ", shape_str(p.shape()), " but the shared Variable has ",
               shape_str(v.shape()));
      p = v;
      return;
    }
  }
  // Not registered yet: the shared Variable becomes this module's parameter.
  params_.emplace_back(name, v);
}

Variable Sequential::forward(const Variable& x) {
  Variable h = x;
  for (auto& l : layers_) h = l->forward(h);
  return h;
}

}  // namespace mn::nn
