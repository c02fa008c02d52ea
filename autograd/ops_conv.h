// Differentiable convolution, pooling, linear and flatten ops on the tape.
// Each records one node whose closure saves only what its backward reads:
//   conv2d      input (for dW) and weight (for dX), each only when the other side
//               needs a gradient; bias needs nothing saved.
//   max_pool2d  the int32 argmax (not the input).
//   conv2d_relu_max_pool2d  the convolution's input and weight (as conv2d), the pooled
//               output and the argmax (not the full-size ReLU output).
//   prelu_max_pool2d  the input, the slope and the argmax.
//   avg_pool2d  nothing but shapes.
//   linear      input and weight, as for conv2d.
#pragma once
#include "autograd/variable.h"
#include "kernels/conv2d.h"
#include "kernels/pool.h"
#include "kernels/prelu_pool.h"

namespace mn::ag {

// x (N, C, H, W), w (K, C, R, S), b (K) or an undefined Variable -> (N, K, P, Q).
// With p.relu, relu(conv2d) as one node (kernels/conv2d.h: fused on CUDA's tensor-core
// path); it saves its output for ReLU's gradient.
Variable conv2d(const Variable& x, const Variable& w, const Variable& b,
                const kernels::Conv2dParams& p = {});
// (N, C, H, W) -> (N, C, P, Q).
Variable max_pool2d(const Variable& x, const kernels::Pool2dParams& p);
Variable avg_pool2d(const Variable& x, const kernels::Pool2dParams& p);
// max_pool2d(prelu(x, a), p) as one node (kernels/prelu_pool.h): the same values
// and gradients without the full-size PReLU activation. Gradients for x and a.
Variable prelu_max_pool2d(const Variable& x, const Variable& a, const kernels::Pool2dParams& p);
// max_pool2d(relu(conv2d(x, w, b, p)), pool) as one node (p.relu is implied): the same
// values and gradients, bit for bit, as conv2d with p.relu then max_pool2d (on CUDA the
// ReLU runs in the convolution's epilogue as there). Its backward runs ReLU's backward
// inside the max-pool backward (kernels::max_pool2d_relu_backward) instead of a pass over
// the full-size activation, then the convolution's. Koch's branch (nn/models/koch.cpp).
Variable conv2d_relu_max_pool2d(const Variable& x, const Variable& w, const Variable& b,
                                const kernels::Conv2dParams& p, const kernels::Pool2dParams& pool);
// x (N, in), w (out, in), b (out) or undefined -> (N, out) = x W^T + b.
Variable linear(const Variable& x, const Variable& w, const Variable& b);
// (N, d1, d2, ...) -> (N, d1*d2*...): a view when x is contiguous.
Variable flatten_batch(const Variable& x);

}  // namespace mn::ag
