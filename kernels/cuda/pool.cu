// CUDA max / average pooling (semantics in kernels/pool.h). Forward: one thread
// per output element. Backward: one thread per INPUT element, gathering from the
// outputs whose windows cover it (max pool: those whose saved argmax is this
// element) — deterministic, no atomics, correct for overlapping windows.
#include "kernels/pool.h"
#include "runtime/cuda_check.h"

namespace mn::kernels {
namespace {

struct PG {
  int N, C, H, W, P, Q, kh, kw, sh, sw, ph, pw;
};
PG dev(const Pool2dGeom& g) {
  return PG{int(g.N), int(g.C), int(g.H), int(g.W), int(g.P), int(g.Q),
            int(g.kh), int(g.kw), int(g.sh), int(g.sw), int(g.ph), int(g.pw)};
}

// Range of outputs [p0, p1) whose window covers input row h.
__device__ inline void covering(int h, int k, int s, int pad, int P, int& p0, int& p1) {
  const int hp = h + pad;
  p0 = hp < k ? 0 : (hp - k) / s + 1;
  p1 = min(hp / s + 1, P);
}

template <typename T>
__global__ void max_pool_fwd(PG g, const T* __restrict__ x, T* __restrict__ y,
                             int32_t* __restrict__ am, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int q = int(i % g.Q), p = int((i / g.Q) % g.P);
    const int64_t plane = i / (int64_t(g.P) * g.Q);
    const T* xp = x + plane * g.H * g.W;
    const int h0 = max(p * g.sh - g.ph, 0), h1 = min(p * g.sh - g.ph + g.kh, g.H);
    const int w0 = max(q * g.sw - g.pw, 0), w1 = min(q * g.sw - g.pw + g.kw, g.W);
    int best = h0 * g.W + w0;
    T m = xp[best];
    for (int h = h0; h < h1; ++h)
      for (int w = w0; w < w1; ++w) {
        const T v = xp[h * g.W + w];
        if (v > m || (isnan(v) && !isnan(m))) m = v, best = h * g.W + w;
      }
    y[i] = m;
    am[i] = best;
  }
}

template <typename T>
__global__ void max_pool_bwd(PG g, const T* __restrict__ dy, const int32_t* __restrict__ am,
                             T* __restrict__ dx, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int w = int(i % g.W), h = int((i / g.W) % g.H);
    const int64_t plane = i / (int64_t(g.H) * g.W);
    const int self = h * g.W + w;
    int p0, p1, q0, q1;
    covering(h, g.kh, g.sh, g.ph, g.P, p0, p1);
    covering(w, g.kw, g.sw, g.pw, g.Q, q0, q1);
    const int64_t base = plane * g.P * g.Q;
    T acc = 0;
    for (int p = p0; p < p1; ++p)
      for (int q = q0; q < q1; ++q)
        if (am[base + p * g.Q + q] == self) acc += dy[base + p * g.Q + q];
    dx[i] = acc;
  }
}

template <typename T>
__global__ void avg_pool_fwd(PG g, const T* __restrict__ x, T* __restrict__ y, bool cip,
                             int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int q = int(i % g.Q), p = int((i / g.Q) % g.P);
    const int64_t plane = i / (int64_t(g.P) * g.Q);
    const T* xp = x + plane * g.H * g.W;
    const int h0 = max(p * g.sh - g.ph, 0), h1 = min(p * g.sh - g.ph + g.kh, g.H);
    const int w0 = max(q * g.sw - g.pw, 0), w1 = min(q * g.sw - g.pw + g.kw, g.W);
    T s = 0;
    for (int h = h0; h < h1; ++h)
      for (int w = w0; w < w1; ++w) s += xp[h * g.W + w];
    y[i] = s / T(cip ? g.kh * g.kw : (h1 - h0) * (w1 - w0));
  }
}

template <typename T>
__global__ void avg_pool_bwd(PG g, const T* __restrict__ dy, T* __restrict__ dx, bool cip,
                             int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int w = int(i % g.W), h = int((i / g.W) % g.H);
    const int64_t plane = i / (int64_t(g.H) * g.W);
    int p0, p1, q0, q1;
    covering(h, g.kh, g.sh, g.ph, g.P, p0, p1);
    covering(w, g.kw, g.sw, g.pw, g.Q, q0, q1);
    const T* dyp = dy + plane * g.P * g.Q;
    T acc = 0;
    for (int p = p0; p < p1; ++p) {
      const int hh = min(p * g.sh - g.ph + g.kh, g.H) - max(p * g.sh - g.ph, 0);
      for (int q = q0; q < q1; ++q) {
        const int ww = min(q * g.sw - g.pw + g.kw, g.W) - max(q * g.sw - g.pw, 0);
        acc += dyp[p * g.Q + q] / T(cip ? g.kh * g.kw : hh * ww);
      }
    }
    dx[i] = acc;
  }
}

}  // namespace

template <typename T>
void max_pool2d_forward_cuda(const Pool2dGeom& g, const T* x, T* y, int32_t* argmax) {
  const int64_t total = g.N * g.C * g.P * g.Q;
  max_pool_fwd<T><<<cuda::grid_for(total), 256, 0, cuda::stream()>>>(dev(g), x, y, argmax, total);
  CUDA_CHECK_LAUNCH("max_pool_fwd");
}
template <typename T>
void max_pool2d_backward_cuda(const Pool2dGeom& g, const T* dy, const int32_t* argmax, T* dx) {
  const int64_t total = g.N * g.C * g.H * g.W;
  max_pool_bwd<T><<<cuda::grid_for(total), 256, 0, cuda::stream()>>>(dev(g), dy, argmax, dx, total);
  CUDA_CHECK_LAUNCH("max_pool_bwd");
}
template <typename T>
void avg_pool2d_forward_cuda(const Pool2dGeom& g, const T* x, T* y, bool cip) {
  const int64_t total = g.N * g.C * g.P * g.Q;
  avg_pool_fwd<T><<<cuda::grid_for(total), 256, 0, cuda::stream()>>>(dev(g), x, y, cip, total);
  CUDA_CHECK_LAUNCH("avg_pool_fwd");
}
template <typename T>
void avg_pool2d_backward_cuda(const Pool2dGeom& g, const T* dy, T* dx, bool cip) {
  const int64_t total = g.N * g.C * g.H * g.W;
  avg_pool_bwd<T><<<cuda::grid_for(total), 256, 0, cuda::stream()>>>(dev(g), dy, dx, cip, total);
  CUDA_CHECK_LAUNCH("avg_pool_bwd");
}

#define MN_POOL_CUDA_INSTANTIATE(T)                                                             \
  template void max_pool2d_forward_cuda<T>(const Pool2dGeom&, const T*, T*, int32_t*);          \
  template void max_pool2d_backward_cuda<T>(const Pool2dGeom&, const T*, const int32_t*, T*);   \
  template void avg_pool2d_forward_cuda<T>(const Pool2dGeom&, const T*, T*, bool);              \
  template void avg_pool2d_backward_cuda<T>(const Pool2dGeom&, const T*, T*, bool);
MN_POOL_CUDA_INSTANTIATE(float)
MN_POOL_CUDA_INSTANTIATE(double)
#undef MN_POOL_CUDA_INSTANTIATE

}  // namespace mn::kernels
