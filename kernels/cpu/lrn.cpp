// CPU LRN across channels: for each (n, c) the window's squared planes are summed
// into the scale plane (contiguous over H*W, vectorisable), parallel over N*C.
#include "kernels/lrn.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace mn::kernels {

namespace {
inline int64_t win_lo(int64_t c, int64_t n) { return std::max<int64_t>(0, c - (n - 1) / 2); }
inline int64_t win_hi(int64_t c, int64_t n, int64_t C) { return std::min<int64_t>(C - 1, c + n / 2); }
}  // namespace

template <typename T>
void lrn_forward_cpu(const LrnOptions& o, int64_t N, int64_t C, int64_t HW, const T* x, T* y,
                     T* scale) {
  const T a = T(o.effective_alpha()), k = T(o.k), beta = T(o.beta);
  parallel_for(0, N * C, std::max<int64_t>(1, 16384 / std::max<int64_t>(HW, 1)), [&](int64_t b,
                                                                                      int64_t e) {
    for (int64_t nc = b; nc < e; ++nc) {
      const int64_t n = nc / C, c = nc % C;
      T* s = scale + nc * HW;
      for (int64_t i = 0; i < HW; ++i) s[i] = T(0);
      for (int64_t cc = win_lo(c, o.size); cc <= win_hi(c, o.size, C); ++cc) {
        const T* xp = x + (n * C + cc) * HW;
        for (int64_t i = 0; i < HW; ++i) s[i] += xp[i] * xp[i];
      }
      const T* xc = x + nc * HW;
      T* yc = y + nc * HW;
      for (int64_t i = 0; i < HW; ++i) {
        s[i] = k + a * s[i];
        yc[i] = xc[i] * std::pow(s[i], -beta);
      }
    }
  });
}

template <typename T>
void lrn_backward_cpu(const LrnOptions& o, int64_t N, int64_t C, int64_t HW, const T* x,
                      const T* y, const T* scale, const T* gy, T* gx) {
  const T coef = T(2) * T(o.effective_alpha()) * T(o.beta), beta = T(o.beta);
  // Element c receives from every j whose window contains c: j in [c - n/2, c + (n-1)/2].
  const int64_t before = o.size / 2, after = (o.size - 1) / 2;
  parallel_for(0, N * C, std::max<int64_t>(1, 16384 / std::max<int64_t>(HW, 1)), [&](int64_t b,
                                                                                      int64_t e) {
    std::vector<T> acc(HW);
    for (int64_t nc = b; nc < e; ++nc) {
      const int64_t n = nc / C, c = nc % C;
      std::fill(acc.begin(), acc.end(), T(0));
      const int64_t lo = std::max<int64_t>(0, c - before), hi = std::min<int64_t>(C - 1, c + after);
      for (int64_t j = lo; j <= hi; ++j) {
        const int64_t off = (n * C + j) * HW;
        const T *g = gy + off, *yy = y + off, *s = scale + off;
        for (int64_t i = 0; i < HW; ++i) acc[i] += g[i] * yy[i] / s[i];
      }
      const int64_t off = nc * HW;
      for (int64_t i = 0; i < HW; ++i)
        gx[off + i] = gy[off + i] * std::pow(scale[off + i], -beta) - coef * x[off + i] * acc[i];
    }
  });
}

template void lrn_forward_cpu<float>(const LrnOptions&, int64_t, int64_t, int64_t, const float*,
                                     float*, float*);
template void lrn_forward_cpu<double>(const LrnOptions&, int64_t, int64_t, int64_t, const double*,
                                      double*, double*);
template void lrn_backward_cpu<float>(const LrnOptions&, int64_t, int64_t, int64_t, const float*,
                                      const float*, const float*, const float*, float*);
template void lrn_backward_cpu<double>(const LrnOptions&, int64_t, int64_t, int64_t, const double*,
                                       const double*, const double*, const double*, double*);

namespace {
void check_lrn(const Tensor& x, const LrnOptions& o) {
  check_defined("lrn", x, "x");
  check_floating("lrn", x);
  MN_CHECK(x.dim() >= 2, "lrn: expected (N, C, ...) input, got ", shape_str(x.shape()));
  MN_CHECK(o.size >= 1, "lrn: size must be >= 1, got ", o.size);
}
}  // namespace

LrnResult lrn_forward(const Tensor& x_in, const LrnOptions& o) {
  check_lrn(x_in, o);
  Tensor x = x_in.contiguous();
  const int64_t N = x.size(0), C = x.size(1), HW = x.numel() / std::max<int64_t>(1, N * C);
  LrnResult r{Tensor::empty(x.shape(), x.dtype(), x.device()),
              Tensor::empty(x.shape(), x.dtype(), x.device())};
  if (x.numel() == 0) return r;
  MN_DISPATCH_KERNEL("lrn", x, lrn_forward,
      o, N, C, HW, x.data<scalar_t>(), r.y.data<scalar_t>(), r.scale.data<scalar_t>());
  return r;
}

Tensor lrn_backward(const Tensor& x_in, const Tensor& y_in, const Tensor& s_in, const Tensor& g_in,
                    const LrnOptions& o) {
  check_lrn(x_in, o);
  for (const Tensor* t : {&y_in, &s_in, &g_in}) {
    check_same_shape("lrn_backward", x_in, *t);
    check_same_dtype("lrn_backward", x_in, *t);
    check_same_device("lrn_backward", x_in, *t);
  }
  Tensor x = x_in.contiguous(), y = y_in.contiguous(), s = s_in.contiguous(), g = g_in.contiguous();
  const int64_t N = x.size(0), C = x.size(1), HW = x.numel() / std::max<int64_t>(1, N * C);
  Tensor gx = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.numel() == 0) return gx;
  MN_DISPATCH_KERNEL("lrn_backward", x, lrn_backward,
      o, N, C, HW, x.data<scalar_t>(), y.data<scalar_t>(), s.data<scalar_t>(), g.data<scalar_t>(), gx.data<scalar_t>());
  return gx;
}

}  // namespace mn::kernels
