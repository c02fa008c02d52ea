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

#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace mn::kernels {
namespace {

constexpr int kLanes = 8;

// Lanes -> one double, in a fixed order.
double fold(const double (&acc)[kLanes]) {
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// sum over n of f(p_n[0..L)) where p_n = base + (n * C + c) * L, f applied per element.
template <typename T, typename F>
double channel_sum(const T* base, int64_t N, int64_t C, int64_t L, int64_t c, F f) {
  double acc[kLanes] = {};
  for (int64_t n = 0; n < N; ++n) {
    const T* __restrict p = base + (n * C + c) * L;
    int64_t i = 0;
    for (; i + kLanes <= L; i += kLanes)
      for (int l = 0; l < kLanes; ++l) acc[l] += f(double(p[i + l]));
    for (; i < L; ++i) acc[i % kLanes] += f(double(p[i]));
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
        m = channel_sum(x, N, C, L, c, [](double v) { return v; }) / double(M);
        const double ss = channel_sum(x, N, C, L, c, [m](double v) { return (v - m) * (v - m); });
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
        for (; i + kLanes <= L; i += kLanes)
          for (int l = 0; l < kLanes; ++l) {
            ag[l] += double(g[i + l]);
            agx[l] += double(g[i + l]) * (double(p[i + l]) - m);
          }
        for (; i < L; ++i) {
          ag[i % kLanes] += double(g[i]);
          agx[i % kLanes] += double(g[i]) * (double(p[i]) - m);
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
