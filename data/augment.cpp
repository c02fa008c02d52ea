// Koch affine parameters (host, from the Generator) and the CPU bilinear warp.
#include "data/augment.h"
#include "data/file_io.h"

#include <cmath>

#include "runtime/dispatch.h"
#include "runtime/parallel.h"
#ifdef MN_WITH_CUDA
#include "runtime/cuda_check.h"
#endif

namespace mn::data {

Affine2D identity_affine() { return {{1, 0, 0, 0, 1, 0}}; }

Affine2D draw_koch_affine(int64_t H, int64_t W, const KochAugmentOptions& o, Generator& g) {
  // Fixed draw order: for each component a coin then its value(s), drawn even
  // when the coin says no, so every image consumes exactly 11 draws.
  auto coin = [&] { return g.next_uniform() < o.probability; };
  auto uni = [&](double lo, double hi) { return lo + (hi - lo) * g.next_uniform(); };
  const bool r_on = coin();
  const double th = uni(-o.max_rotation_deg, o.max_rotation_deg) * M_PI / 180.0;
  const bool sh_on = coin();
  const double shx = uni(-o.max_shear, o.max_shear), shy = uni(-o.max_shear, o.max_shear);
  const bool sc_on = coin();
  const double sx = uni(o.min_scale, o.max_scale), sy = uni(o.min_scale, o.max_scale);
  const bool tr_on = coin();
  const double tx = uni(-o.max_translation, o.max_translation),
               ty = uni(-o.max_translation, o.max_translation);
  const double c = r_on ? std::cos(th) : 1, s = r_on ? std::sin(th) : 0;
  const double R[4] = {c, -s, s, c};
  const double Sh[4] = {1, sh_on ? shx : 0, sh_on ? shy : 0, 1};
  const double S[4] = {sc_on ? sx : 1, 0, 0, sc_on ? sy : 1};
  auto mul = [](const double* a, const double* b, double* r) {
    r[0] = a[0] * b[0] + a[1] * b[2];
    r[1] = a[0] * b[1] + a[1] * b[3];
    r[2] = a[2] * b[0] + a[3] * b[2];
    r[3] = a[2] * b[1] + a[3] * b[3];
  };
  double RS[4], A[4];
  mul(R, Sh, RS);
  mul(RS, S, A);
  const double det = A[0] * A[3] - A[1] * A[2];
  const double inv[4] = {A[3] / det, -A[1] / det, -A[2] / det, A[0] / det};
  const double cx = (W - 1) / 2.0, cy = (H - 1) / 2.0;
  const double ttx = tr_on ? tx : 0, tty = tr_on ? ty : 0;
  // i = inv (o - c - t) + c
  Affine2D m;
  m.m[0] = static_cast<float>(inv[0]);
  m.m[1] = static_cast<float>(inv[1]);
  m.m[2] = static_cast<float>(cx - inv[0] * (cx + ttx) - inv[1] * (cy + tty));
  m.m[3] = static_cast<float>(inv[2]);
  m.m[4] = static_cast<float>(inv[3]);
  m.m[5] = static_cast<float>(cy - inv[2] * (cx + ttx) - inv[3] * (cy + tty));
  return m;
}

std::vector<Affine2D> draw_koch_affines(int64_t n, int64_t H, int64_t W,
                                        const KochAugmentOptions& opt, Generator& g) {
  std::vector<Affine2D> v;
  v.reserve(n);
  for (int64_t i = 0; i < n; ++i) v.push_back(draw_koch_affine(H, W, opt, g));
  return v;
}

template <typename T>
void affine_warp_cpu(const T* in, int64_t N, int64_t H, int64_t W, const Affine2D* P, T fill, T* out) {
  parallel_for(0, N * H, 16, [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      const int64_t n = row / H, y = row % H;
      const float* m = P[n].m;
      const T* src = in + n * H * W;
      T* dst = out + row * W;
      for (int64_t x = 0; x < W; ++x) {
        // Same float expression order as the CUDA kernel.
        const float xf = static_cast<float>(x), yf = static_cast<float>(y);
        const float sx = m[0] * xf + m[1] * yf + m[2];
        const float sy = m[3] * xf + m[4] * yf + m[5];
        const float fx = std::floor(sx), fy = std::floor(sy);
        const int64_t x0 = static_cast<int64_t>(fx), y0 = static_cast<int64_t>(fy);
        const float ax = sx - fx, ay = sy - fy;
        auto at = [&](int64_t yy, int64_t xx) -> float {
          return (yy >= 0 && yy < H && xx >= 0 && xx < W) ? static_cast<float>(src[yy * W + xx])
                                                          : static_cast<float>(fill);
        };
        const float top = at(y0, x0) * (1.f - ax) + at(y0, x0 + 1) * ax;
        const float bot = at(y0 + 1, x0) * (1.f - ax) + at(y0 + 1, x0 + 1) * ax;
        dst[x] = static_cast<T>(top * (1.f - ay) + bot * ay);
      }
    }
  });
}

template void affine_warp_cpu<float>(const float*, int64_t, int64_t, int64_t, const Affine2D*, float, float*);
template void affine_warp_cpu<double>(const double*, int64_t, int64_t, int64_t, const Affine2D*, double,
                                      double*);

Tensor affine_warp(const Tensor& images, const std::vector<Affine2D>& params, double fill) {
  check_dim("affine_warp", images, 3, "images");
  check_floating("affine_warp", images);
  MN_DATA_CHECK(static_cast<int64_t>(params.size()) == images.size(0), "affine_warp: ", params.size(),
           " parameter sets for ", shape_str(images.shape()), " images");
  Tensor x = images.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  const int64_t N = x.size(0), H = x.size(1), W = x.size(2);
  if (N == 0) return out;
  MN_DISPATCH_FLOAT(x.dtype(), "affine_warp", [&] {
    if (x.is_cuda()) {
      MN_CUDA_BRANCH("affine_warp", x.device(), x.dtype(), {
        // The 24 bytes per image of parameters go up with the batch (counted copy).
        Tensor p = Tensor::from_host(params.data(), {N, 6}, DType::F32, x.device());
        affine_warp_cuda<scalar_t>(x.data<scalar_t>(), N, H, W,
                                   reinterpret_cast<const Affine2D*>(p.data<float>()),
                                   static_cast<scalar_t>(fill), out.data<scalar_t>());
      });
    } else {
      affine_warp_cpu<scalar_t>(x.data<scalar_t>(), N, H, W, params.data(),
                                static_cast<scalar_t>(fill), out.data<scalar_t>());
    }
  });
  return out;
}

}  // namespace mn::data
