// The tape's engine: Variable bookkeeping, node recording and backward().
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "autograd/variable.h"
#include "kernels/accumulate.h"

namespace mn::ag {

namespace {
thread_local bool t_grad_enabled = true;
const Tensor kUndefined;
const std::shared_ptr<Node> kNoNode;
const std::string kNoName;
}  // namespace

thread_local LeafGradHook t_leaf_hook;

LeafGradHookScope::LeafGradHookScope(LeafGradHook hook) : prev_(std::move(t_leaf_hook)) {
  t_leaf_hook = std::move(hook);
}
LeafGradHookScope::~LeafGradHookScope() { t_leaf_hook = std::move(prev_); }

bool grad_mode_enabled() { return t_grad_enabled; }
NoGradGuard::NoGradGuard() : prev_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = prev_; }

// ------------------------------------------------------------- Variable ---
Variable::Variable(Tensor data, bool requires_grad) : impl_(std::make_shared<Impl>()) {
  impl_->data = std::move(data);
  if (requires_grad) set_requires_grad(true);
}

const Tensor& Variable::data() const {
  MN_CHECK(impl_, "Variable::data: undefined Variable");
  return impl_->data;
}
void Variable::set_data(Tensor t) {
  MN_CHECK(impl_, "Variable::set_data: undefined Variable");
  impl_->data = std::move(t);
}
const Tensor& Variable::grad() const { return impl_ ? impl_->grad : kUndefined; }
bool Variable::has_grad() const { return impl_ && impl_->grad.defined(); }
void Variable::set_grad(Tensor g) {
  MN_CHECK(impl_, "Variable::set_grad: undefined Variable");
  if (g.defined()) check_same_shape("Variable::set_grad", impl_->data, g);
  impl_->grad = std::move(g);
}
void Variable::zero_grad() {
  if (has_grad()) impl_->grad.zero_();
}
void Variable::clear_grad() {
  if (impl_) impl_->grad = Tensor();
}
bool Variable::requires_grad() const { return impl_ && impl_->requires_grad; }
void Variable::set_requires_grad(bool r) {
  MN_CHECK(impl_, "Variable::set_requires_grad: undefined Variable");
  if (r) check_floating("Variable::set_requires_grad", impl_->data);
  impl_->requires_grad = r;
}
bool Variable::is_leaf() const { return !impl_ || !impl_->grad_fn; }
const std::shared_ptr<Node>& Variable::grad_fn() const { return impl_ ? impl_->grad_fn : kNoNode; }
const std::string& Variable::name() const { return impl_ ? impl_->name : kNoName; }
void Variable::set_name(const std::string& n) {
  MN_CHECK(impl_, "Variable::set_name: undefined Variable");
  impl_->name = n;
}
Variable Variable::detach() const { return Variable(data(), false); }

// ----------------------------------------------------------- recording ---
bool any_requires_grad(const std::vector<Variable>& inputs) {
  if (!t_grad_enabled) return false;
  for (const auto& v : inputs)
    if (v.defined() && v.requires_grad()) return true;
  return false;
}

Variable make_variable(Tensor output, std::vector<Variable> inputs, BackwardFn backward,
                       const char* op_name) {
  Variable out(std::move(output), false);
  if (!any_requires_grad(inputs)) return out;  // closure and its saved tensors dropped here
  auto node = std::make_shared<Node>();
  node->op = op_name;
  node->inputs = std::move(inputs);
  node->backward = std::move(backward);
  out.impl_->requires_grad = true;
  out.impl_->grad_fn = std::move(node);
  return out;
}

// --------------------------------------------------------------- engine ---
struct Engine {
  // A gradient buffer; `owned` is false while it may alias a tensor that an op
  // returned (e.g. add's backward hands the same tensor to both inputs), so the
  // first in-place accumulation copies it first.
  struct Slot {
    Tensor t;
    bool owned = false;
  };

  static void accumulate(Slot& slot, const Tensor& g, const char* op) {
    if (!slot.t.defined()) {
      slot.t = g.contiguous();
      slot.owned = false;
      return;
    }
    MN_CHECK(slot.t.shape() == g.shape(), "backward: gradient of shape ", shape_str(g.shape()),
             " from op '", op, "' does not match ", shape_str(slot.t.shape()));
    if (!slot.owned) {
      slot.t = slot.t.clone();
      slot.owned = true;
    }
    kernels::axpy_(slot.t, g, 1.0);
  }

  // Leaf gradients persist across backward calls, so they always own their buffer.
  static void accumulate_leaf(Tensor& grad, const Tensor& g) {
    if (!grad.defined()) grad = g.clone();
    else kernels::axpy_(grad, g, 1.0);
  }

  static void run(const Variable& root, const Tensor& grad_output, bool retain_graph) {
    MN_CHECK(root.defined(), "backward: undefined Variable");
    MN_CHECK(root.requires_grad(), "backward: the Variable does not require grad (no op with a "
             "requires_grad input produced it)");
    check_same_shape("backward (grad_output vs output)", root.data(), grad_output);
    check_same_dtype("backward (grad_output vs output)", root.data(), grad_output);
    check_same_device("backward (grad_output vs output)", root.data(), grad_output);

    using ImplPtr = Variable::Impl*;
    // Topological order over the non-leaf Variables (iterative DFS).
    std::vector<ImplPtr> order;
    std::unordered_set<ImplPtr> visited;
    std::unordered_map<ImplPtr, Variable> keep;  // keeps impls alive while we walk
    std::vector<std::pair<Variable, size_t>> stack;
    stack.emplace_back(root, 0);
    visited.insert(root.impl_.get());
    while (!stack.empty()) {
      auto& [v, next] = stack.back();
      Node* node = v.impl_->grad_fn.get();
      if (node && next < node->inputs.size()) {
        const Variable& in = node->inputs[next++];
        if (in.defined() && in.impl_->grad_fn && !visited.count(in.impl_.get())) {
          visited.insert(in.impl_.get());
          stack.emplace_back(in, 0);
        }
        continue;
      }
      order.push_back(v.impl_.get());
      keep.emplace(v.impl_.get(), v);
      stack.pop_back();
    }

    // With a leaf hook: how many Nodes still have to run before each leaf's gradient is complete.
    std::unordered_map<ImplPtr, int> leaf_uses;
    if (t_leaf_hook)
      for (ImplPtr impl : order)
        if (impl->grad_fn)
          for (const Variable& in : impl->grad_fn->inputs)
            if (in.defined() && in.requires_grad() && !in.impl_->grad_fn) ++leaf_uses[in.impl_.get()];
    auto node_done = [&](Node* node) {
      if (!t_leaf_hook || !node) return;
      for (const Variable& in : node->inputs) {
        auto u = in.defined() ? leaf_uses.find(in.impl_.get()) : leaf_uses.end();
        if (u != leaf_uses.end() && --u->second == 0) t_leaf_hook(in);
      }
    };

    std::unordered_map<ImplPtr, Slot> grads;  // gradients of non-leaf Variables
    grads[root.impl_.get()] = Slot{grad_output, false};
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      ImplPtr impl = *it;
      auto git = grads.find(impl);
      if (git == grads.end()) {  // no gradient flowed here
        node_done(impl->grad_fn.get());
        continue;
      }
      Tensor g = std::move(git->second.t);
      grads.erase(git);
      Node* node = impl->grad_fn.get();
      MN_CHECK(!node->released, "backward: the graph through op '", node->op,
               "' was already released by an earlier backward; pass retain_graph=true to "
               "backward twice");
      std::vector<Tensor> in_grads = node->backward(g);
      MN_CHECK(in_grads.size() == node->inputs.size(), "backward: op '", node->op, "' returned ",
               in_grads.size(), " gradients for ", node->inputs.size(), " inputs");
      for (size_t i = 0; i < in_grads.size(); ++i) {
        const Variable& in = node->inputs[i];
        const Tensor& gi = in_grads[i];
        if (!gi.defined() || !in.defined() || !in.requires_grad()) continue;
        MN_CHECK(gi.shape() == in.data().shape(), "backward: op '", node->op, "' returned a ",
                 shape_str(gi.shape()), " gradient for input ", i, " of shape ",
                 shape_str(in.data().shape()));
        if (in.impl_->grad_fn) {
          accumulate(grads[in.impl_.get()], gi, node->op.c_str());
        } else {
          accumulate_leaf(in.impl_->grad, gi);
        }
      }
      if (!retain_graph) {
        node->backward = nullptr;  // frees the saved tensors
        node->released = true;
      }
      node_done(node);
    }
  }
};

void Variable::backward(bool retain_graph) const {
  MN_CHECK(impl_ && impl_->data.numel() == 1, "backward: implicit gradient needs a one-element "
           "output, got ", impl_ ? impl_->data.desc() : std::string("(undefined)"));
  Engine::run(*this, Tensor::ones(impl_->data.shape(), impl_->data.dtype(), impl_->data.device()),
              retain_graph);
}

void Variable::backward(const Tensor& grad_output, bool retain_graph) const {
  Engine::run(*this, grad_output, retain_graph);
}

}  // namespace mn::ag
