// Local response normalisation across channels, CPU and CUDA, forward and backward.
//
// For input a of shape (N, C, H, W), with channel window W(c) = [c - (n-1)/2, c + n/2]
// (integer division; clipped to [0, C-1]; symmetric for odd n):
//
//   scale[c] = k + alpha' * sum_{c' in W(c)} a[c']^2,      b[c] = a[c] * scale[c]^(-beta)
//
// Two conventions for alpha' exist and both are offered (LrnOptions::alpha_over_n):
//   * Krizhevsky et al. (2012) and equation 10 of the Omniglot study: alpha' = alpha,
//     alpha multiplies the PLAIN sum of squares. This is the default.
//   * Caffe and PyTorch (nn.LocalResponseNorm): alpha' = alpha / n, alpha multiplies
//     the MEAN over the window size n (PyTorch divides by n even at the borders).
// Defaults k = 2, n = 5, alpha = 1e-4, beta = 0.75 (Krizhevsky's values).
// For even n the window is Caffe's ((n-1)/2 before, n/2 after); PyTorch's even-n
// window is shifted by one, odd n agree.
//
// Backward (the forward saves scale, (N, C, H, W)):
//   da[c] = g[c] * scale[c]^-beta
//           - 2 alpha' beta a[c] * sum_{j : c in W(j)} g[j] b[j] / scale[j]
//
// CUDA: one thread per element, coalesced along H*W, summing the window (v1, the
// only version; the window re-reads hit L1/L2).
#pragma once
#include <cstdint>

#include "runtime/tensor.h"

namespace mn::kernels {

struct LrnOptions {
  int64_t size = 5;   // n
  double alpha = 1e-4;
  double beta = 0.75;
  double k = 2.0;
  bool alpha_over_n = false;  // false: Krizhevsky / Omniglot eq. 10; true: Caffe / PyTorch
  double effective_alpha() const { return alpha_over_n ? alpha / double(size) : alpha; }
};

// x: (N, C, HW)   y: (N, C, HW)   scale: (N, C, HW)
template <typename T>
void lrn_forward_cpu(const LrnOptions& o, int64_t N, int64_t C, int64_t HW, const T* x, T* y,
                     T* scale);
// x, y, scale, gy: (N, C, HW) -> gx: (N, C, HW) (overwritten)
template <typename T>
void lrn_backward_cpu(const LrnOptions& o, int64_t N, int64_t C, int64_t HW, const T* x,
                      const T* y, const T* scale, const T* gy, T* gx);
#ifdef MN_WITH_CUDA
template <typename T>
void lrn_forward_cuda(const LrnOptions& o, int64_t N, int64_t C, int64_t HW, const T* x, T* y,
                      T* scale);
template <typename T>
void lrn_backward_cuda(const LrnOptions& o, int64_t N, int64_t C, int64_t HW, const T* x,
                       const T* y, const T* scale, const T* gy, T* gx);
#endif

struct LrnResult {
  Tensor y;      // (N, C, H, W)
  Tensor scale;  // (N, C, H, W), saved for backward
};
// x: (N, C, H, W) (any rank >= 2 works: dims after C are flattened)
LrnResult lrn_forward(const Tensor& x, const LrnOptions& o);
Tensor lrn_backward(const Tensor& x, const Tensor& y, const Tensor& scale, const Tensor& gy,
                    const LrnOptions& o);

}  // namespace mn::kernels
