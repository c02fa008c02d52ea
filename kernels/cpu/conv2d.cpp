// CPU conv2d: the direct loop nest (Conv2dAlgo::Direct, the oracle) and the fast
// path (Conv2dAlgo::Gemm), one GEMM per image over the (C*R*S, P*Q) column
// matrix col_n of im2col:
//   forward          Y_n (K, PQ)    = W (K, CRS) * col_n (CRS, PQ)
//   backward-data    col (CRS, PQ)  = W^T * dY_n, then col2im (scatter-add) into dX_n
//   backward-weight  dW^T (CRS, K) += col_n (CRS, PQ) * dY_n^T, transposed into dW
//                    once at the end
// Forward and backward-weight never materialise col_n: the GEMM packs its panels
// straight from the image through a row source (implicit GEMM,
// detail::gemm_cpu_rows_*), which saves writing and re-reading a C*R*S*P*Q
// buffer per image (22 MB for Koch's 7x7 layer, far beyond L2). Backward-weight
// computes dW^T so that col_n is the A operand (rows contiguous in PQ) instead
// of a transposed B operand, whose packing gathered one element per cache line.
// Both give the same sums in the same order as the im2col version (products
// commute; alpha = beta = 1 write-backs round once in either kernel), so the
// results are bit-identical to it. Outputs under 64 positions (P*Q < kSmallPQ)
// run forward and backward-data as one product over all images (see
// batch_images). Backward-data keeps the materialised col and
// col2im: its implicit form (a full correlation of dY with the flipped kernel)
// needs ~30 % more multiply-adds at these shapes (zero padding).
// Images are spread over the thread pool in contiguous chunks (one column buffer
// per thread; the GEMM inside then runs serially because parallel_for does not
// nest). With a single image the GEMM itself is parallel instead. Backward-weight
// accumulates one partial per chunk of images and sums them in chunk order; its
// chunks are fixed (min(N, 16), not one per thread), so the rounding of the sum,
// and the result, is the same for any number of threads.
// Float stride-1 layers on small maps bypass all of this for a vectorised direct
// convolution (kernels/cpu/conv2d_direct_avx2.cpp; when: see direct_ok and
// direct_data_kernel below).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/conv2d.h"
#include "kernels/cpu/conv2d_direct.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_internal.h"
#include "kernels/gemm_config.h"
#include "runtime/cpu_features.h"
#include "runtime/parallel.h"

namespace mn::kernels {

namespace {
// Initialised from MN_CONV_CPU_DIRECT (unset or anything but "0": on), as the
// CUDA speed-up switches of kernels/matmul.cpp.
std::atomic<bool> g_vector_direct{[] {
  const char* e = std::getenv("MN_CONV_CPU_DIRECT");
  return e == nullptr || std::strcmp(e, "0") != 0;
}()};
}  // namespace
void set_conv2d_cpu_vector_direct(bool on) { g_vector_direct.store(on); }
bool conv2d_cpu_vector_direct() { return g_vector_direct.load(); }

namespace {

// ---- the vectorised direct path (kernels/cpu/conv2d_direct_avx2.cpp) -----------
// Taken for float stride-1 layers whose zero-padded input image fits in L2
// (<= 256 KiB) with a multiple of 8 output channels and a reduction depth
// C*R*S of 64 (the forward: 16) to 1024: the conv4 trunk's 3x3 layers after the
// first and the sampling net's second layer, all three passes, and the sampling
// net's first layer forward (A/B on the 2-core AVX2 EPYC,
// 2026-11-27, batch 128: conv4 block 2 forward 26.6 -> 13.3 ms, block 3 8.6 ->
// 3.3 ms, the sampling net's conv2 15.9 -> 7.4 ms; bench/README.md). Koch's
// layers 3 and 4 (depth 2048) were no faster (layer 4 forward 5.1 -> 5.8 ms):
// the GEMM path already runs them near the micro-kernel's speed. Backward-data
// takes one of two kernels (see direct_data_kernel): the forward correlation of
// dy padded by R-1-ph (computes H*W outputs at the full depth: 1.25x the
// forward work or less only for 3x3 "same" layers), or a scatter kernel that
// does exactly the forward's work at any padding, which serves the unpadded
// 5x5 layer (sampling conv2 backward-data 12.8 -> 7.8 ms, medians of 10
// alternating rounds, 2026-11-27) and conv4 block 4's 3x3 maps. Everything
// else, double, the scalar ISA and a GEMM variant forced by
// set_cpu_gemm_variant keep the implicit GEMM. On AVX-512 CPUs the same AVX2
// kernel runs (not yet measured there against the AVX-512 GEMM path).
constexpr int64_t kDirectMaxImageBytes = 256 * 1024;
constexpr int64_t kDirectMinDepth = 64, kDirectMaxDepth = 1024;
// The forward also for shallower layers: the sampling net's conv1 (1 -> 32, 5x5,
// depth 25) ran 2.46-2.75 ms on the GEMM path and 1.58-1.87 ms here (batch 128,
// 3 alternating runs, 2026-11-27 evening; PyTorch 2.02 ms). Its backward-weight
// stays on the GEMM path (the direct one measured 2x slower at depth 25: the dy
// transposition dominates).
constexpr int64_t kDirectMinDepthForward = 16;

bool direct_ok(const detail::DirectConv& d, int64_t min_depth = kDirectMinDepth) {
  const int64_t depth = d.Ci * d.R * d.S;
  return conv2d_cpu_vector_direct() && cpu_isa() != CpuIsa::Scalar &&
         cpu_gemm_variant() == CpuGemmVariant::Auto && d.Co % 8 == 0 && depth >= min_depth &&
         depth <= kDirectMaxDepth && d.ph >= 0 && d.ph < d.R && d.pw >= 0 && d.pw < d.S &&
         d.Ci * (d.H + 2 * d.ph) * (d.W + 2 * d.pw) * int64_t(sizeof(float)) <= kDirectMaxImageBytes;
}
inline bool unit_stride(const Conv2dGeom& g) {
  return g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1;
}
// The forward convolution as a DirectConv (x -> y).
detail::DirectConv direct_forward(const Conv2dGeom& g) {
  return {g.N, g.C, g.H, g.W, g.K, g.R, g.S, g.ph, g.pw};
}
// Backward-data as the forward correlation of dy, padded by (R-1-ph, S-1-pw),
// with w'[c, k, r, s] = w[k, c, R-1-r, S-1-s] (dy -> dx).
detail::DirectConv direct_backward_data(const Conv2dGeom& g) {
  return {g.N, g.K, g.P, g.Q, g.C, g.R, g.S, g.R - 1 - g.ph, g.S - 1 - g.pw};
}

// Backward-data's kernel: the flipped correlation (Flip) where it does at most
// 1.25x the work and the map has more than kScatterMaxPQ positions, else the
// scatter kernel (conv2d_direct_avx2.cpp), which does the forward's work at any
// padding. Measured on the 2-core AVX2 EPYC, batch 128, bench_conv medians of
// alternating runs (2026-11-27): the sampling net's conv2 (flip: 2.25x the
// work) takes the scatter; conv4 block 2 (14x14) flip 14.8 vs scatter 16.2 ms
// and block 3 (7x7) 4.14 vs 4.73 ms (6 rounds) keep the flip; block 4 (3x3
// maps) scatter 0.99 vs flip 1.11 ms (8 rounds; 1.02 vs 1.03 in 6 more): a
// small gain near the noise, likely because the flip pads every 3x3 dy map to
// 5x5 (192 copies of 3-float rows per image) for ~0.7 MFLOP of work. The
// threshold lies between the measured 9 and 49 positions.
enum class DirectData { None, Flip, Scatter };
constexpr int64_t kScatterMaxPQ = 16;
DirectData direct_data_kernel(const Conv2dGeom& g) {
  if (!unit_stride(g)) return DirectData::None;
  if (4 * g.H * g.W <= 5 * g.P * g.Q && g.P * g.Q > kScatterMaxPQ &&
      direct_ok(direct_backward_data(g)))
    return DirectData::Flip;
  return direct_ok(direct_forward(g)) ? DirectData::Scatter : DirectData::None;
}

}  // namespace

bool conv2d_cpu_vector_direct_applies(const Conv2dGeom& g, Conv2dPass pass) {
  if (pass == Conv2dPass::BackwardData) return direct_data_kernel(g) != DirectData::None;
  const int64_t min_depth = pass == Conv2dPass::Forward ? kDirectMinDepthForward : kDirectMinDepth;
  return unit_stride(g) && direct_ok(direct_forward(g), min_depth);
}

namespace {

// Packs the weights, weight(o, i, r, s) read through `at`, and runs the kernel.
template <typename F>
void run_direct(const detail::DirectConv& d, const float* x, F&& at, const float* bias, float* y) {
  thread_local std::vector<float> wp;
  wp.resize(static_cast<size_t>(detail::direct_packed_size(d)));
  detail::pack_direct_weights(d, wp.data(), at);
  detail::direct_conv_avx2(d, x, wp.data(), bias, y);
}

bool try_direct_forward(const Conv2dGeom& g, const float* x, const float* w, const float* b,
                        float* y) {
  if (!conv2d_cpu_vector_direct_applies(g, Conv2dPass::Forward)) return false;
  const int64_t CRS = g.C * g.R * g.S;
  run_direct(direct_forward(g), x, [&](int64_t o, int64_t i, int64_t r, int64_t s) {
    return w[o * CRS + (i * g.R + r) * g.S + s];
  }, b, y);
  return true;
}
template <typename T>
bool try_direct_forward(const Conv2dGeom&, const T*, const T*, const T*, T*) {
  return false;
}

bool try_direct_backward_data(const Conv2dGeom& g, const float* dy, const float* w, float* dx) {
  const DirectData kernel = direct_data_kernel(g);
  if (kernel == DirectData::None) return false;
  if (kernel == DirectData::Scatter) {
    const detail::DirectConv d = direct_forward(g);
    thread_local std::vector<float> wpT;
    wpT.resize(static_cast<size_t>(detail::direct_data_packed_size(d)));
    detail::pack_direct_data_weights(d, w, wpT.data());
    detail::direct_conv_data_avx2(d, dy, wpT.data(), dx);
    return true;
  }
  const int64_t CRS = g.C * g.R * g.S;
  run_direct(direct_backward_data(g), dy, [&](int64_t c, int64_t k, int64_t r, int64_t s) {
    return w[k * CRS + (c * g.R + (g.R - 1 - r)) * g.S + (g.S - 1 - s)];
  }, nullptr, dx);
  return true;
}
template <typename T>
bool try_direct_backward_data(const Conv2dGeom&, const T*, const T*, T*) {
  return false;
}

bool try_direct_backward_weight(const Conv2dGeom& g, const float* x, const float* dy, float* dw) {
  if (!conv2d_cpu_vector_direct_applies(g, Conv2dPass::BackwardWeight)) return false;
  detail::direct_conv_weight_avx2(direct_forward(g), x, dy, dw);
  return true;
}
template <typename T>
bool try_direct_backward_weight(const Conv2dGeom&, const T*, const T*, T*) {
  return false;
}

// [lo, hi) of the output positions q for which 0 <= q*stride + off < limit.
inline void valid_range(int64_t off, int64_t stride, int64_t limit, int64_t Q, int64_t& lo,
                        int64_t& hi) {
  lo = off >= 0 ? 0 : (-off + stride - 1) / stride;
  hi = limit - off <= 0 ? 0 : (limit - off + stride - 1) / stride;
  hi = std::min(hi, Q);
  lo = std::min(lo, hi);
}

// im2col as a row source, never materialised: elements [j0, j0+n) of row
// (c, r, s) of the (C*R*S, N*P*Q) column matrix of the images x, image after
// image (column j is output position j % PQ of image j / PQ) into dst.
template <typename T>
struct Im2colRows {
  const Conv2dGeom* g;
  const T* x;  // (N, C, H, W), from the first image of the product

  // Positions [pos, pos+n) of one image (all within its P*Q).
  static void fill_image(const Conv2dGeom& g, const T* x, int64_t row, int64_t pos, int64_t n,
                         T* dst) {
    const int64_t s = row % g.S, r = (row / g.S) % g.R, c = row / (g.S * g.R);
    const int64_t woff = s * g.dw - g.pw;
    int64_t q0, q1;
    valid_range(woff, g.sw, g.W, g.Q, q0, q1);
    int64_t p = pos / g.Q, q = pos % g.Q;
    while (n > 0) {
      const int64_t len = std::min(n, g.Q - q), qe = q + len;  // [q, qe) of output row p
      const int64_t h = p * g.sh - g.ph + r * g.dh;
      if (h < 0 || h >= g.H) {
        std::fill(dst, dst + len, T(0));
      } else {
        const T* src = x + (c * g.H + h) * g.W + woff;
        const int64_t a = std::clamp(q0, q, qe), b = std::clamp(q1, a, qe);
        std::fill(dst, dst + (a - q), T(0));
        if (g.sw == 1) {
          std::memcpy(dst + (a - q), src + a, sizeof(T) * (b - a));
        } else {
          for (int64_t i = a; i < b; ++i) dst[i - q] = src[i * g.sw];
        }
        std::fill(dst + (b - q), dst + len, T(0));
      }
      dst += len;
      n -= len;
      ++p;
      q = 0;
    }
  }

  static void fill(const void* ctx, int64_t row, int64_t j0, int64_t n, T* dst) {
    const Im2colRows& self = *static_cast<const Im2colRows*>(ctx);
    const Conv2dGeom& g = *self.g;
    const int64_t PQ = g.P * g.Q, CHW = g.C * g.H * g.W;
    while (n > 0) {
      const int64_t img = j0 / PQ, pos = j0 % PQ, len = std::min(n, PQ - pos);
      fill_image(g, self.x + img * CHW, row, pos, len, dst);
      dst += len, j0 += len, n -= len;
    }
  }
  detail::GemmRows<T> rows() const { return {&Im2colRows::fill, this}; }
};

// dY (N, K, P*Q) read as the (K, N*P*Q) matrix, images side by side.
template <typename T>
struct DyRows {
  const Conv2dGeom* g;
  const T* dy;
  static void fill(const void* ctx, int64_t k, int64_t j0, int64_t n, T* dst) {
    const DyRows& self = *static_cast<const DyRows*>(ctx);
    const int64_t PQ = self.g->P * self.g->Q, K = self.g->K;
    while (n > 0) {
      const int64_t img = j0 / PQ, pos = j0 % PQ, len = std::min(n, PQ - pos);
      std::memcpy(dst, self.dy + (img * K + k) * PQ + pos, sizeof(T) * len);
      dst += len, j0 += len, n -= len;
    }
  }
  detail::GemmRows<T> rows() const { return {&DyRows::fill, this}; }
};

// Small outputs (Koch's last layer: 6 x 6) are better as one product over all
// images in forward and backward-data: per image, P*Q < 64 fills fewer than
// four 16-wide slivers (padding waste). One product is parallel inside the GEMM;
// every element is still summed over C*R*S (or K) in the same order, so the
// results are unchanged and independent of the thread count.
constexpr int64_t kSmallPQ = 64;
inline bool batch_images(const Conv2dGeom& g) { return g.P * g.Q < kSmallPQ; }

// col: (C*R*S, P*Q), rows ld apart -> dx: (C, H, W), accumulated (dx must be zeroed first).
template <typename T>
void col2im(const Conv2dGeom& g, const T* col, int64_t ld, T* dx) {
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t r = 0; r < g.R; ++r)
      for (int64_t s = 0; s < g.S; ++s) {
        const T* src = col + ((c * g.R + r) * g.S + s) * ld;
        const int64_t woff = s * g.dw - g.pw;
        int64_t q0, q1;
        valid_range(woff, g.sw, g.W, g.Q, q0, q1);
        for (int64_t p = 0; p < g.P; ++p) {
          const int64_t h = p * g.sh - g.ph + r * g.dh;
          if (h < 0 || h >= g.H) continue;
          T* d = dx + (c * g.H + h) * g.W + woff;
          const T* sp = src + p * g.Q;
          for (int64_t q = q0; q < q1; ++q) d[q * g.sw] += sp[q];
        }
      }
}

// A pointwise convolution reads the image itself as its column matrix.
inline bool is_pointwise(const Conv2dGeom& g) {
  return g.R == 1 && g.S == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
}

// Per-thread scratch, reused across calls (grows, never shrinks). Slot 0 holds
// backward-data's columns; slot 1 backward-weight's per-chunk partial sums;
// slot 2 the batched forward's (K, N*P*Q) product.
template <typename T, int Slot = 0>
T* scratch(int64_t n) {
  thread_local std::vector<T> buf;
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(static_cast<size_t>(n));
  return buf.data();
}

constexpr int64_t kWeightGradChunks = 16;

// Runs fn(first_image, end_image) over `chunks` contiguous image ranges, in parallel.
template <typename F>
void for_image_chunks(int64_t N, int64_t chunks, F&& fn) {
  parallel_for(0, chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t ci = cb; ci < ce; ++ci) fn(ci, ci * N / chunks, (ci + 1) * N / chunks);
  });
}

inline int64_t num_chunks(int64_t N) {
  return std::max<int64_t>(1, std::min<int64_t>(N, num_threads()));
}

// Calls one_image(n) for every image: serially when there is one chunk (the GEMM
// inside then runs in parallel), else over contiguous image chunks in parallel.
template <typename F>
void for_each_image(int64_t N, F&& one_image) {
  const int64_t chunks = num_chunks(N);
  if (chunks == 1) {
    for (int64_t n = 0; n < N; ++n) one_image(n);
    return;
  }
  for_image_chunks(N, chunks, [&](int64_t, int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) one_image(n);
  });
}

// ---- direct loop nests (oracle) ----------------------------------------------
template <typename T>
void forward_direct(const Conv2dGeom& g, const T* x, const T* w, const T* b, T* y) {
  parallel_for(0, g.N * g.K, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t n = i / g.K, k = i % g.K;
      for (int64_t p = 0; p < g.P; ++p)
        for (int64_t q = 0; q < g.Q; ++q) {
          T acc = b ? b[k] : T(0);
          for (int64_t c = 0; c < g.C; ++c)
            for (int64_t r = 0; r < g.R; ++r) {
              const int64_t h = p * g.sh - g.ph + r * g.dh;
              if (h < 0 || h >= g.H) continue;
              for (int64_t s = 0; s < g.S; ++s) {
                const int64_t ww = q * g.sw - g.pw + s * g.dw;
                if (ww < 0 || ww >= g.W) continue;
                acc += w[((k * g.C + c) * g.R + r) * g.S + s] * x[((n * g.C + c) * g.H + h) * g.W + ww];
              }
            }
          y[((n * g.K + k) * g.P + p) * g.Q + q] = acc;
        }
    }
  });
}

template <typename T>
void backward_data_direct(const Conv2dGeom& g, const T* dy, const T* w, T* dx) {
  parallel_for(0, g.N, 1, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      T* dxn = dx + n * g.C * g.H * g.W;
      std::fill(dxn, dxn + g.C * g.H * g.W, T(0));
      for (int64_t k = 0; k < g.K; ++k)
        for (int64_t p = 0; p < g.P; ++p)
          for (int64_t q = 0; q < g.Q; ++q) {
            const T d = dy[((n * g.K + k) * g.P + p) * g.Q + q];
            for (int64_t c = 0; c < g.C; ++c)
              for (int64_t r = 0; r < g.R; ++r) {
                const int64_t h = p * g.sh - g.ph + r * g.dh;
                if (h < 0 || h >= g.H) continue;
                for (int64_t s = 0; s < g.S; ++s) {
                  const int64_t ww = q * g.sw - g.pw + s * g.dw;
                  if (ww < 0 || ww >= g.W) continue;
                  dxn[(c * g.H + h) * g.W + ww] += d * w[((k * g.C + c) * g.R + r) * g.S + s];
                }
              }
          }
    }
  });
}

template <typename T>
void backward_weight_direct(const Conv2dGeom& g, const T* x, const T* dy, T* dw) {
  parallel_for(0, g.K, 1, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k)
      for (int64_t c = 0; c < g.C; ++c)
        for (int64_t r = 0; r < g.R; ++r)
          for (int64_t s = 0; s < g.S; ++s) {
            T acc = 0;
            for (int64_t n = 0; n < g.N; ++n)
              for (int64_t p = 0; p < g.P; ++p) {
                const int64_t h = p * g.sh - g.ph + r * g.dh;
                if (h < 0 || h >= g.H) continue;
                for (int64_t q = 0; q < g.Q; ++q) {
                  const int64_t ww = q * g.sw - g.pw + s * g.dw;
                  if (ww < 0 || ww >= g.W) continue;
                  acc += dy[((n * g.K + k) * g.P + p) * g.Q + q] * x[((n * g.C + c) * g.H + h) * g.W + ww];
                }
              }
            dw[((k * g.C + c) * g.R + r) * g.S + s] = acc;
          }
  });
}

}  // namespace

// ---- public entry points -------------------------------------------------------
template <typename T>
void conv2d_forward_cpu(const Conv2dGeom& g, const T* x, const T* w, const T* b, T* y,
                        Conv2dAlgo algo) {
  if (algo == Conv2dAlgo::Direct) return forward_direct(g, x, w, b, y);
  if (try_direct_forward(g, x, w, b, y)) return;
  const int64_t PQ = g.P * g.Q, CRS = g.C * g.R * g.S, CHW = g.C * g.H * g.W;
  const bool pw = is_pointwise(g);
  if (!pw && batch_images(g)) {  // Y_all (K, N*PQ) = W * col_all, then (N, K, PQ) + bias
    const int64_t NPQ = g.N * PQ;
    T* yall = scratch<T, 2>(g.K * NPQ);
    const Im2colRows<T> src{&g, x};
    detail::gemm_cpu_rows_b<T>(false, g.K, NPQ, CRS, T(1), w, CRS, src.rows(), T(0), yall, NPQ);
    parallel_for(0, g.N * g.K, std::max<int64_t>(1, 4096 / PQ), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t n = i / g.K, k = i % g.K;
        const T* s = yall + k * NPQ + n * PQ;
        T* d = y + i * PQ;
        const T bk = b ? b[k] : T(0);
        for (int64_t j = 0; j < PQ; ++j) d[j] = b ? s[j] + bk : s[j];
      }
    });
    return;
  }
  auto one_image = [&](int64_t n) {
    T* yn = y + n * g.K * PQ;
    if (pw) {
      gemm_cpu<T>(false, false, g.K, PQ, CRS, T(1), w, CRS, x + n * CHW, PQ, T(0), yn, PQ);
    } else {
      const Im2colRows<T> src{&g, x + n * CHW};
      detail::gemm_cpu_rows_b<T>(false, g.K, PQ, CRS, T(1), w, CRS, src.rows(), T(0), yn, PQ);
    }
    if (b)
      for (int64_t k = 0; k < g.K; ++k) {
        T* row = yn + k * PQ;
        const T bk = b[k];
        for (int64_t i = 0; i < PQ; ++i) row[i] += bk;
      }
  };
  for_each_image(g.N, one_image);
}

template <typename T>
void conv2d_backward_data_cpu(const Conv2dGeom& g, const T* dy, const T* w, T* dx,
                              Conv2dAlgo algo) {
  if (algo == Conv2dAlgo::Direct) return backward_data_direct(g, dy, w, dx);
  if (try_direct_backward_data(g, dy, w, dx)) return;
  const int64_t PQ = g.P * g.Q, CRS = g.C * g.R * g.S, CHW = g.C * g.H * g.W;
  const bool pw = is_pointwise(g);
  if (!pw && batch_images(g)) {  // col_all (CRS, N*PQ) = W^T * dY_all, col2im per image
    const int64_t NPQ = g.N * PQ;
    T* col = scratch<T>(CRS * NPQ);
    const DyRows<T> src{&g, dy};
    detail::gemm_cpu_rows_b<T>(true, CRS, NPQ, g.K, T(1), w, CRS, src.rows(), T(0), col, NPQ);
    parallel_for(0, g.N, 1, [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) {
        T* dxn = dx + n * CHW;
        std::fill(dxn, dxn + CHW, T(0));
        col2im(g, col + n * PQ, NPQ, dxn);
      }
    });
    return;
  }
  auto one_image = [&](int64_t n) {
    T* dxn = dx + n * CHW;
    const T* dyn = dy + n * g.K * PQ;
    if (pw) {  // dX_n (C, HW) = W^T (C, K) * dY_n (K, HW)
      gemm_cpu<T>(true, false, CRS, PQ, g.K, T(1), w, CRS, dyn, PQ, T(0), dxn, PQ);
      return;
    }
    T* col = scratch<T>(CRS * PQ);
    gemm_cpu<T>(true, false, CRS, PQ, g.K, T(1), w, CRS, dyn, PQ, T(0), col, PQ);
    std::fill(dxn, dxn + CHW, T(0));
    col2im(g, col, PQ, dxn);
  };
  for_each_image(g.N, one_image);
}

template <typename T>
void conv2d_backward_weight_cpu(const Conv2dGeom& g, const T* x, const T* dy, T* dw,
                                Conv2dAlgo algo) {
  if (algo == Conv2dAlgo::Direct) return backward_weight_direct(g, x, dy, dw);
  if (try_direct_backward_weight(g, x, dy, dw)) return;
  const int64_t PQ = g.P * g.Q, CRS = g.C * g.R * g.S, CHW = g.C * g.H * g.W;
  const int64_t KCRS = g.K * CRS;
  const bool pw = is_pointwise(g);
  // Accumulates dW^T (CRS, K) of images [n0, n1) into out (overwritten by the first image).
  auto images = [&](int64_t n0, int64_t n1, T* out) {
    if (n0 == n1) {
      std::fill(out, out + KCRS, T(0));
      return;
    }
    for (int64_t n = n0; n < n1; ++n) {
      const T* dyn = dy + n * g.K * PQ;
      const T beta = n == n0 ? T(0) : T(1);
      if (pw) {
        gemm_cpu<T>(false, true, CRS, g.K, PQ, T(1), x + n * CHW, PQ, dyn, PQ, beta, out, g.K);
      } else {
        const Im2colRows<T> src{&g, x + n * CHW};
        detail::gemm_cpu_rows_a<T>(src.rows(), true, CRS, g.K, PQ, T(1), dyn, PQ, beta, out, g.K);
      }
    }
  };
  // Thread-count independent: the chunks do not depend on num_threads() (with one
  // thread they simply run one after another). Unlike forward and backward-data,
  // small outputs keep the per-image products: one product over all images would
  // split its depth N*P*Q into KC blocks across image boundaries and round
  // differently from main (measured gain only ~15 % of this layer's pass).
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(g.N, kWeightGradChunks));
  T* partial = scratch<T, 1>(chunks * KCRS);  // chunk ci: dW^T (CRS, K) at partial + ci*KCRS
  if (chunks == 1) {
    images(0, g.N, partial);
  } else {
    for_image_chunks(g.N, chunks, [&](int64_t ci, int64_t n0, int64_t n1) {
      images(n0, n1, partial + ci * KCRS);
    });
  }
  // partial[0] += partial[1] + partial[2] + ..., in chunk order for every element,
  // then dw (K, CRS) = partial[0]^T.
  if (chunks > 1)
    parallel_for(0, KCRS, 16384, [&](int64_t i0, int64_t i1) {
      for (int64_t ci = 1; ci < chunks; ++ci) {
        const T* src = partial + ci * KCRS;
        for (int64_t i = i0; i < i1; ++i) partial[i] += src[i];
      }
    });
  parallel_for(0, g.K, std::max<int64_t>(1, 16384 / CRS), [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k)
      for (int64_t i = 0; i < CRS; ++i) dw[k * CRS + i] = partial[i * g.K + k];
  });
}

template <typename T>
void conv2d_backward_bias_cpu(const Conv2dGeom& g, const T* dy, T* db) {
  const int64_t PQ = g.P * g.Q;
  // 16 interleaved partial sums per channel, added in a fixed order (so the
  // result does not depend on the thread count): one running sum is a chain of
  // dependent adds, ~4 cycles per element, and this took 4 % of the conv4
  // preset's training step (perf, 2026-11-26); the lanes vectorise.
  constexpr int kLanes = 16;
  parallel_for(0, g.K, 1, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k) {
      T acc[kLanes] = {};
      for (int64_t n = 0; n < g.N; ++n) {
        const T* __restrict row = dy + (n * g.K + k) * PQ;
        int64_t i = 0;
        for (; i + kLanes <= PQ; i += kLanes)
          for (int l = 0; l < kLanes; ++l) acc[l] += row[i + l];
        for (; i < PQ; ++i) acc[i % kLanes] += row[i];
      }
      for (int w = kLanes / 2; w >= 1; w /= 2)  // pairwise, fixed order
        for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
      db[k] = acc[0];
    }
  });
}

#define MN_CONV2D_CPU_INSTANTIATE(T)                                                        \
  template void conv2d_forward_cpu<T>(const Conv2dGeom&, const T*, const T*, const T*, T*,   \
                                      Conv2dAlgo);                                          \
  template void conv2d_backward_data_cpu<T>(const Conv2dGeom&, const T*, const T*, T*,       \
                                            Conv2dAlgo);                                    \
  template void conv2d_backward_weight_cpu<T>(const Conv2dGeom&, const T*, const T*, T*,     \
                                              Conv2dAlgo);                                  \
  template void conv2d_backward_bias_cpu<T>(const Conv2dGeom&, const T*, T*);
MN_CONV2D_CPU_INSTANTIATE(float)
MN_CONV2D_CPU_INSTANTIATE(double)
#undef MN_CONV2D_CPU_INSTANTIATE

}  // namespace mn::kernels
