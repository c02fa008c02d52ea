// SSIM on the CPU: separable Gaussian filtering of x, y, x^2, y^2, xy over the
// valid region, then the SSIM map and its mean. Pairs run in parallel.
#include <cmath>
#include <vector>

#include "data/ssim.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace mn::data {

void ssim_gaussian_1d(double* w) {
  double s = 0;
  for (int i = 0; i < kSsimWindow; ++i) {
    const double d = i - (kSsimWindow - 1) / 2.0;
    w[i] = std::exp(-d * d / (2 * kSsimSigma * kSsimSigma));
    s += w[i];
  }
  for (int i = 0; i < kSsimWindow; ++i) w[i] /= s;
}

template <typename T>
void ssim_pairs_cpu(const T* images, int64_t N, int64_t H, int64_t W, const int64_t* ia,
                    const int64_t* ib, int64_t P, double L, T* out) {
  constexpr int K = kSsimWindow;
  MN_CHECK(H >= K && W >= K, "ssim: images must be at least 11x11, got ", H, "x", W);
  double w[K];
  ssim_gaussian_1d(w);
  const double C1 = (0.01 * L) * (0.01 * L), C2 = (0.03 * L) * (0.03 * L);
  const int64_t Ho = H - K + 1, Wo = W - K + 1;
  parallel_for(0, P, 1, [&](int64_t p0, int64_t p1) {
    // Horizontal pass results: 5 maps of (H, Wo); then vertical per output pixel.
    std::vector<double> h(5 * H * Wo);
    for (int64_t p = p0; p < p1; ++p) {
      MN_CHECK(ia[p] >= 0 && ia[p] < N && ib[p] >= 0 && ib[p] < N, "ssim: pair ", p,
               " index out of range [0, ", N, ")");
      const T* x = images + ia[p] * H * W;
      const T* y = images + ib[p] * H * W;
      for (int64_t r = 0; r < H; ++r)
        for (int64_t c = 0; c < Wo; ++c) {
          double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
          for (int k = 0; k < K; ++k) {
            const double a = x[r * W + c + k], b = y[r * W + c + k];
            sx += w[k] * a;
            sy += w[k] * b;
            sxx += w[k] * a * a;
            syy += w[k] * b * b;
            sxy += w[k] * a * b;
          }
          double* o = h.data() + r * Wo + c;
          o[0] = sx;
          o[H * Wo] = sy;
          o[2 * H * Wo] = sxx;
          o[3 * H * Wo] = syy;
          o[4 * H * Wo] = sxy;
        }
      double total = 0;
      for (int64_t r = 0; r < Ho; ++r)
        for (int64_t c = 0; c < Wo; ++c) {
          double m[5] = {0, 0, 0, 0, 0};
          for (int k = 0; k < K; ++k)
            for (int q = 0; q < 5; ++q) m[q] += w[k] * h[q * H * Wo + (r + k) * Wo + c];
          const double mx = m[0], my = m[1];
          const double vx = m[2] - mx * mx, vy = m[3] - my * my, cxy = m[4] - mx * my;
          total += ((2 * mx * my + C1) * (2 * cxy + C2)) /
                   ((mx * mx + my * my + C1) * (vx + vy + C2));
        }
      out[p] = static_cast<T>(total / static_cast<double>(Ho * Wo));
    }
  });
}

template void ssim_pairs_cpu<float>(const float*, int64_t, int64_t, int64_t, const int64_t*,
                                    const int64_t*, int64_t, double, float*);
template void ssim_pairs_cpu<double>(const double*, int64_t, int64_t, int64_t, const int64_t*,
                                     const int64_t*, int64_t, double, double*);

Tensor ssim_pairs(const Tensor& images, const Tensor& ia, const Tensor& ib, double data_range) {
  check_dim("ssim_pairs", images, 3, "images");
  check_floating("ssim_pairs", images);
  MN_CHECK(ia.dtype() == DType::I64 && ib.dtype() == DType::I64 && ia.dim() == 1 &&
               ib.dim() == 1 && ia.numel() == ib.numel(),
           "ssim_pairs: index lists must be int64 (P) of equal length, got ", ia.desc(), " and ",
           ib.desc());
  check_same_device("ssim_pairs", images, ia);
  check_same_device("ssim_pairs", images, ib);
  Tensor x = images.contiguous(), a = ia.contiguous(), b = ib.contiguous();
  const int64_t P = a.numel();
  Tensor out = Tensor::empty({P}, x.dtype(), x.device());
  if (P == 0) return out;
  MN_DISPATCH_KERNEL("ssim_pairs", x, ssim_pairs,
      x.data<scalar_t>(), x.size(0), x.size(1), x.size(2), a.data<int64_t>(), b.data<int64_t>(), P,
      data_range, out.data<scalar_t>());
  return out;
}

}  // namespace mn::data
