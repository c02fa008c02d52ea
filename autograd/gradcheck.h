// Float64 gradient checker: central differences against the tape's backward.
//
// The function's output is reduced to L = sum(w * f(x)) with fixed random
// weights w, so every output element is checked. For each element of each
// input, numeric = (L(x + eps) - L(x - eps)) / (2 eps) and the relative error
// |analytic - numeric| / max(|analytic|, |numeric|, 1) must stay <= tol.
// Elements where f is not smooth within eps (a ReLU kink, a hinge at the
// margin, a max-pool argmax flip) are detected by comparing the two one-sided
// differences and skipped; so are elements the caller's `skip` predicate names.
// The check fails if more than max_skip_fraction of the elements were skipped,
// so skipping cannot hide a whole broken gradient.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autograd/variable.h"

namespace mn::ag {

struct GradcheckOptions {
  double eps = 1e-6;
  double tol = 1e-5;  // central differences in float64: truncation ~eps^2, rounding ~1e-16/eps
  bool skip_kinks = true;
  double kink_tol = 1e-3;  // one-sided slopes differing by more than this (relative) = kink
  double max_skip_fraction = 0.5;
  std::function<bool(size_t input, int64_t index)> skip;  // optional extra skips
  std::function<void()> before_forward;  // e.g. re-seed the RNG so dropout masks stay fixed
  uint64_t weight_seed = 1234;
  std::vector<bool> check_input;  // empty = check every input that is floating point
};

struct GradcheckResult {
  bool ok = true;
  double max_error = 0;  // worst relative error
  size_t worst_input = 0;
  int64_t worst_index = -1;
  double worst_analytic = 0, worst_numeric = 0;
  int64_t checked = 0, skipped = 0;
  std::string message;  // human-readable verdict with the worst element
};

// f maps Variables (requires_grad set on the checked inputs) to a Variable.
// Inputs must be float64; they may live on the CPU or a GPU.
GradcheckResult gradcheck(const std::function<Variable(const std::vector<Variable>&)>& f,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& opts = {});

}  // namespace mn::ag
