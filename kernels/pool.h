// 2-D max pooling and average pooling over (N, C, H, W), CPU and CUDA.
//
// Window (kh, kw), stride (sh, sw) (0 = the kernel size, the usual default) and
// zero padding (ph, pw) with ph <= kh/2, pw <= kw/2 so every window holds at
// least one real input element. Output size (floor mode, no ceil_mode):
//   P = (H + 2*ph - kh) / sh + 1,   Q likewise.
//
// Max pool: padding acts as -infinity; ties keep the first maximum in row-major
// window order; a NaN in a window wins (propagates, as in PyTorch). The forward
// writes, per output, the argmax as an int32 index h*W + w into its (n, c) input
// plane; the backward routes dy to exactly that element (sum over windows that
// picked it). CUDA backward (kernels/pool_index.h): for windows that do not overlap
// (stride >= kernel) one thread per output writes its window and the uncovered input
// up to the next window (dy at the argmax, 0 elsewhere; MN_POOL_SCATTER=0 turns it off),
// otherwise one thread per input element gathers; both deterministic, no atomics, no
// fill, the same bits as the CPU.
//
// ReLU's backward fused into the max-pool backward (max_pool2d_relu_backward): for
// y = max_pool2d(r) with r = relu(z) (Koch: conv with the ReLU in its epilogue, then
// the pool), dL/dz = dy at the argmax where the pooled value y > 0, and 0 elsewhere,
// in one pass: the same bits as max_pool2d_backward then ReLU's backward on r
// (kernels/activation.h: r > 0 ? g : 0), because every output that picked an element
// pooled that element's value (so y > 0 there exactly when r > 0; a NaN y counts as
// not > 0, as ReLU's backward treats a NaN r). It also applies to relu(max_pool2d(z))
// with y the pooled z.
//
// Average pool: count_include_pad = true divides by kh*kw (padding counts as
// zeros: PyTorch's and Caffe's default); false divides by the number of real
// input elements under the window.
#pragma once
#include <cstdint>
#include <utility>

#include "runtime/tensor.h"

namespace mn::kernels {

struct Pool2dParams {
  int64_t kernel_h = 2, kernel_w = 2;
  int64_t stride_h = 0, stride_w = 0;  // 0 = kernel size
  int64_t pad_h = 0, pad_w = 0;
  bool count_include_pad = true;  // average pool only
};

struct Pool2dGeom {
  int64_t N, C, H, W;  // input  (N, C, H, W)
  int64_t P, Q;        // output (N, C, P, Q)
  int64_t kh, kw, sh, sw, ph, pw;
};

// Checks the input shape and parameters (errors name the op and shape).
Pool2dGeom pool2d_geometry(const char* op, const Shape& x_shape, const Pool2dParams& p);

// ---- CPU (contiguous buffers) ------------------------------------------------
template <typename T>
void max_pool2d_forward_cpu(const Pool2dGeom& g, const T* x,  // (N, C, H, W)
                            T* y,                              // (N, C, P, Q)
                            int32_t* argmax);                  // (N, C, P, Q), h*W + w
template <typename T>
void max_pool2d_backward_cpu(const Pool2dGeom& g, const T* dy,  // (N, C, P, Q)
                             const int32_t* argmax,             // (N, C, P, Q)
                             T* dx);                            // (N, C, H, W), overwritten
// dx = sum over outputs o with argmax[o] = the element of (y[o] > 0 ? dy[o] : 0).
template <typename T>
void max_pool2d_relu_backward_cpu(const Pool2dGeom& g, const T* dy,  // (N, C, P, Q)
                                  const T* y,                        // (N, C, P, Q) pooled
                                  const int32_t* argmax,             // (N, C, P, Q)
                                  T* dx);                            // (N, C, H, W), overwritten
template <typename T>
void avg_pool2d_forward_cpu(const Pool2dGeom& g, const T* x,  // (N, C, H, W)
                            T* y,                              // (N, C, P, Q)
                            bool count_include_pad);
template <typename T>
void avg_pool2d_backward_cpu(const Pool2dGeom& g, const T* dy,  // (N, C, P, Q)
                             T* dx,                             // (N, C, H, W), overwritten
                             bool count_include_pad);

#ifdef MN_WITH_CUDA
template <typename T>
void max_pool2d_forward_cuda(const Pool2dGeom& g, const T* x, T* y, int32_t* argmax);
template <typename T>
void max_pool2d_backward_cuda(const Pool2dGeom& g, const T* dy, const int32_t* argmax, T* dx);
template <typename T>
void max_pool2d_relu_backward_cuda(const Pool2dGeom& g, const T* dy, const T* y,
                                   const int32_t* argmax, T* dx);
template <typename T>
void avg_pool2d_forward_cuda(const Pool2dGeom& g, const T* x, T* y, bool count_include_pad);
template <typename T>
void avg_pool2d_backward_cuda(const Pool2dGeom& g, const T* dy, T* dx, bool count_include_pad);
#endif

// ---- Tensor level --------------------------------------------------------------
// Returns (y (N, C, P, Q), argmax (N, C, P, Q) int32).
std::pair<Tensor, Tensor> max_pool2d_forward(const Tensor& x, const Pool2dParams& p);
Tensor max_pool2d_backward(const Tensor& dy, const Tensor& argmax, const Shape& x_shape,
                           const Pool2dParams& p);
// The gradient into the ReLU's input (see the top): dy, y (the pooled values) and argmax
// (N, C, P, Q); returns (N, C, H, W) = x_shape.
Tensor max_pool2d_relu_backward(const Tensor& dy, const Tensor& y, const Tensor& argmax,
                                const Shape& x_shape, const Pool2dParams& p);
Tensor avg_pool2d_forward(const Tensor& x, const Pool2dParams& p);
Tensor avg_pool2d_backward(const Tensor& dy, const Shape& x_shape, const Pool2dParams& p);

}  // namespace mn::kernels
