// CPU max / average pooling (see kernels/pool.h for the semantics): one (n, c)
// plane per task, spread over the thread pool; planes are independent, so the
// backward scatters without races and results do not depend on the thread count.
#include <algorithm>
#include <cmath>

#include "kernels/pool.h"
#include "runtime/parallel.h"

namespace mn::kernels {
namespace {
template <typename F>
void for_planes(const Pool2dGeom& g, F&& fn) {
  const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, g.H * g.W));
  parallel_for(0, g.N * g.C, grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) fn(i);
  });
}
}  // namespace

template <typename T>
void max_pool2d_forward_cpu(const Pool2dGeom& g, const T* x, T* y, int32_t* argmax) {
  // The common 2x2 / stride 2 / no padding case (every Koch pool) unrolled.
  const bool k2 = g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0;
  for_planes(g, [&](int64_t plane) {
    const T* xp = x + plane * g.H * g.W;
    T* yp = y + plane * g.P * g.Q;
    int32_t* ap = argmax + plane * g.P * g.Q;
    if (k2) {
      // A tournament, (a vs b) and (c vs d), then the two winners: the same result
      // as scanning the window in the order a b / c d (the first maximum wins, the
      // first NaN wins). Only the comparisons are data-dependent; they become
      // integers, the winner is picked by index (a load), so the compiler emits no
      // branches (float selects compiled to branches ran 4x slower on random data).
      const int W = static_cast<int>(g.W);
      for (int64_t p = 0; p < g.P; ++p) {
        const T* r0 = xp + 2 * p * g.W;
        const T* r1 = r0 + g.W;
        T* yr = yp + p * g.Q;
        int32_t* ar = ap + p * g.Q;
        const int32_t base = static_cast<int32_t>(2 * p * g.W);
        for (int64_t q = 0; q < g.Q; ++q) {
          const T* w0 = r0 + 2 * q;
          const T* w1 = r1 + 2 * q;
          // Take the later value v over the earlier m iff v > m or v is NaN, unless
          // m is NaN: !(v <= m) && m == m (both comparisons are false with a NaN).
          const int tb = int(!(w0[1] <= w0[0])) & int(w0[0] == w0[0]);
          const int td = int(!(w1[1] <= w1[0])) & int(w1[0] == w1[0]);
          const T mab = w0[tb], mcd = w1[td];
          const int tl = int(!(mcd <= mab)) & int(mab == mab);
          const int off = tb + tl * (W + td - tb);  // arithmetic, not a select: no branch
          yr[q] = w0[off];
          ar[q] = base + static_cast<int32_t>(2 * q) + off;
        }
      }
      return;
    }
    for (int64_t p = 0; p < g.P; ++p) {
      const int64_t h0 = std::max<int64_t>(p * g.sh - g.ph, 0);
      const int64_t h1 = std::min<int64_t>(p * g.sh - g.ph + g.kh, g.H);
      for (int64_t q = 0; q < g.Q; ++q) {
        const int64_t w0 = std::max<int64_t>(q * g.sw - g.pw, 0);
        const int64_t w1 = std::min<int64_t>(q * g.sw - g.pw + g.kw, g.W);
        int64_t best = h0 * g.W + w0;
        T m = xp[best];
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) {
            const T v = xp[h * g.W + w];
            if (v > m || (std::isnan(v) && !std::isnan(m))) m = v, best = h * g.W + w;
          }
        yp[p * g.Q + q] = m;
        ap[p * g.Q + q] = static_cast<int32_t>(best);
      }
    }
  });
}

template <typename T>
void max_pool2d_backward_cpu(const Pool2dGeom& g, const T* dy, const int32_t* argmax, T* dx) {
  for_planes(g, [&](int64_t plane) {
    T* dxp = dx + plane * g.H * g.W;
    std::fill(dxp, dxp + g.H * g.W, T(0));
    const T* dyp = dy + plane * g.P * g.Q;
    const int32_t* ap = argmax + plane * g.P * g.Q;
    for (int64_t i = 0; i < g.P * g.Q; ++i) dxp[ap[i]] += dyp[i];
  });
}

template <typename T>
void avg_pool2d_forward_cpu(const Pool2dGeom& g, const T* x, T* y, bool count_include_pad) {
  const T full = T(1) / T(g.kh * g.kw);
  for_planes(g, [&](int64_t plane) {
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
  for_planes(g, [&](int64_t plane) {
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
  template void avg_pool2d_forward_cpu<T>(const Pool2dGeom&, const T*, T*, bool);               \
  template void avg_pool2d_backward_cpu<T>(const Pool2dGeom&, const T*, T*, bool);
MN_POOL_CPU_INSTANTIATE(float)
MN_POOL_CPU_INSTANTIATE(double)
#undef MN_POOL_CPU_INSTANTIATE

}  // namespace mn::kernels
