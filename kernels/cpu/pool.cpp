// CPU max / average pooling (see kernels/pool.h for the semantics): one (n, c)
// plane per task, spread over the thread pool; planes are independent, so the
// backward scatters without races and results do not depend on the thread count.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/max_pool_impl.h"
#include "kernels/pool.h"
#include "runtime/parallel.h"

namespace mn::kernels {
template <typename T>
void max_pool2d_forward_cpu(const Pool2dGeom& g, const T* x, T* y, int32_t* argmax) {
  // kernels/cpu/max_pool_impl.h (shared with the fused PReLU + max-pool).
  detail::for_pool_planes(g, [&](int64_t plane) {
    detail::max_pool_plane(g, x + plane * g.H * g.W, detail::PoolIdentity{}, y + plane * g.P * g.Q,
                           argmax + plane * g.P * g.Q);
  });
}

template <typename T>
void max_pool2d_backward_cpu(const Pool2dGeom& g, const T* dy, const int32_t* argmax, T* dx) {
  detail::for_pool_planes(g, [&](int64_t plane) {
    T* dxp = dx + plane * g.H * g.W;
    std::fill(dxp, dxp + g.H * g.W, T(0));
    const T* dyp = dy + plane * g.P * g.Q;
    const int32_t* ap = argmax + plane * g.P * g.Q;
    for (int64_t i = 0; i < g.P * g.Q; ++i) dxp[ap[i]] += dyp[i];
  });
}

// The same scatter as max_pool2d_backward_cpu with each term masked by the pooled
// value: an element's terms all come from outputs that pooled its value, so they are
// all kept or all zeroed, and the sums equal the unfused pool-then-ReLU backward's.
template <typename T>
void max_pool2d_relu_backward_cpu(const Pool2dGeom& g, const T* dy, const T* y,
                                  const int32_t* argmax, T* dx) {
  detail::for_pool_planes(g, [&](int64_t plane) {
    T* dxp = dx + plane * g.H * g.W;
    std::fill(dxp, dxp + g.H * g.W, T(0));
    const T* dyp = dy + plane * g.P * g.Q;
    const T* yp = y + plane * g.P * g.Q;
    const int32_t* ap = argmax + plane * g.P * g.Q;
    for (int64_t i = 0; i < g.P * g.Q; ++i) dxp[ap[i]] += yp[i] > T(0) ? dyp[i] : T(0);
  });
}

template <typename T>
void avg_pool2d_forward_cpu(const Pool2dGeom& g, const T* x, T* y, bool count_include_pad) {
  const T full = T(1) / T(g.kh * g.kw);
  detail::for_pool_planes(g, [&](int64_t plane) {
    const T* xp = x + plane * g.H * g.W;
    T* yp = y + plane * g.P * g.Q;
    for (int64_t p = 0; p < g.P; ++p) {
      const int64_t h0 = std::max<int64_t>(p * g.sh - g.ph, 0);
      const int64_t h1 = std::min<int64_t>(p * g.sh - g.ph + g.kh, g.H);
      for (int64_t q = 0; q < g.Q; ++q) {
        const int64_t w0 = std::max<int64_t>(q * g.sw - g.pw, 0);
        const int64_t w1 = std::min<int64_t>(q * g.sw - g.pw + g.kw, g.W);
        T s = 0;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) s += xp[h * g.W + w];
        yp[p * g.Q + q] = count_include_pad ? s * full : s / T((h1 - h0) * (w1 - w0));
      }
    }
  });
}

template <typename T>
void avg_pool2d_backward_cpu(const Pool2dGeom& g, const T* dy, T* dx, bool count_include_pad) {
  const T full = T(1) / T(g.kh * g.kw);
  detail::for_pool_planes(g, [&](int64_t plane) {
    T* dxp = dx + plane * g.H * g.W;
    std::fill(dxp, dxp + g.H * g.W, T(0));
    const T* dyp = dy + plane * g.P * g.Q;
    for (int64_t p = 0; p < g.P; ++p) {
      const int64_t h0 = std::max<int64_t>(p * g.sh - g.ph, 0);
      const int64_t h1 = std::min<int64_t>(p * g.sh - g.ph + g.kh, g.H);
      for (int64_t q = 0; q < g.Q; ++q) {
        const int64_t w0 = std::max<int64_t>(q * g.sw - g.pw, 0);
        const int64_t w1 = std::min<int64_t>(q * g.sw - g.pw + g.kw, g.W);
        const T d = dyp[p * g.Q + q] *
                    (count_include_pad ? full : T(1) / T((h1 - h0) * (w1 - w0)));
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) dxp[h * g.W + w] += d;
      }
    }
  });
}

#define MN_POOL_CPU_INSTANTIATE(T)                                                              \
  template void max_pool2d_forward_cpu<T>(const Pool2dGeom&, const T*, T*, int32_t*);           \
  template void max_pool2d_backward_cpu<T>(const Pool2dGeom&, const T*, const int32_t*, T*);    \
  template void max_pool2d_relu_backward_cpu<T>(const Pool2dGeom&, const T*, const T*,          \
                                                const int32_t*, T*);                            \
  template void avg_pool2d_forward_cpu<T>(const Pool2dGeom&, const T*, T*, bool);               \
  template void avg_pool2d_backward_cpu<T>(const Pool2dGeom&, const T*, T*, bool);
MN_POOL_CPU_INSTANTIATE(float)
MN_POOL_CPU_INSTANTIATE(double)
#undef MN_POOL_CPU_INSTANTIATE

}  // namespace mn::kernels
