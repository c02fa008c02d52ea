// Batch normalisation over (N, C, H, W) or (N, F) — per channel, statistics over
// N and the spatial positions — CPU and CUDA, forward and backward.
//
// Training:   mean, var = batch statistics (var BIASED, divided by M = N*H*W),
//             invstd = 1 / sqrt(var + eps), y = (x - mean) * invstd * gamma + beta;
//             running_mean = (1 - momentum) running_mean + momentum * mean,
//             running_var  = (1 - momentum) running_var  + momentum * var * M / (M - 1)
//             (the UNBIASED variance, as PyTorch does; M == 1 keeps var as is).
// Evaluation: mean = running_mean, invstd = 1 / sqrt(running_var + eps); no update.
// The forward saves mean and invstd per channel: exactly what backward needs.
//
// Backward with xhat = (x - mean) * invstd:
//   dbeta = sum g,  dgamma = sum g * xhat,
//   training:  dx = gamma * invstd / M * (M g - dbeta - xhat * dgamma)
//   evaluation: dx = gamma * invstd * g   (the statistics are constants)
// gamma/beta may be null (affine = false): gamma acts as 1, beta as 0, and no
// dgamma/dbeta are written.
//
// CUDA: the statistics are reduced by a 2-D grid (channel x slice) of blocks that
// merge per-thread Welford states (Chan et al.) into a per-slice partial, then one
// small kernel merges the slices per channel; so a 64-channel layer still fills
// the GPU. Accumulation is in T (float or double).
#pragma once
#include <cstdint>

#include "runtime/tensor.h"

namespace mn::kernels {

// x, y: (N, C, L) with L = H*W (1 for (N, F)); gamma, beta, running_*, mean, invstd: (C).
// training: computes and writes mean/invstd and updates running_* (when non-null).
// !training: reads running_mean/var (required) and writes mean/invstd from them.
template <typename T>
void batchnorm_forward_cpu(int64_t N, int64_t C, int64_t L, const T* x, const T* gamma,
                           const T* beta, T* running_mean, T* running_var, bool training,
                           double momentum, double eps, T* y, T* mean, T* invstd);
// gy, x: (N, C, L); mean, invstd, gamma: (C) -> gx: (N, C, L), dgamma, dbeta: (C)
// (all overwritten; dgamma/dbeta may be null, gx may be null).
template <typename T>
void batchnorm_backward_cpu(int64_t N, int64_t C, int64_t L, const T* x, const T* gy,
                            const T* mean, const T* invstd, const T* gamma, bool training, T* gx,
                            T* dgamma, T* dbeta);
#ifdef MN_WITH_CUDA
// work: device scratch of at least batchnorm_cuda_workspace(C) elements of T.
int64_t batchnorm_cuda_workspace(int64_t C);
template <typename T>
void batchnorm_forward_cuda(int64_t N, int64_t C, int64_t L, const T* x, const T* gamma,
                            const T* beta, T* running_mean, T* running_var, bool training,
                            double momentum, double eps, T* y, T* mean, T* invstd, T* work);
template <typename T>
void batchnorm_backward_cuda(int64_t N, int64_t C, int64_t L, const T* x, const T* gy,
                             const T* mean, const T* invstd, const T* gamma, bool training, T* gx,
                             T* dgamma, T* dbeta, T* work);
#endif

struct BatchNormResult {
  Tensor y;       // like x
  Tensor mean;    // (C)
  Tensor invstd;  // (C)
};
// x: (N, C, ...) ; gamma, beta: (C) or undefined; running_mean/var: (C), updated in
// place in training mode (may be undefined in training mode; required in eval).
BatchNormResult batchnorm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  Tensor running_mean, Tensor running_var, bool training,
                                  double momentum, double eps);
struct BatchNormGrads {
  Tensor dx, dgamma, dbeta;  // dgamma/dbeta undefined when gamma is
};
BatchNormGrads batchnorm_backward(const Tensor& x, const Tensor& gy, const Tensor& mean,
                                  const Tensor& invstd, const Tensor& gamma, bool training);

}  // namespace mn::kernels
