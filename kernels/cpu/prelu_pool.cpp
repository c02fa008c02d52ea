// CPU PReLU + max pooling (see kernels/prelu_pool.h): one (n, c) plane per task.
//
// Forward: each window's PReLU values are computed in registers with the
// expression of prelu_forward_cpu (max(x, 0) + a * min(x, 0), so the values are
// the same bits) and pooled by max_pool2d_forward_cpu's code
// (kernels/cpu/max_pool_impl.h: four 2x2 windows at a time with SSE2 for float).
// Backward: zero-fill the plane, then only the argmax elements are written.
#include <algorithm>
#include <vector>

#include "kernels/cpu/max_pool_impl.h"
#include "kernels/prelu_pool.h"

namespace mn::kernels {
namespace {
// f(v) = PReLU with one slope: prelu_forward_cpu's expression, so the same bits.
template <typename T>
struct PReluAct {
  T slope;
  __m128 slope4;
  explicit PReluAct(T s) : slope(s), slope4(_mm_set1_ps(static_cast<float>(s))) {}
  T operator()(T v) const { return std::max(v, T(0)) + slope * std::min(v, T(0)); }
  // _mm_max_ps(0, v) is (0 > v ? 0 : v) and _mm_min_ps(0, v) is (0 < v ? 0 : v):
  // std::max(v, 0) and std::min(v, 0) exactly, NaN and -0 included.
  __m128 vec(__m128 v) const {
    const __m128 zero = _mm_setzero_ps();
    return _mm_add_ps(_mm_max_ps(zero, v), _mm_mul_ps(slope4, _mm_min_ps(zero, v)));
  }
};
}  // namespace

template <typename T>
void prelu_max_pool2d_forward_cpu(const Pool2dGeom& g, const T* x, const T* a, int64_t na, T* y,
                                  int32_t* argmax) {
  detail::for_pool_planes(g, [&](int64_t plane) {
    const PReluAct<T> f(a[na == 1 ? 0 : plane % g.C]);
    detail::max_pool_plane(g, x + plane * g.H * g.W, f, y + plane * g.P * g.Q,
                           argmax + plane * g.P * g.Q);
  });
}

template <typename T>
void prelu_max_pool2d_backward_cpu(const Pool2dGeom& g, const T* x, const T* a, int64_t na,
                                   const T* gy, const int32_t* argmax, T* gx, T* ga) {
  // Windows that do not overlap pick every element at most once.
  const bool disjoint = g.sh >= g.kh && g.sw >= g.kw;
  std::vector<T> plane_sum(static_cast<size_t>(g.N * g.C));
  detail::for_pool_planes(g, [&](int64_t plane) {
    const T slope = a[na == 1 ? 0 : plane % g.C];
    const int64_t HW = g.H * g.W, PQ = g.P * g.Q;
    const T* xp = x + plane * HW;
    T* dxp = gx + plane * HW;
    const T* dyp = gy + plane * PQ;
    const int32_t* ap = argmax + plane * PQ;
    std::fill(dxp, dxp + HW, T(0));
    T acc = T(0);
    if (disjoint) {
      for (int64_t i = 0; i < PQ; ++i) {
        const int32_t j = ap[i];
        const T v = xp[j];
        const T d = T(0) + dyp[i];  // as max_pool2d_backward_cpu's 0 += dy
        dxp[j] = d * (v > T(0) ? T(1) : slope);
        acc += d * std::min(v, T(0));
      }
    } else {  // scatter-add, then the PReLU factor over the plane
      for (int64_t i = 0; i < PQ; ++i) dxp[ap[i]] += dyp[i];
      for (int64_t j = 0; j < HW; ++j) {
        const T v = xp[j];
        acc += dxp[j] * std::min(v, T(0));
        dxp[j] *= v > T(0) ? T(1) : slope;
      }
    }
    plane_sum[static_cast<size_t>(plane)] = acc;
  });
  // Per channel over n in order, then (shared slope) over the channels in order.
  T total = T(0);
  for (int64_t c = 0; c < g.C; ++c) {
    T s = T(0);
    for (int64_t n = 0; n < g.N; ++n) s += plane_sum[static_cast<size_t>(n * g.C + c)];
    if (na == 1) {
      total += s;
    } else {
      ga[c] = s;
    }
  }
  if (na == 1) ga[0] = total;
}

#define MN_PRELU_POOL_CPU_INSTANTIATE(T)                                                      \
  template void prelu_max_pool2d_forward_cpu<T>(const Pool2dGeom&, const T*, const T*,       \
                                                int64_t, T*, int32_t*);                       \
  template void prelu_max_pool2d_backward_cpu<T>(const Pool2dGeom&, const T*, const T*,      \
                                                 int64_t, const T*, const int32_t*, T*, T*);
MN_PRELU_POOL_CPU_INSTANTIATE(float)
MN_PRELU_POOL_CPU_INSTANTIATE(double)
#undef MN_PRELU_POOL_CPU_INSTANTIATE

}  // namespace mn::kernels
