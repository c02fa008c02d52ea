// PReLU followed by 2-D max pooling as one op, CPU and CUDA, float and double:
//
//   y = max_pool2d(prelu(x, a), p),
//
// exactly the values, argmax and gradients of kernels/prelu.h then
// kernels/pool.h (ties keep the first maximum of the PReLU outputs in row-major
// window order, a NaN wins, the argmax is h*W + w in the input plane). The
// slope is one per channel (a of size C) or shared (size 1).
//
// Why fused: the sampling study's net runs conv -> PReLU -> 2x2 max-pool twice.
// Separately, the PReLU forward writes a full-size activation that only the
// pool reads, and its backward reads x and a full-size, three-quarters-zero
// gradient to write another: on the CPU those passes over 19 MB (batch 256,
// 32 x 24 x 24) took 11 % of the training step and the pool 7 % (perf,
// 2026-11-27). Here the forward reads x once and writes the pooled output; the
// backward touches only the argmax elements (and zero-fills dx).
//
// Backward: gx = scatter of gy to the argmax elements (summed over windows that
// picked the same element), times (x > 0 ? 1 : a_c); ga_c = sum of that
// scattered gradient times x over elements with x <= 0. The values of gx are
// bit-identical to the unfused ops; ga sums the same terms in another fixed
// order (per (n, c) plane in output order, then n ascending, then channels for a
// shared slope), so it matches them to rounding and never depends on the
// thread count.
//
// CUDA: the two existing kernels run one after the other (prelu_forward_cuda,
// max_pool2d_forward_cuda; backward max_pool2d_backward_cuda, prelu_backward_cuda),
// with the intermediate in device memory: the same results as the unfused ops
// on the GPU, no speed-up there (not yet measured on a GPU).
#pragma once
#include <cstdint>
#include <utility>

#include "kernels/pool.h"
#include "runtime/tensor.h"

namespace mn::kernels {

// ---- CPU (contiguous buffers) ------------------------------------------------
// x (N, C, H, W); a (na), na == 1 or C; y, argmax (N, C, P, Q).
template <typename T>
void prelu_max_pool2d_forward_cpu(const Pool2dGeom& g, const T* x, const T* a, int64_t na, T* y,
                                  int32_t* argmax);
// gx (N, C, H, W) overwritten; ga (na) overwritten.
template <typename T>
void prelu_max_pool2d_backward_cpu(const Pool2dGeom& g, const T* x, const T* a, int64_t na,
                                   const T* gy, const int32_t* argmax, T* gx, T* ga);

// ---- Tensor level --------------------------------------------------------------
// x (N, C, H, W) floating; a (1) or (C), same dtype and device. Returns
// (y (N, C, P, Q), argmax (N, C, P, Q) int32).
std::pair<Tensor, Tensor> prelu_max_pool2d_forward(const Tensor& x, const Tensor& a,
                                                   const Pool2dParams& p);
// Returns (gx like x, ga like a).
std::pair<Tensor, Tensor> prelu_max_pool2d_backward(const Tensor& x, const Tensor& a,
                                                    const Tensor& gy, const Tensor& argmax,
                                                    const Pool2dParams& p);

}  // namespace mn::kernels
