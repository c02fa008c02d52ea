// Differentiable primitives on Variables (namespace mn::ag): the building blocks
// every layer and loss is composed from. Each op computes its value with the
// kernels in kernels/ (CPU or CUDA, float32/float64, following its inputs) and,
// when an input requires grad, records a tape Node whose closure saves only what
// the backward needs (see autograd/variable.h).
//
//   using namespace mn::ag;
//   Variable x(Tensor::randn..., /*requires_grad=*/true), w(...);
//   Variable d = sum(square(x - w), {1});          // (N, D) -> (N)
//   Variable loss = mean(clamp(d - 0.2, 0.0, 1e30));
//   loss.backward();                               // x.grad(), w.grad()
//
// Conventions: binary ops broadcast like NumPy and their gradients are summed
// back to each operand's shape; reductions take a list of dims (empty = all
// elements; negative dims count from the end) and a keepdim flag; view ops
// share storage with their input; argmax/argmin and index tensors are plain
// (non-differentiable) Tensors. At a kink the gradient is a subgradient:
// abs'(0) = 0, clamp passes the gradient at the bounds, maximum/minimum split it
// half/half on ties, max/min over a dim send it to the first extreme element.
#pragma once
#include <cstdint>
#include <vector>

#include "autograd/variable.h"

namespace mn::ag {

// ---- unary --------------------------------------------------------------------
Variable neg(const Variable& x);
Variable exp(const Variable& x);
Variable log(const Variable& x);
Variable sqrt(const Variable& x);  // d/dx = 0.5 / sqrt(x): infinite at 0 (add an epsilon first)
Variable abs(const Variable& x);
Variable square(const Variable& x);
Variable pow(const Variable& x, double exponent);
Variable clamp(const Variable& x, double lo, double hi);
Variable sigmoid(const Variable& x);
Variable tanh(const Variable& x);

// ---- binary (broadcasting) and scalar forms ----------------------------------------
Variable add(const Variable& a, const Variable& b);
Variable sub(const Variable& a, const Variable& b);
Variable mul(const Variable& a, const Variable& b);
Variable div(const Variable& a, const Variable& b);
Variable maximum(const Variable& a, const Variable& b);
Variable minimum(const Variable& a, const Variable& b);
Variable add(const Variable& a, double s);
Variable sub(const Variable& a, double s);
Variable mul(const Variable& a, double s);
Variable div(const Variable& a, double s);
Variable maximum(const Variable& a, double s);
Variable minimum(const Variable& a, double s);
Variable add(double s, const Variable& b);
Variable sub(double s, const Variable& b);
Variable mul(double s, const Variable& b);
Variable div(double s, const Variable& b);
Variable maximum(double s, const Variable& b);
Variable minimum(double s, const Variable& b);

inline Variable operator-(const Variable& x) { return neg(x); }
inline Variable operator+(const Variable& a, const Variable& b) { return add(a, b); }
inline Variable operator-(const Variable& a, const Variable& b) { return sub(a, b); }
inline Variable operator*(const Variable& a, const Variable& b) { return mul(a, b); }
inline Variable operator/(const Variable& a, const Variable& b) { return div(a, b); }
inline Variable operator+(const Variable& a, double s) { return add(a, s); }
inline Variable operator-(const Variable& a, double s) { return sub(a, s); }
inline Variable operator*(const Variable& a, double s) { return mul(a, s); }
inline Variable operator/(const Variable& a, double s) { return div(a, s); }
inline Variable operator+(double s, const Variable& b) { return add(s, b); }
inline Variable operator-(double s, const Variable& b) { return sub(s, b); }
inline Variable operator*(double s, const Variable& b) { return mul(s, b); }
inline Variable operator/(double s, const Variable& b) { return div(s, b); }

// ---- reductions -----------------------------------------------------------------
Variable sum(const Variable& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Variable mean(const Variable& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// Divisor N - 1 (unbiased) or N; composed of mean, sub, square, sum.
Variable var(const Variable& x, const std::vector<int64_t>& dims = {}, bool unbiased = true,
             bool keepdim = false);
// Values of the max/min along dim (gradient to the first extreme element).
Variable max(const Variable& x, int64_t dim, bool keepdim = false);
Variable min(const Variable& x, int64_t dim, bool keepdim = false);
// Over all elements: a 0-d Variable.
Variable max(const Variable& x);
Variable min(const Variable& x);
// int64 indices (first extreme element); not differentiable.
Tensor argmax(const Variable& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Variable& x, int64_t dim, bool keepdim = false);

// ---- indexing (index tensors: int32/int64; masks: uint8) ----------------------------
// Slices of x along dim picked by the 1-D idx (repeats allowed; gradients add up).
Variable index_select(const Variable& x, int64_t dim, const Tensor& idx);
// out[i][j] = x[i][idx[i][j]] for dim = 1 (see kernels/indexing.h).
Variable gather(const Variable& x, int64_t dim, const Tensor& idx);
// self with src added at idx along dim: out[i][idx[i][j]] += src[i][j] for dim = 1.
Variable scatter_add(const Variable& self, int64_t dim, const Tensor& idx, const Variable& src);
// cond ? a : b with broadcasting (no gradient to cond).
Variable where(const Tensor& cond, const Variable& a, const Variable& b);
// 1-D: the elements of x where mask is nonzero (x and mask broadcast together).
Variable masked_select(const Variable& x, const Tensor& mask);

// ---- joining ------------------------------------------------------------------------
Variable concat(const std::vector<Variable>& xs, int64_t dim);
std::vector<Variable> split(const Variable& x, const std::vector<int64_t>& sizes, int64_t dim);
Variable stack(const std::vector<Variable>& xs, int64_t dim);

// ---- views (share storage with the input; backward maps the gradient back) ------
Variable reshape(const Variable& x, const Shape& shape);  // copies when not viewable
Variable view(const Variable& x, const Shape& shape);     // throws when not viewable
Variable transpose(const Variable& x, int64_t d0, int64_t d1);
Variable permute(const Variable& x, const std::vector<int64_t>& order);
Variable narrow(const Variable& x, int64_t dim, int64_t start, int64_t length);
Variable slice(const Variable& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Variable select(const Variable& x, int64_t dim, int64_t index);
Variable unsqueeze(const Variable& x, int64_t dim);
Variable squeeze(const Variable& x, int64_t dim);
Variable expand(const Variable& x, const Shape& shape);  // gradient summed over broadcast dims
Variable flatten(const Variable& x, int64_t start_dim = 0, int64_t end_dim = -1);
Variable contiguous(const Variable& x);

}  // namespace mn::ag
