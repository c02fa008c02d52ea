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
// picked it). CUDA backward gathers per input element: deterministic, no atomics.
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
void avg_pool2d_forward_cuda(const Pool2dGeom& g, const T* x, T* y, bool count_include_pad);
template <typename T>
void avg_pool2d_backward_cuda(const Pool2dGeom& g, const T* dy, T* dx, bool count_include_pad);
#endif

// ---- Tensor level --------------------------------------------------------------
// Returns (y (N, C, P, Q), argmax (N, C, P, Q) int32).
std::pair<Tensor, Tensor> max_pool2d_forward(const Tensor& x, const Pool2dParams& p);
Tensor max_pool2d_backward(const Tensor& dy, const Tensor& argmax, const Shape& x_shape,
                           const Pool2dParams& p);
Tensor avg_pool2d_forward(const Tensor& x, const Pool2dParams& p);
Tensor avg_pool2d_backward(const Tensor& dy, const Shape& x_shape, const Pool2dParams& p);

}  // namespace mn::kernels
