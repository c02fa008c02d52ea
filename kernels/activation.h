// Pointwise activations: ReLU, ELU(alpha), SELU, softplus(beta, threshold),
// sigmoid and tanh, forward and backward, CPU and CUDA.
//
// The scalar formulas live here as __host__ __device__ functions so that the
// CPU loop and the CUDA kernel evaluate exactly the same expression.
//
// Backward inputs: ReLU, ELU, SELU and softplus read the forward INPUT x;
// sigmoid and tanh read the forward OUTPUT y (their derivative is a function of
// it), so an autograd node saves just one tensor either way.
//
//   relu(x)      = max(x, 0)                       d/dx = [x > 0] (0 at the kink)
//   elu(x)       = x > 0 ? x : alpha (e^x - 1)     d/dx = x > 0 ? 1 : alpha e^x
//   selu(x)      = lambda * elu_alpha(x) with the standard constants below
//   softplus(x)  = 1/beta log(1 + e^{beta x}), and x itself where beta x > threshold
//                  (PyTorch's convention)           d/dx = sigmoid(beta x) (1 above threshold)
//   sigmoid(x)   = 1 / (1 + e^-x)                  d/dx = y (1 - y)
//   tanh(x)                                        d/dx = 1 - y^2
#pragma once
#include <cmath>
#include <cstdint>

#include "runtime/strided.h"  // MN_HD
#include "runtime/tensor.h"

namespace mn::kernels {

enum class Act : int { ReLU = 0, ELU, SELU, Softplus, Sigmoid, Tanh };
const char* act_name(Act a);
// True when the backward reads the forward output y instead of the input x.
inline bool act_backward_uses_output(Act a) { return a == Act::Sigmoid || a == Act::Tanh; }

struct ActParams {
  double alpha = 1.0;       // ELU alpha
  double beta = 1.0;        // softplus beta
  double threshold = 20.0;  // softplus: linear where beta * x > threshold
};

constexpr double kSeluLambda = 1.0507009873554804934193349852946;
constexpr double kSeluAlpha = 1.6732632423543772848170429916717;

namespace act_math {
template <typename T>
MN_HD T forward(Act a, T x, T alpha, T beta, T threshold) {
  using std::exp; using std::expm1; using std::log1p; using std::tanh;  // float overloads on the host
  switch (a) {
    case Act::ReLU: return x > T(0) ? x : T(0);
    case Act::ELU: return x > T(0) ? x : alpha * expm1(x);
    case Act::SELU:
      return x > T(0) ? T(kSeluLambda) * x : T(kSeluLambda) * T(kSeluAlpha) * expm1(x);
    case Act::Softplus: return beta * x > threshold ? x : log1p(exp(beta * x)) / beta;
    case Act::Sigmoid: return T(1) / (T(1) + exp(-x));
    case Act::Tanh: return tanh(x);
  }
  return x;
}
// s is x (ReLU/ELU/SELU/softplus) or y (sigmoid/tanh); returns dy/dx * g.
template <typename T>
MN_HD T backward(Act a, T s, T g, T alpha, T beta, T threshold) {
  using std::exp;
  switch (a) {
    case Act::ReLU: return s > T(0) ? g : T(0);
    case Act::ELU: return s > T(0) ? g : g * alpha * exp(s);
    case Act::SELU:
      return s > T(0) ? g * T(kSeluLambda) : g * T(kSeluLambda) * T(kSeluAlpha) * exp(s);
    case Act::Softplus: {
      T z = beta * s;
      return z > threshold ? g : g / (T(1) + exp(-z));
    }
    case Act::Sigmoid: return g * s * (T(1) - s);
    case Act::Tanh: return g * (T(1) - s * s);
  }
  return g;
}
}  // namespace act_math

// x, y: (n) contiguous.
template <typename T>
void activation_forward_cpu(Act a, const ActParams& p, int64_t n, const T* x, T* y);
// s: (n) forward input or output (see above); gy, gx: (n). gx is overwritten.
template <typename T>
void activation_backward_cpu(Act a, const ActParams& p, int64_t n, const T* s, const T* gy, T* gx);

#ifdef MN_WITH_CUDA
template <typename T>
void activation_forward_cuda(Act a, const ActParams& p, int64_t n, const T* x, T* y);
template <typename T>
void activation_backward_cuda(Act a, const ActParams& p, int64_t n, const T* s, const T* gy, T* gx);
#endif

// Tensor level (any shape; returns new contiguous tensors).
Tensor activation_forward(Act a, const Tensor& x, const ActParams& p = {});
// `saved` is x or y as act_backward_uses_output(a) says; same shape as gy.
Tensor activation_backward(Act a, const Tensor& saved, const Tensor& gy, const ActParams& p = {});

}  // namespace mn::kernels
