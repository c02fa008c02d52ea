// CPU PReLU (see kernels/prelu.h): the forward and the input gradient are
// elementwise and parallel over (n, c) planes; the slope gradient is summed per
// channel by one task in a fixed order (eight interleaved partial sums), so it
// does not depend on the thread count. All three loops are branch-free and
// vectorise (the sign of x is data-dependent): branchy versions took 21 %
// (2026-11-26) and 23 % (2026-11-27) of the sampling study's training step.
#include "kernels/prelu.h"

#include <algorithm>
#include <vector>

#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace mn::kernels {

template <typename T>
void prelu_forward_cpu(int64_t N, int64_t C, int64_t S, const T* x, const T* a, int64_t na, T* y) {
  parallel_for(0, N * C, std::max<int64_t>(1, 32768 / std::max<int64_t>(S, 1)), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const T slope = a[na == 1 ? 0 : p % C];
      const T* __restrict xp = x + p * S;
      T* __restrict yp = y + p * S;
      // Branch-free (the sign of x is unpredictable), so it vectorises: for
      // x > 0, x + slope * 0 = x; otherwise 0 + slope * x.
      for (int64_t s = 0; s < S; ++s) yp[s] = std::max(xp[s], T(0)) + slope * std::min(xp[s], T(0));
    }
  });
}

namespace {
// sum_s g[s] * min(x[s], 0) of one (n, c) plane into eight interleaved partial
// sums (lane l takes s = 8i + l) and the tail into lane 0. Written so that GCC
// vectorises it at the baseline SSE2 target: the same loop inside the lambda,
// with the tail in the same array, compiled to scalar compares and branches and
// took 12 % of the sampling study's step (perf, 2026-11-27).
template <typename T>
inline void slope_grad_plane(int64_t S, const T* __restrict xp, const T* __restrict gp, T* acc_out) {
  constexpr int kLanes = 8;
  T acc[kLanes];
  for (int l = 0; l < kLanes; ++l) acc[l] = acc_out[l];
  int64_t s = 0;
  for (; s + kLanes <= S; s += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const T m = xp[s + l] < T(0) ? xp[s + l] : T(0);
      acc[l] += gp[s + l] * m;
    }
  T tail = acc[0];
  for (; s < S; ++s) tail += gp[s] * (xp[s] < T(0) ? xp[s] : T(0));
  acc[0] = tail;
  for (int l = 0; l < kLanes; ++l) acc_out[l] = acc[l];
}
}  // namespace

template <typename T>
void prelu_backward_cpu(int64_t N, int64_t C, int64_t S, const T* x, const T* a, int64_t na, const T* gy, T* gx,
                        T* ga) {
  parallel_for(0, N * C, std::max<int64_t>(1, 32768 / std::max<int64_t>(S, 1)), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const T slope = a[na == 1 ? 0 : p % C];
      const T* __restrict xp = x + p * S;
      const T* __restrict gp = gy + p * S;
      T* __restrict op = gx + p * S;
      // The factor in a local first: `gp * (x > 0 ? 1 : slope)` in one
      // expression compiled to a branch per element (perf: 11 % of the sampling
      // study's step); this form vectorises to a compare and a mask.
      for (int64_t s = 0; s < S; ++s) {
        const T f = xp[s] > T(0) ? T(1) : slope;
        op[s] = gp[s] * f;
      }
    }
  });
  // Per channel: sum over n in order of each plane's eight-lane sums, then the
  // lanes in order (fixed, so independent of the thread count).
  std::vector<T> per_channel(static_cast<size_t>(C));
  if (S == 1) {  // (N, C) rows, as after a dense layer: vectorise across channels
    constexpr int64_t kBlock = 64;
    parallel_for(0, (C + kBlock - 1) / kBlock, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t c0 = blk * kBlock, c1 = std::min(C, c0 + kBlock);
        T acc[kBlock] = {};
        for (int64_t n = 0; n < N; ++n) {
          const T* __restrict xp = x + n * C;
          const T* __restrict gp = gy + n * C;
          for (int64_t c = c0; c < c1; ++c) {
            const T m = xp[c] < T(0) ? xp[c] : T(0);
            acc[c - c0] += gp[c] * m;
          }
        }
        for (int64_t c = c0; c < c1; ++c) per_channel[static_cast<size_t>(c)] = acc[c - c0];
      }
    });
  } else {
    parallel_for(0, C, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        T acc[8] = {};
        for (int64_t n = 0; n < N; ++n) slope_grad_plane(S, x + (n * C + c) * S, gy + (n * C + c) * S, acc);
        T total = T(0);
        for (int l = 0; l < 8; ++l) total += acc[l];
        per_channel[static_cast<size_t>(c)] = total;
      }
    });
  }
  if (na == 1) {
    T acc = T(0);
    for (T v : per_channel) acc += v;
    ga[0] = acc;
  } else {
    for (int64_t c = 0; c < C; ++c) ga[c] = per_channel[static_cast<size_t>(c)];
  }
}

template void prelu_forward_cpu<float>(int64_t, int64_t, int64_t, const float*, const float*, int64_t, float*);
template void prelu_forward_cpu<double>(int64_t, int64_t, int64_t, const double*, const double*, int64_t, double*);
template void prelu_backward_cpu<float>(int64_t, int64_t, int64_t, const float*, const float*, int64_t, const float*,
                                        float*, float*);
template void prelu_backward_cpu<double>(int64_t, int64_t, int64_t, const double*, const double*, int64_t,
                                         const double*, double*, double*);

namespace {
struct PreluShape {
  int64_t N, C, S;
};
PreluShape prelu_shape(const char* op, const Tensor& x, const Tensor& a) {
  check_defined(op, x, "x");
  check_defined(op, a, "weight");
  check_floating(op, x);
  check_same_dtype(op, x, a);
  check_same_device(op, x, a);
  PreluShape s{x.dim() >= 1 ? x.size(0) : 1, x.dim() >= 2 ? x.size(1) : 1, 1};
  for (int64_t d = 2; d < x.dim(); ++d) s.S *= x.size(d);
  MN_CHECK(a.dim() == 1 && (a.numel() == 1 || a.numel() == s.C), op, ": weight must have 1 element or one per "
           "channel (", s.C, ", dim 1 of x ", x.desc(), "), got ", a.desc());
  return s;
}
}  // namespace

Tensor prelu_forward(const Tensor& x_in, const Tensor& a_in) {
  const char* op = "prelu";
  const PreluShape s = prelu_shape(op, x_in, a_in);
  Tensor x = x_in.contiguous(), a = a_in.contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.numel() == 0) return y;
  MN_DISPATCH_KERNEL(op, x, prelu_forward, s.N, s.C, s.S, x.data<scalar_t>(), a.data<scalar_t>(), a.numel(),
                     y.data<scalar_t>());
  return y;
}

std::pair<Tensor, Tensor> prelu_backward(const Tensor& x_in, const Tensor& a_in, const Tensor& gy_in) {
  const char* op = "prelu_backward";
  const PreluShape s = prelu_shape(op, x_in, a_in);
  check_defined(op, gy_in, "grad_output");
  check_same_shape(op, x_in, gy_in);
  check_same_dtype(op, x_in, gy_in);
  check_same_device(op, x_in, gy_in);
  Tensor x = x_in.contiguous(), a = a_in.contiguous(), gy = gy_in.contiguous();
  Tensor gx = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor ga = Tensor::zeros(a.shape(), a.dtype(), a.device());
  if (x.numel() == 0) return {gx, ga};
  MN_DISPATCH_KERNEL(op, x, prelu_backward, s.N, s.C, s.S, x.data<scalar_t>(), a.data<scalar_t>(), a.numel(),
                     gy.data<scalar_t>(), gx.data<scalar_t>(), ga.data<scalar_t>());
  return {gx, ga};
}

}  // namespace mn::kernels
