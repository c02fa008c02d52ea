// Structural similarity (Wang, Bovik, Sheikh & Simoncelli 2004): 11x11
// Gaussian window (sigma 1.5, normalised), C1 = (0.01 L)^2, C2 = (0.03 L)^2,
// the SSIM map over the "valid" window positions ((H-10) x (W-10)) averaged to
// one mean SSIM per image pair. L is the data range (255 for uint8 levels, 1 for
// images in [0, 1]).
//
// Pairs are given as indices into one image stack so that mining can score an
// anchor against many images without copying them:
//   images (N, H, W) float32/float64, ia (P) int64, ib (P) int64 -> (P) same dtype
// CPU: data/cpu/ssim.cpp (separable filtering; the oracle). CUDA: data/cuda/ssim.cu
// (one block per pair, direct 11x11 window from global memory, deterministic
// block reduction).
#pragma once
#include <cstdint>

#include "runtime/tensor.h"

namespace mn::data {

constexpr int kSsimWindow = 11;
constexpr double kSsimSigma = 1.5;

// The normalised 1-D Gaussian (11 taps); the 2-D window is its outer product.
void ssim_gaussian_1d(double* w11);

template <typename T>
void ssim_pairs_cpu(const T* images,      // (N, H, W)
                    int64_t N, int64_t H, int64_t W,
                    const int64_t* ia,    // (P)
                    const int64_t* ib,    // (P)
                    int64_t P, double data_range,
                    T* out);              // (P)

#ifdef MN_WITH_CUDA
template <typename T>
void ssim_pairs_cuda(const T* images, int64_t N, int64_t H, int64_t W, const int64_t* ia,
                     const int64_t* ib, int64_t P, double data_range, T* out);
#endif

// Tensor-level: images (N, H, W) on CPU or CUDA; ia/ib int64 on the same device.
Tensor ssim_pairs(const Tensor& images, const Tensor& ia, const Tensor& ib, double data_range);

}  // namespace mn::data
