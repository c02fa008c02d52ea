// Differentiable normalisation, dropout, activation and distance ops on the tape.
// Each records one node whose closure keeps only what its backward reads:
//   lrn                 x, y and the saved scale (N, C, H, W)
//   batch_norm          x, the per-channel mean and invstd, gamma
//   dropout             the uint8 mask (the (seed, offset) it came from is not needed)
//   relu/elu/selu/softplus  x;   sigmoid_act/tanh_act  y
//   abs_diff, l1/l2_distance  a, b (and the output for plain L2)
//   pairwise_distance   a, b, the output and the squared row norms
// Formulas and zero-distance conventions: kernels/{lrn,batchnorm,dropout,activation,distance}.h.
// Backward closures return fresh gradients; the engine accumulates them into .grad.
#pragma once
#include "autograd/variable.h"
#include "kernels/activation.h"
#include "kernels/distance.h"
#include "kernels/lrn.h"
#include "runtime/rng.h"

namespace mn::ag {

// (N, C, H, W) -> same. Default options: Krizhevsky / Omniglot eq. 10 convention.
Variable lrn(const Variable& x, const kernels::LrnOptions& o = {});

// x (N, C, ...) ; gamma, beta (C) or undefined Variables (affine = false);
// running_mean / running_var (C) updated in place in training mode (may be
// undefined tensors in training mode, required in evaluation mode).
Variable batch_norm(const Variable& x, const Variable& gamma, const Variable& beta,
                    Tensor running_mean, Tensor running_var, bool training,
                    double momentum = 0.1, double eps = 1e-5);

// Inverted dropout with rate p; identity (the same Variable) when !training or p == 0.
// Draws ceil(numel / 4) Philox blocks from `gen` (default: the global generator).
Variable dropout(const Variable& x, double p, bool training, Generator& gen);
Variable dropout(const Variable& x, double p, bool training = true);

Variable relu(const Variable& x);
Variable elu(const Variable& x, double alpha = 1.0);
Variable selu(const Variable& x);
Variable softplus(const Variable& x, double beta = 1.0, double threshold = 20.0);
// Single-kernel sigmoid and tanh (autograd/ops.h has composite-free ones too;
// these exist so the activation modules depend on this file only).
Variable sigmoid_act(const Variable& x);
Variable tanh_act(const Variable& x);
// Any activation by kind.
Variable activation(const Variable& x, kernels::Act a, const kernels::ActParams& p = {});
// PReLU with a learnable slope `a` of 1 element or one per channel (dim 1 of x);
// kernels/prelu.h. Gradients for x and a.
Variable prelu(const Variable& x, const Variable& a);

// Elementwise |a - b| (same shapes).
Variable abs_diff(const Variable& a, const Variable& b);
// (N, D), (N, D) -> (N).
Variable l1_distance(const Variable& a, const Variable& b);
// Squared or plain; plain has a zero subgradient where d <= 1e-12.
Variable l2_distance(const Variable& a, const Variable& b, bool squared = false);
// (M, D), (N, D) -> (M, N); metric L1, L2Squared (SqEuclidean), L2 (Euclidean) or
// Cosine. pairwise_distance(x, x, m) is the self case of kernels/distance.h.
Variable pairwise_distance(const Variable& a, const Variable& b, kernels::Pairwise metric);

}  // namespace mn::ag
