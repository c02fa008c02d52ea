// CPU batch-norm: parallel over channels; each channel walks its N contiguous
// runs of L elements. Two-pass statistics (mean, then sum of squared deviations)
// accumulated in double, so float inputs lose no accuracy to cancellation.
// Every per-channel sum runs in kLanes interleaved double partial sums, added
// in a fixed order at the end (independent of the thread count): one running
// double made each sum a chain of dependent adds that the compiler may not
// reorder, ~4 cycles per element, and batch-norm took 16 % of the Omniglot
// conv4 preset's training step (perf, 2026-11-26); the lanes vectorise.
#include "kernels/batchnorm.h"

#include <cmath>
#include <type_traits>

#include <emmintrin.h>  // SSE2: part of baseline x86-64

#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace mn::kernels {
namespace {

constexpr int kLanes = 8;

// Lanes -> one double, in a fixed order.
double fold(const double (&acc)[kLanes]) {
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// ---- float planes with SSE2 intrinsics (baseline x86-64) -----------------------
// The eight double lanes as four __m128d (lanes 2j, 2j+1 in v[j]); element i + l
// of an 8-wide step goes to lane l, exactly as the generic loops do, with the
// same operations per lane, so the sums are bit-identical to them. GCC compiled
// the generic float loops either to vector code that spilled the lanes to the
// stack every step or, with the tail rewritten, to scalar code (perf of the conv4
// preset's step, 2026-11-27: batch-norm 18 % of it).
struct Lanes {
  __m128d v[4];
  explicit Lanes(const double (&a)[kLanes]) {
    for (int j = 0; j < 4; ++j) v[j] = _mm_loadu_pd(a + 2 * j);
  }
  void store(double (&a)[kLanes]) const {
    for (int j = 0; j < 4; ++j) _mm_storeu_pd(a + 2 * j, v[j]);
  }
};
// p[i..i+8) as four pairs of doubles.
inline void widen8(const float* p, __m128d (&d)[4]) {
  const __m128 lo = _mm_loadu_ps(p), hi = _mm_loadu_ps(p + 4);
  d[0] = _mm_cvtps_pd(lo), d[1] = _mm_cvtps_pd(_mm_movehl_ps(lo, lo));
  d[2] = _mm_cvtps_pd(hi), d[3] = _mm_cvtps_pd(_mm_movehl_ps(hi, hi));
}
// acc += p (Sq = false) or (p - m)^2 (Sq = true) over the full 8-wide steps; returns where they end.
template <bool Sq>
int64_t body_f(const float* p, int64_t L, double m, double (&acc)[kLanes]) {
  Lanes a(acc);
  const __m128d vm = _mm_set1_pd(m);
  int64_t i = 0;
  for (; i + kLanes <= L; i += kLanes) {
    __m128d d[4];
    widen8(p + i, d);
    for (int j = 0; j < 4; ++j) {
      if constexpr (Sq) {
        const __m128d t = _mm_sub_pd(d[j], vm);
        a.v[j] = _mm_add_pd(a.v[j], _mm_mul_pd(t, t));
      } else {
        a.v[j] = _mm_add_pd(a.v[j], d[j]);
      }
    }
  }
  a.store(acc);
  return i;
}
// ag += g, agx += g * (p - m) over the full 8-wide steps; returns where they end.
int64_t bwd_body_f(const float* p, const float* g, int64_t L, double m, double (&ag)[kLanes],
                   double (&agx)[kLanes]) {
  Lanes a(ag), b(agx);
  const __m128d vm = _mm_set1_pd(m);
  int64_t i = 0;
  for (; i + kLanes <= L; i += kLanes) {
    __m128d dp[4], dg[4];
    widen8(p + i, dp);
    widen8(g + i, dg);
    for (int j = 0; j < 4; ++j) {
      a.v[j] = _mm_add_pd(a.v[j], dg[j]);
      b.v[j] = _mm_add_pd(b.v[j], _mm_mul_pd(dg[j], _mm_sub_pd(dp[j], vm)));
    }
  }
  a.store(ag);
  b.store(agx);
  return i;
}

// sum over n of (p_n[0..L)) (Sq = false) or of (p_n - m)^2 (Sq = true), where
// p_n = base + (n * C + c) * L.
template <bool Sq, typename T>
double channel_sum(const T* base, int64_t N, int64_t C, int64_t L, int64_t c, double m) {
  double acc[kLanes] = {};
  for (int64_t n = 0; n < N; ++n) {
    const T* __restrict p = base + (n * C + c) * L;
    int64_t i = 0;
    if constexpr (std::is_same_v<T, float>) {
      i = body_f<Sq>(p, L, m, acc);
    } else {
      for (; i + kLanes <= L; i += kLanes)
        for (int l = 0; l < kLanes; ++l) {
          const double v = double(p[i + l]);
          acc[l] += Sq ? (v - m) * (v - m) : v;
        }
    }
    // The tail with constant lane indices (element i into lane i % kLanes, as
    // above): `acc[i % kLanes]` made GCC keep acc in memory for the whole loop.
    for (int l = 0; l < kLanes; ++l)
      if (i + l < L) {
        const double v = double(p[i + l]);
        acc[l] += Sq ? (v - m) * (v - m) : v;
      }
  }
  return fold(acc);
}

}  // namespace

template <typename T>
void batchnorm_forward_cpu(int64_t N, int64_t C, int64_t L, const T* x, const T* gamma,
                           const T* beta, T* running_mean, T* running_var, bool training,
                           double momentum, double eps, T* y, T* mean, T* invstd) {
  const int64_t M = N * L;
  parallel_for(0, C, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      double m, is;
      if (training) {
        m = channel_sum<false>(x, N, C, L, c, 0.0) / double(M);
        const double ss = channel_sum<true>(x, N, C, L, c, m);
        const double var = ss / double(M);
        is = 1.0 / std::sqrt(var + eps);
        if (running_mean)
          running_mean[c] = T((1 - momentum) * running_mean[c] + momentum * m);
        if (running_var) {
          const double unbiased = M > 1 ? ss / double(M - 1) : var;
          running_var[c] = T((1 - momentum) * running_var[c] + momentum * unbiased);
        }
      } else {
        m = running_mean[c];
        is = 1.0 / std::sqrt(double(running_var[c]) + eps);
      }
      mean[c] = T(m);
      invstd[c] = T(is);
      // y = x * a + b with a = invstd * gamma, b = beta - mean * a.
      const T a = T(is * (gamma ? double(gamma[c]) : 1.0));
      const T b = T((beta ? double(beta[c]) : 0.0) - m * double(a));
      for (int64_t n = 0; n < N; ++n) {
        const T* p = x + (n * C + c) * L;
        T* q = y + (n * C + c) * L;
        for (int64_t i = 0; i < L; ++i) q[i] = p[i] * a + b;
      }
    }
  });
}

template <typename T>
void batchnorm_backward_cpu(int64_t N, int64_t C, int64_t L, const T* x, const T* gy,
                            const T* mean, const T* invstd, const T* gamma, bool training, T* gx,
                            T* dgamma, T* dbeta) {
  const int64_t M = N * L;
  parallel_for(0, C, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const double m = mean[c], is = invstd[c];
      // sum g and sum g * (x - m), in kLanes partial sums each (see the top).
      double ag[kLanes] = {}, agx[kLanes] = {};
      for (int64_t n = 0; n < N; ++n) {
        const T* __restrict p = x + (n * C + c) * L;
        const T* __restrict g = gy + (n * C + c) * L;
        int64_t i = 0;
        if constexpr (std::is_same_v<T, float>) {
          i = bwd_body_f(p, g, L, m, ag, agx);
        } else {
          for (; i + kLanes <= L; i += kLanes)
            for (int l = 0; l < kLanes; ++l) {
              ag[l] += double(g[i + l]);
              agx[l] += double(g[i + l]) * (double(p[i + l]) - m);
            }
        }
        for (int l = 0; l < kLanes; ++l)  // the tail, constant lanes (see channel_sum)
          if (i + l < L) {
            ag[l] += double(g[i + l]);
            agx[l] += double(g[i + l]) * (double(p[i + l]) - m);
          }
      }
      const double sg = fold(ag), sgx = fold(agx) * is;
      if (dgamma) dgamma[c] = T(sgx);
      if (dbeta) dbeta[c] = T(sg);
      if (!gx) continue;
      const double gm = gamma ? double(gamma[c]) : 1.0;
      if (training) {
        // dx = gm*is*g - gm*is/M*sg - gm*is/M*sgx*is*(x - m)
        const T k1 = T(gm * is), k2 = T(gm * is * sg / double(M)),
                k3 = T(gm * is * is * sgx / double(M));
        for (int64_t n = 0; n < N; ++n) {
          const T* p = x + (n * C + c) * L;
          const T* g = gy + (n * C + c) * L;
          T* q = gx + (n * C + c) * L;
          for (int64_t i = 0; i < L; ++i) q[i] = k1 * g[i] - k2 - k3 * (p[i] - T(m));
        }
      } else {
        const T k1 = T(gm * is);
        for (int64_t n = 0; n < N; ++n) {
          const T* g = gy + (n * C + c) * L;
          T* q = gx + (n * C + c) * L;
          for (int64_t i = 0; i < L; ++i) q[i] = k1 * g[i];
        }
      }
    }
  });
}

#define MN_BN_INST(T)                                                                          \
  template void batchnorm_forward_cpu<T>(int64_t, int64_t, int64_t, const T*, const T*,       \
                                         const T*, T*, T*, bool, double, double, T*, T*, T*); \
  template void batchnorm_backward_cpu<T>(int64_t, int64_t, int64_t, const T*, const T*,      \
                                          const T*, const T*, const T*, bool, T*, T*, T*);
MN_BN_INST(float)
MN_BN_INST(double)
#undef MN_BN_INST

namespace {
template <typename T>
T* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
void check_param(const char* op, const Tensor& x, const Tensor& p, const char* name, int64_t C) {
  if (!p.defined()) return;
  check_same_dtype(op, x, p);
  check_same_device(op, x, p);
  MN_CHECK(p.dim() == 1 && p.size(0) == C, op, ": ", name, " must have shape (", C, "), got ",
           shape_str(p.shape()));
  MN_CHECK(p.is_contiguous(), op, ": ", name, " must be contiguous");
}
}  // namespace

BatchNormResult batchnorm_forward(const Tensor& x_in, const Tensor& gamma, const Tensor& beta,
                                  Tensor running_mean, Tensor running_var, bool training,
                                  double momentum, double eps) {
  const char* op = "batch_norm";
  check_defined(op, x_in, "x");
  check_floating(op, x_in);
  MN_CHECK(x_in.dim() >= 2, op, ": expected (N, C, ...) input, got ", shape_str(x_in.shape()));
  Tensor x = x_in.contiguous();
  const int64_t N = x.size(0), C = x.size(1), L = C > 0 && N > 0 ? x.numel() / (N * C) : 0;
  check_param(op, x, gamma, "gamma", C);
  check_param(op, x, beta, "beta", C);
  check_param(op, x, running_mean, "running_mean", C);
  check_param(op, x, running_var, "running_var", C);
  if (training) {
    MN_CHECK(N * L > 0, op, ": training mode needs at least one value per channel, got ",
             shape_str(x.shape()));
  } else {
    MN_CHECK(running_mean.defined() && running_var.defined(), op,
             ": evaluation mode needs running_mean and running_var");
  }
  BatchNormResult r{Tensor::empty(x.shape(), x.dtype(), x.device()),
                    Tensor::empty({C}, x.dtype(), x.device()),
                    Tensor::empty({C}, x.dtype(), x.device())};
  MN_DISPATCH_FLOAT(x.dtype(), op, [&] {
    if (x.is_cuda()) {
      MN_CUDA_BRANCH(op, x.device(), x.dtype(), {
        Tensor work = Tensor::empty({batchnorm_cuda_workspace(C)}, x.dtype(), x.device());
        batchnorm_forward_cuda<scalar_t>(N, C, L, x.data<scalar_t>(), ptr_or_null<scalar_t>(gamma),
                                         ptr_or_null<scalar_t>(beta),
                                         ptr_or_null<scalar_t>(running_mean),
                                         ptr_or_null<scalar_t>(running_var), training, momentum, eps,
                                         r.y.data<scalar_t>(), r.mean.data<scalar_t>(),
                                         r.invstd.data<scalar_t>(), work.data<scalar_t>());
      });
    } else {
      batchnorm_forward_cpu<scalar_t>(N, C, L, x.data<scalar_t>(), ptr_or_null<scalar_t>(gamma),
                                      ptr_or_null<scalar_t>(beta),
                                      ptr_or_null<scalar_t>(running_mean),
                                      ptr_or_null<scalar_t>(running_var), training, momentum, eps,
                                      r.y.data<scalar_t>(), r.mean.data<scalar_t>(),
                                      r.invstd.data<scalar_t>());
    }
  });
  return r;
}

BatchNormGrads batchnorm_backward(const Tensor& x_in, const Tensor& gy_in, const Tensor& mean,
                                  const Tensor& invstd, const Tensor& gamma, bool training) {
  const char* op = "batch_norm_backward";
  check_same_shape(op, x_in, gy_in);
  check_same_dtype(op, x_in, gy_in);
  check_same_device(op, x_in, gy_in);
  Tensor x = x_in.contiguous(), gy = gy_in.contiguous();
  const int64_t N = x.size(0), C = x.size(1), L = C > 0 && N > 0 ? x.numel() / (N * C) : 0;
  check_param(op, x, mean, "mean", C);
  check_param(op, x, invstd, "invstd", C);
  check_param(op, x, gamma, "gamma", C);
  BatchNormGrads g;
  g.dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (gamma.defined()) {
    g.dgamma = Tensor::empty({C}, x.dtype(), x.device());
    g.dbeta = Tensor::empty({C}, x.dtype(), x.device());
  }
  MN_DISPATCH_FLOAT(x.dtype(), op, [&] {
    if (x.is_cuda()) {
      MN_CUDA_BRANCH(op, x.device(), x.dtype(), {
        Tensor work = Tensor::empty({batchnorm_cuda_workspace(C)}, x.dtype(), x.device());
        batchnorm_backward_cuda<scalar_t>(
            N, C, L, x.data<scalar_t>(), gy.data<scalar_t>(), mean.data<scalar_t>(),
            invstd.data<scalar_t>(), ptr_or_null<scalar_t>(gamma), training, g.dx.data<scalar_t>(),
            ptr_or_null<scalar_t>(g.dgamma), ptr_or_null<scalar_t>(g.dbeta), work.data<scalar_t>());
      });
    } else {
      batchnorm_backward_cpu<scalar_t>(N, C, L, x.data<scalar_t>(), gy.data<scalar_t>(),
                                       mean.data<scalar_t>(), invstd.data<scalar_t>(),
                                       ptr_or_null<scalar_t>(gamma), training,
                                       g.dx.data<scalar_t>(), ptr_or_null<scalar_t>(g.dgamma),
                                       ptr_or_null<scalar_t>(g.dbeta));
    }
  });
  return g;
}

}  // namespace mn::kernels
