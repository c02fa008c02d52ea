// PReLU (He et al. 2015, "Delving deep into rectifiers"), CPU and CUDA, float and double:
//
//   y = x            for x > 0
//   y = a_c * x      otherwise,
//
// with one learnable slope per channel (a of size C, the channel being dim 1 of
// x) or one slope shared by all channels (a of size 1), as PyTorch's nn.PReLU.
// At x = 0 the negative branch is taken (y = 0 either way; dy/dx = a_c there,
// as PyTorch).
//
// Layout: x is read as (N, C, S), S the product of the dims after 1 (S = 1 for
// (N, C) input). Element i belongs to channel (i / S) % C.
// Backward: gx = gy * (x > 0 ? 1 : a_c);
//           ga_c = sum over n, s with x <= 0 of gy * x  (per channel; a shared
//           slope gets the sum over the channels in channel order).
// The slope gradient is reduced in a fixed order on each device (CPU: per
// channel, n then s ascending; CUDA: one block per channel, a fixed tree), so a
// device's result never depends on the thread count or on timing.
#pragma once
#include <cstdint>
#include <utility>

#include "runtime/tensor.h"

namespace mn::kernels {

// a: (na) with na == 1 or na == C.
template <typename T>
void prelu_forward_cpu(int64_t N, int64_t C, int64_t S, const T* x, const T* a, int64_t na, T* y);
// gx: like x (overwritten); ga: (na) (overwritten).
template <typename T>
void prelu_backward_cpu(int64_t N, int64_t C, int64_t S, const T* x, const T* a, int64_t na, const T* gy, T* gx,
                        T* ga);
#ifdef MN_WITH_CUDA
template <typename T>
void prelu_forward_cuda(int64_t N, int64_t C, int64_t S, const T* x, const T* a, int64_t na, T* y);
template <typename T>
void prelu_backward_cuda(int64_t N, int64_t C, int64_t S, const T* x, const T* a, int64_t na, const T* gy, T* gx,
                         T* ga);
#endif

// x: (N, C, ...) or (N, C) (a 1-D x counts as (N, 1)); a: (1) or (C), same dtype and device.
Tensor prelu_forward(const Tensor& x, const Tensor& a);
// (gx, ga)
std::pair<Tensor, Tensor> prelu_backward(const Tensor& x, const Tensor& a, const Tensor& gy);

}  // namespace mn::kernels
