// CPU PReLU (see kernels/prelu.h): the forward and the input gradient are
// elementwise and parallel over (n, c) planes; the slope gradient is summed per
// channel by one task in a fixed order (eight interleaved partial sums), so it
// does not depend on the thread count. All three loops are branch-free (the
// sign of x is data-dependent): the branchy version took 21 % of the sampling
// study's training step (perf, 2026-11-26).
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

template <typename T>
void prelu_backward_cpu(int64_t N, int64_t C, int64_t S, const T* x, const T* a, int64_t na, const T* gy, T* gx,
                        T* ga) {
  parallel_for(0, N * C, std::max<int64_t>(1, 32768 / std::max<int64_t>(S, 1)), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const T slope = a[na == 1 ? 0 : p % C];
      const T* __restrict xp = x + p * S;
      const T* __restrict gp = gy + p * S;
      T* __restrict op = gx + p * S;
      for (int64_t s = 0; s < S; ++s) op[s] = gp[s] * (xp[s] > T(0) ? T(1) : slope);
    }
  });
  std::vector<T> per_channel(static_cast<size_t>(C));
  parallel_for(0, C, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      // Eight interleaved partial sums (a fixed order, so still independent of
      // the thread count), branch-free: g * min(x, 0) is 0 where x > 0.
      constexpr int kLanes = 8;
      T acc[kLanes] = {};
      for (int64_t n = 0; n < N; ++n) {
        const T* __restrict xp = x + (n * C + c) * S;
        const T* __restrict gp = gy + (n * C + c) * S;
        int64_t s = 0;
        for (; s + kLanes <= S; s += kLanes)
          for (int l = 0; l < kLanes; ++l) acc[l] += gp[s + l] * std::min(xp[s + l], T(0));
        for (; s < S; ++s) acc[0] += gp[s] * std::min(xp[s], T(0));
      }
      T total = T(0);
      for (int l = 0; l < kLanes; ++l) total += acc[l];
      per_channel[static_cast<size_t>(c)] = total;
    }
  });
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
