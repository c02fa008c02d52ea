// The reverse-mode tape. A Variable wraps a Tensor value, an optional gradient,
// and — when it was produced by a recorded op — the Node that produced it.
//
// A Node holds the op's input Variables (the edges of the graph) and a backward
// closure that captures only the tensors its backward needs. backward() walks
// the graph in reverse topological order, calls each closure once with the
// summed gradient of its output, and ACCUMULATES the results into the leaves'
// grad() (a leaf is a Variable with requires_grad and no Node). Gradients keep
// accumulating across backward calls until zero_grad(). Unless retain_graph is
// set, every visited Node's closure (and so its saved tensors) is released after
// use, and a second backward through it throws.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace mn::ag {

struct Node;

class Variable {
 public:
  Variable() = default;
  explicit Variable(Tensor data, bool requires_grad = false);

  bool defined() const { return impl_ != nullptr; }
  const Tensor& data() const;
  // Replaces the value in place (keeps identity: optimizers and modules that
  // hold this Variable see the new tensor). Shape may change (e.g. .to(device)).
  void set_data(Tensor t);

  // Gradient accumulated by backward(); undefined until a backward reached it.
  const Tensor& grad() const;
  bool has_grad() const;
  void set_grad(Tensor g);
  // Zeroes an existing gradient in place (keeps the buffer); no-op when undefined.
  void zero_grad();
  // Drops the gradient buffer.
  void clear_grad();

  bool requires_grad() const;
  void set_requires_grad(bool r);
  bool is_leaf() const;
  const std::shared_ptr<Node>& grad_fn() const;

  // d(this)/d(leaves) for a one-element Variable (seed gradient 1).
  void backward(bool retain_graph = false) const;
  // With an explicit gradient of the same shape as data().
  void backward(const Tensor& grad_output, bool retain_graph = false) const;

  // Same value, cut from the graph, requires_grad false.
  Variable detach() const;

  const Shape& shape() const { return data().shape(); }
  int64_t size(int64_t d) const { return data().size(d); }
  int64_t dim() const { return data().dim(); }
  int64_t numel() const { return data().numel(); }
  DType dtype() const { return data().dtype(); }
  Device device() const { return data().device(); }

  const std::string& name() const;
  void set_name(const std::string& n);

  // Identity (two Variables are the same graph vertex).
  bool is_same(const Variable& o) const { return impl_ == o.impl_; }
  const void* id() const { return impl_.get(); }

 private:
  struct Impl {
    Tensor data;
    Tensor grad;
    bool requires_grad = false;
    std::shared_ptr<Node> grad_fn;
    std::string name;
  };
  std::shared_ptr<Impl> impl_;
  friend Variable make_variable(Tensor, std::vector<Variable>,
                                std::function<std::vector<Tensor>(const Tensor&)>, const char*);
  friend struct Engine;
};

// Maps dL/d(output) to one gradient per input, in input order. Return an
// undefined Tensor for an input that gets no gradient. Each returned gradient
// must have its input's shape (reduce broadcasts before returning).
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

struct Node {
  std::string op;                 // op name, for error messages
  std::vector<Variable> inputs;   // edges
  BackwardFn backward;            // empty once released
  bool released = false;
};

// Wraps an op's output. When grad mode is on and any input requires grad, the
// result requires grad and records a Node with `backward`; otherwise the
// closure is dropped at once (nothing is saved).
Variable make_variable(Tensor output, std::vector<Variable> inputs, BackwardFn backward,
                       const char* op_name);

// True when any input is defined and requires grad and grad mode is on: an op
// can skip computing what only the backward needs when this is false.
bool any_requires_grad(const std::vector<Variable>& inputs);

// Called by backward() once for each leaf (requires_grad, no Node) as soon as its
// gradient of this backward pass is complete: every Node that takes it as an input
// has run (leaves with no path from the root are not reported). A data-parallel
// reducer starts its all-reduce from here while the rest of the backward runs.
// Installed for a scope on the calling thread; nested scopes restore the outer
// hook. No hook (the default) costs nothing and changes no value.
using LeafGradHook = std::function<void(const Variable& leaf)>;
class LeafGradHookScope {
 public:
  explicit LeafGradHookScope(LeafGradHook hook);
  ~LeafGradHookScope();
  LeafGradHookScope(const LeafGradHookScope&) = delete;
  LeafGradHookScope& operator=(const LeafGradHookScope&) = delete;

 private:
  LeafGradHook prev_;
};

bool grad_mode_enabled();
// RAII scope in which no op records a Node (evaluation, optimizer steps).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace mn::ag
