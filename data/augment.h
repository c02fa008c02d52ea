// Koch et al.'s affine augmentation: each of rotation theta in [-10, 10] deg,
// shear (rho_x, rho_y) in [-0.3, 0.3], scale (s_x, s_y) in [0.8, 1.2] and
// translation (t_x, t_y) in [-2, 2] px is applied with probability 0.5 (one coin
// per component). The parameters of every image are drawn on the host from a
// mn::Generator, in a fixed order, and turned into one 2x3 matrix; the warp
// (bilinear, about the image centre, outside = `fill`) runs on the CPU
// (data/augment.cpp) or the GPU (data/cuda/augment.cu) with the same float
// arithmetic, so one seed gives the same images on both devices up to float
// rounding of the interpolation.
//
// Forward map (output pixel o, centre c): i = A^-1 (o - c - t) + c, with
// A = R(theta) * Sh(rho) * S(s), Sh = [[1, rho_x], [rho_y, 1]], S = diag(s_x, s_y).
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/rng.h"
#include "runtime/tensor.h"

namespace mn::data {

struct KochAugmentOptions {
  double probability = 0.5;  // per component
  double max_rotation_deg = 10;
  double max_shear = 0.3;
  double min_scale = 0.8, max_scale = 1.2;
  double max_translation = 2;  // pixels
};

// Input-from-output sampling matrix: x_in = m[0] x + m[1] y + m[2]; y_in = m[3] x + m[4] y + m[5].
struct Affine2D {
  float m[6];
};

Affine2D identity_affine();
// Draws one image's parameters (always consumes the same number of draws).
Affine2D draw_koch_affine(int64_t height, int64_t width, const KochAugmentOptions& opt, Generator& g);
std::vector<Affine2D> draw_koch_affines(int64_t n, int64_t height, int64_t width,
                                        const KochAugmentOptions& opt, Generator& g);

template <typename T>
void affine_warp_cpu(const T* in,            // (N, H, W)
                     int64_t N, int64_t H, int64_t W,
                     const Affine2D* params,  // (N)
                     T fill, T* out);         // (N, H, W)
#ifdef MN_WITH_CUDA
template <typename T>
void affine_warp_cuda(const T* in, int64_t N, int64_t H, int64_t W,
                      const Affine2D* params_device, T fill, T* out);
#endif

// images (N, H, W) float32/float64 on CPU or CUDA; one Affine2D per image.
Tensor affine_warp(const Tensor& images, const std::vector<Affine2D>& params, double fill);

}  // namespace mn::data
