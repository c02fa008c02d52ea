// Index maths and per-thread bodies of the CUDA pooling kernels (kernels/cuda/pool.cu),
// host + device, so the CPU tests can run them thread by thread against the CPU oracle
// (tests/kernels/test_pool_index.cpp), as kernels/mma_layout.h does for the tensor cores.
//
// 32-bit arithmetic only: a launch covers a slab of (n, c) planes whose input and output
// both hold fewer than 2^31 elements (for_pool_slabs; one slab for every realistic
// tensor, Koch's largest pool input is 150 x 64 x 96 x 96 = 88 M), so every flat index
// is a uint32 and is decoded with FastDiv (one multiply-high, no 64-bit `/` or `%`,
// which cost the old kernels ~1.4 ms of a Koch step). Only the host adds the slab's
// 64-bit plane offset to the base pointers.
//
// Max-pool backward, two forms (semantics in kernels/pool.h):
//   scatter  one thread per OUTPUT writes its whole "cell" (the window, widened to the
//            next window's start and, at the last row / column, to the plane's edge):
//            dy at the argmax, 0 elsewhere. When the windows do not overlap (stride >=
//            kernel: Koch's 2x2 / 2) the cells partition the plane (pool_cell), so
//            every dx element is written exactly once: no fill, no atomics,
//            deterministic.
//   gather   one thread per INPUT element sums dy over the outputs whose window covers
//            it and whose argmax is this element (overlapping windows).
// With Relu, dy counts only where the pooled value is > 0: the gradient into the input
// of a ReLU whose output was pooled (kernels/pool.h, max_pool2d_relu_backward).
#pragma once
#include <climits>
#include <cstdint>

#include "kernels/fastdiv.h"
#include "kernels/pool.h"

namespace mn::kernels::pool_index {

// One launch's geometry in 32 bits (the slab's plane count is implied by `total`).
struct PoolDev {
  int H, W, P, Q, kh, kw, sh, sw, ph, pw;
  FastDiv fW, fH, fQ, fP, fsh, fsw;  // divisors of the flat-index decodes and of covering()
};

// Host: the 32-bit geometry of g (pool2d_geometry checked H*W < 2^31 already).
inline PoolDev make_pool_dev(const Pool2dGeom& g) {
  PoolDev d{};
  d.H = int(g.H), d.W = int(g.W), d.P = int(g.P), d.Q = int(g.Q);
  d.kh = int(g.kh), d.kw = int(g.kw), d.sh = int(g.sh), d.sw = int(g.sw);
  d.ph = int(g.ph), d.pw = int(g.pw);
  d.fW = FastDiv(g.W), d.fH = FastDiv(g.H), d.fQ = FastDiv(g.Q), d.fP = FastDiv(g.P);
  d.fsh = FastDiv(g.sh), d.fsw = FastDiv(g.sw);
  return d;
}

// The windows do not overlap: the scatter backward applies.
MN_HOST_DEVICE inline bool windows_disjoint(int kh, int kw, int sh, int sw) {
  return sh >= kh && sw >= kw;
}

// Host: how many planes one launch may cover so that its input and its output both stay
// below `limit` elements (2^31 - 1 on the device; tests pass small limits). 0 when a
// single plane does not fit: the caller throws.
inline int64_t pool_slab_planes(const Pool2dGeom& g, int64_t limit = INT32_MAX) {
  const int64_t per = g.H * g.W > g.P * g.Q ? g.H * g.W : g.P * g.Q;
  return per > limit ? 0 : limit / (per > 0 ? per : 1);
}

// Host: calls launch(first_plane, planes) for consecutive slabs covering the N*C planes.
template <typename F>
void for_pool_slabs(const char* op, const Pool2dGeom& g, int64_t limit, F&& launch) {
  const int64_t slab = pool_slab_planes(g, limit);
  MN_CHECK(slab > 0, op, ": a plane of input (", g.H, ", ", g.W, ") / output (", g.P, ", ", g.Q,
           ") holds more than ", limit, " elements, beyond the kernels' 32-bit indices");
  const int64_t planes = g.N * g.C;
  for (int64_t p0 = 0; p0 < planes; p0 += slab) launch(p0, planes - p0 < slab ? planes - p0 : slab);
}

// Flat index i = (plane * R + r) * S + s  ->  plane, r, s.
MN_HOST_DEVICE inline void decode3(uint32_t i, const FastDiv& fS, const FastDiv& fR, int& plane,
                                   int& r, int& s) {
  uint32_t t = 0, rr = 0, ss = 0, pl = 0;
  fS.divmod(i, t, ss);
  fR.divmod(t, pl, rr);
  plane = int(pl), r = int(rr), s = int(ss);
}

// Rows [h0, h1) of output row p's window, clipped to the plane.
MN_HOST_DEVICE inline void pool_window(int p, int k, int s, int pad, int H, int& h0, int& h1) {
  const int start = p * s - pad;
  h0 = start > 0 ? start : 0;
  h1 = start + k < H ? start + k : H;
}

// Outputs [p0, p1) whose window covers input row h.
MN_HOST_DEVICE inline void pool_covering(int h, int k, const FastDiv& s, int pad, int P, int& p0,
                                         int& p1) {
  const int hp = h + pad;
  p0 = hp < k ? 0 : int(s.div(uint32_t(hp - k))) + 1;
  const int last = int(s.div(uint32_t(hp))) + 1;
  p1 = last < P ? last : P;
}

// Rows [c0, c1) of output row p's cell: from its window's start (0 for the first) to
// the next window's start (H for the last). For stride >= kernel the cells of p = 0..P-1
// partition [0, H) and each holds its window.
MN_HOST_DEVICE inline void pool_cell(int p, int s, int pad, int P, int H, int& c0, int& c1) {
  c0 = p == 0 ? 0 : p * s - pad;
  const int next = (p + 1) * s - pad;
  c1 = p == P - 1 || next > H ? H : next;
}

MN_HOST_DEVICE inline bool is_nan_hd(double v) { return v != v; }

// ---- per-thread bodies ----------------------------------------------------------
// x, dx: the slab's (planes, H, W); y, am, dy: its (planes, P, Q).

// Output o: the max over its window (first maximum in row-major order, a NaN wins).
template <typename T>
MN_HOST_DEVICE inline void max_pool_fwd_thread(const PoolDev& g, uint32_t o, const T* x, T* y,
                                               int32_t* am) {
  int plane, p, q, h0, h1, w0, w1;
  decode3(o, g.fQ, g.fP, plane, p, q);
  pool_window(p, g.kh, g.sh, g.ph, g.H, h0, h1);
  pool_window(q, g.kw, g.sw, g.pw, g.W, w0, w1);
  const T* xp = x + uint32_t(plane) * uint32_t(g.H * g.W);
  int best = h0 * g.W + w0;
  T m = xp[best];
  for (int h = h0; h < h1; ++h)
    for (int w = w0; w < w1; ++w) {
      const T v = xp[h * g.W + w];
      if (v > m || (is_nan_hd(v) && !is_nan_hd(m))) m = v, best = h * g.W + w;
    }
  y[o] = m;
  am[o] = best;
}

// dy[o], or 0 where the ReLU's pooled output is not > 0 (NaN included).
template <typename T, bool Relu>
MN_HOST_DEVICE inline T pool_grad_term(const T* dy, const T* y, uint32_t o) {
  if (Relu) return y[o] > T(0) ? dy[o] : T(0);
  return dy[o];
}

// Output o writes its whole cell (windows disjoint). T(0) + d: the oracle's sum from 0
// (turns -0 into +0), so the results agree bit for bit.
template <typename T, bool Relu>
MN_HOST_DEVICE inline void max_pool_bwd_scatter_thread(const PoolDev& g, uint32_t o, const T* dy,
                                                       const T* y, const int32_t* am, T* dx) {
  int plane, p, q, r0, r1, c0, c1;
  decode3(o, g.fQ, g.fP, plane, p, q);
  pool_cell(p, g.sh, g.ph, g.P, g.H, r0, r1);
  pool_cell(q, g.sw, g.pw, g.Q, g.W, c0, c1);
  const T d = T(0) + pool_grad_term<T, Relu>(dy, y, o);
  const int a = am[o];
  T* dxp = dx + uint32_t(plane) * uint32_t(g.H * g.W);
  for (int h = r0; h < r1; ++h)
    for (int w = c0; w < c1; ++w) dxp[h * g.W + w] = h * g.W + w == a ? d : T(0);
}

// Input element i sums the gradient of the outputs that picked it.
template <typename T, bool Relu>
MN_HOST_DEVICE inline void max_pool_bwd_gather_thread(const PoolDev& g, uint32_t i, const T* dy,
                                                      const T* y, const int32_t* am, T* dx) {
  int plane, h, w, p0, p1, q0, q1;
  decode3(i, g.fW, g.fH, plane, h, w);
  pool_covering(h, g.kh, g.fsh, g.ph, g.P, p0, p1);
  pool_covering(w, g.kw, g.fsw, g.pw, g.Q, q0, q1);
  const int self = h * g.W + w;
  const uint32_t base = uint32_t(plane) * uint32_t(g.P * g.Q);
  T acc = 0;
  for (int p = p0; p < p1; ++p)
    for (int q = q0; q < q1; ++q) {
      const uint32_t o = base + uint32_t(p * g.Q + q);
      if (am[o] == self) acc += pool_grad_term<T, Relu>(dy, y, o);
    }
  dx[i] = acc;
}

// Average pool, output o.
template <typename T>
MN_HOST_DEVICE inline void avg_pool_fwd_thread(const PoolDev& g, uint32_t o, const T* x, T* y,
                                               bool cip) {
  int plane, p, q, h0, h1, w0, w1;
  decode3(o, g.fQ, g.fP, plane, p, q);
  pool_window(p, g.kh, g.sh, g.ph, g.H, h0, h1);
  pool_window(q, g.kw, g.sw, g.pw, g.W, w0, w1);
  const T* xp = x + uint32_t(plane) * uint32_t(g.H * g.W);
  T s = 0;
  for (int h = h0; h < h1; ++h)
    for (int w = w0; w < w1; ++w) s += xp[h * g.W + w];
  y[o] = s / T(cip ? g.kh * g.kw : (h1 - h0) * (w1 - w0));
}

// Average pool backward, input element i.
template <typename T>
MN_HOST_DEVICE inline void avg_pool_bwd_thread(const PoolDev& g, uint32_t i, const T* dy, T* dx,
                                               bool cip) {
  int plane, h, w, p0, p1, q0, q1;
  decode3(i, g.fW, g.fH, plane, h, w);
  pool_covering(h, g.kh, g.fsh, g.ph, g.P, p0, p1);
  pool_covering(w, g.kw, g.fsw, g.pw, g.Q, q0, q1);
  const T* dyp = dy + uint32_t(plane) * uint32_t(g.P * g.Q);
  T acc = 0;
  for (int p = p0; p < p1; ++p) {
    int a0, a1;
    pool_window(p, g.kh, g.sh, g.ph, g.H, a0, a1);
    for (int q = q0; q < q1; ++q) {
      int b0, b1;
      pool_window(q, g.kw, g.sw, g.pw, g.W, b0, b1);
      acc += dyp[p * g.Q + q] / T(cip ? g.kh * g.kw : (a1 - a0) * (b1 - b0));
    }
  }
  dx[i] = acc;
}

}  // namespace mn::kernels::pool_index
