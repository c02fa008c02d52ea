// Internal: the CPU max-pool forward of kernels/cpu/pool.cpp (max_pool2d) and
// kernels/cpu/prelu_pool.cpp (PReLU then max-pool), over values transformed
// elementwise on the fly: pool(f(x)) with f the identity or a per-channel PReLU.
// Semantics in kernels/pool.h: ties keep the first maximum in row-major window
// order, a NaN wins, argmax = h*W + w in the input plane.
//
// The 2x2 / stride 2 / unpadded case (every pool of Koch's net, the conv4 trunk
// and the sampling net) runs four windows at a time with SSE2 (baseline x86-64)
// for float: the windows' corners are deinterleaved with shuffles, the same
// tournament as the scalar code is run on masks, the argmax is built with
// integer ops. The scalar tournament was branch-free but did one window at a time.
#pragma once
#include <emmintrin.h>  // SSE2: part of baseline x86-64

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/pool.h"
#include "runtime/parallel.h"

namespace mn::kernels::detail {

// One task per (n, c) plane, a few planes per chunk for small planes.
template <typename F>
void for_pool_planes(const Pool2dGeom& g, F&& fn) {
  const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, g.H * g.W));
  parallel_for(0, g.N * g.C, grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) fn(i);
  });
}

// f = identity.
struct PoolIdentity {
  template <typename T>
  T operator()(T v) const {
    return v;
  }
  __m128 vec(__m128 v) const { return v; }
};

// Lanes of m set: b, else a.
inline __m128 pool_pick(__m128 m, __m128 a, __m128 b) {
  return _mm_or_ps(_mm_and_ps(m, b), _mm_andnot_ps(m, a));
}
// The later value b replaces the earlier a iff !(b <= a) and a is not NaN.
inline __m128 pool_later_wins(__m128 a, __m128 b) {
  return _mm_andnot_ps(_mm_cmple_ps(b, a), _mm_cmpeq_ps(a, a));
}

// Windows [q0, q0 + 4) of one output row of a 2x2 / stride 2 pool; r0, r1 the
// two input rows, base the index of r0[0] in the plane.
template <typename F>
inline void max_pool_2x2_x4(const float* r0, const float* r1, const F& f, int32_t W,
                            int32_t base, int64_t q0, float* yr, int32_t* ar) {
  const __m128 lo0 = f.vec(_mm_loadu_ps(r0 + 2 * q0)), hi0 = f.vec(_mm_loadu_ps(r0 + 2 * q0 + 4));
  const __m128 lo1 = f.vec(_mm_loadu_ps(r1 + 2 * q0)), hi1 = f.vec(_mm_loadu_ps(r1 + 2 * q0 + 4));
  const __m128 a = _mm_shuffle_ps(lo0, hi0, _MM_SHUFFLE(2, 0, 2, 0));  // top-left corners
  const __m128 b = _mm_shuffle_ps(lo0, hi0, _MM_SHUFFLE(3, 1, 3, 1));  // top-right
  const __m128 c = _mm_shuffle_ps(lo1, hi1, _MM_SHUFFLE(2, 0, 2, 0));
  const __m128 d = _mm_shuffle_ps(lo1, hi1, _MM_SHUFFLE(3, 1, 3, 1));
  const __m128 tb = pool_later_wins(a, b), td = pool_later_wins(c, d);
  const __m128 mab = pool_pick(tb, a, b), mcd = pool_pick(td, c, d);
  const __m128 tl = pool_later_wins(mab, mcd);
  _mm_storeu_ps(yr + q0, pool_pick(tl, mab, mcd));
  // offset in the window: tl ? W + td : tb (the masks are 0 / -1: 0 - mask is 0 / 1)
  const __m128i zero = _mm_setzero_si128();
  const __m128i tb1 = _mm_sub_epi32(zero, _mm_castps_si128(tb));
  const __m128i td1 = _mm_sub_epi32(zero, _mm_castps_si128(td));
  const __m128i tli = _mm_castps_si128(tl);
  const __m128i off = _mm_or_si128(_mm_and_si128(tli, _mm_add_epi32(_mm_set1_epi32(W), td1)),
                                   _mm_andnot_si128(tli, tb1));
  const int32_t q2 = base + static_cast<int32_t>(2 * q0);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(ar + q0),
                   _mm_add_epi32(_mm_setr_epi32(q2, q2 + 2, q2 + 4, q2 + 6), off));
}

// y, argmax of one (n, c) plane: max over each window of f(x).
template <typename T, typename F>
void max_pool_plane(const Pool2dGeom& g, const T* xp, const F& f, T* yp, int32_t* ap) {
  const bool k2 = g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0;
  if (k2) {
    const int32_t W = static_cast<int32_t>(g.W);
    for (int64_t p = 0; p < g.P; ++p) {
      const T* r0 = xp + 2 * p * g.W;
      const T* r1 = r0 + g.W;
      T* yr = yp + p * g.Q;
      int32_t* ar = ap + p * g.Q;
      const int32_t base = static_cast<int32_t>(2 * p * g.W);
      int64_t q = 0;
      if constexpr (std::is_same_v<T, float>)
        for (; q + 4 <= g.Q; q += 4) max_pool_2x2_x4(r0, r1, f, W, base, q, yr, ar);
      for (; q < g.Q; ++q) {
        // A tournament, (a vs b) and (c vs d), then the two winners: the same
        // result as scanning a b / c d in order. Only the comparisons are
        // data-dependent and become integers (float selects compiled to branches
        // ran 4x slower on random data).
        const T v[4] = {f(r0[2 * q]), f(r0[2 * q + 1]), f(r1[2 * q]), f(r1[2 * q + 1])};
        const int tb = int(!(v[1] <= v[0])) & int(v[0] == v[0]);
        const int td = int(!(v[3] <= v[2])) & int(v[2] == v[2]);
        const int tl = int(!(v[2 + td] <= v[tb])) & int(v[tb] == v[tb]);
        const int k = tl * (2 + td) + (1 - tl) * tb;  // arithmetic, not a select
        yr[q] = v[k];
        ar[q] = base + static_cast<int32_t>(2 * q) + (k & 1) + (k >> 1) * W;
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
      T m = f(xp[best]);
      for (int64_t h = h0; h < h1; ++h)
        for (int64_t w = w0; w < w1; ++w) {
          const T v = f(xp[h * g.W + w]);
          if (v > m || (std::isnan(v) && !std::isnan(m))) m = v, best = h * g.W + w;
        }
      yp[p * g.Q + q] = m;
      ap[p * g.Q + q] = static_cast<int32_t>(best);
    }
  }
}

}  // namespace mn::kernels::detail
