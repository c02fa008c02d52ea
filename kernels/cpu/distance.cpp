// CPU distance layers: elementwise |a - b|, per-row L1 / L2 distances, and the
// pairwise distance matrices (GEMM for A B^T plus row-parallel elementwise passes).
// The formulas and the zero-distance conventions are in kernels/distance.h.
#include "kernels/distance.h"
#include "kernels/elementwise.h"
#include "kernels/reduce.h"

#include <algorithm>
#include <cmath>

#include "kernels/gemm.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace mn::kernels {

const char* pairwise_name(Pairwise m) {
  switch (m) {
    case Pairwise::SqEuclidean: return "pairwise_sqeuclidean";
    case Pairwise::Euclidean: return "pairwise_euclidean";
    case Pairwise::Cosine: return "pairwise_cosine";
  }
  return "pairwise_distance";
}

namespace {
template <typename T>
inline T sgn(T v) {
  return v > T(0) ? T(1) : (v < T(0) ? T(-1) : T(0));
}
inline int64_t row_grain(int64_t D) { return std::max<int64_t>(1, 8192 / std::max<int64_t>(D, 1)); }
}  // namespace

template <typename T>
void abs_diff_forward_cpu(int64_t n, const T* a, const T* b, T* y) {
  parallel_for(0, n, 1 << 15, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) y[i] = std::abs(a[i] - b[i]);
  });
}
template <typename T>
void abs_diff_backward_cpu(int64_t n, const T* a, const T* b, const T* gy, T* ga, T* gb) {
  parallel_for(0, n, 1 << 15, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) {
      const T g = gy[i] * sgn(a[i] - b[i]);
      if (ga) ga[i] = g;
      if (gb) gb[i] = -g;
    }
  });
}

template <typename T>
void row_distance_forward_cpu(RowDist k, int64_t N, int64_t D, const T* a, const T* b, T* out) {
  parallel_for(0, N, row_grain(D), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* p = a + r * D;
      const T* q = b + r * D;
      T acc = T(0);
      if (k == RowDist::L1) {
        for (int64_t d = 0; d < D; ++d) acc += std::abs(p[d] - q[d]);
      } else {
        for (int64_t d = 0; d < D; ++d) acc += (p[d] - q[d]) * (p[d] - q[d]);
      }
      out[r] = k == RowDist::L2 ? std::sqrt(acc) : acc;
    }
  });
}

template <typename T>
void row_distance_backward_cpu(RowDist k, int64_t N, int64_t D, const T* a, const T* b,
                               const T* out, const T* gout, T* ga, T* gb) {
  parallel_for(0, N, row_grain(D), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* p = a + r * D;
      const T* q = b + r * D;
      T coef;  // d out / d a_d = coef * f(a_d - b_d)
      if (k == RowDist::L1) coef = gout[r];
      else if (k == RowDist::L2Squared) coef = T(2) * gout[r];
      else coef = out[r] > T(kL2GradEps) ? gout[r] / out[r] : T(0);
      for (int64_t d = 0; d < D; ++d) {
        const T diff = p[d] - q[d];
        const T g = k == RowDist::L1 ? coef * sgn(diff) : coef * diff;
        if (ga) ga[r * D + d] = g;
        if (gb) gb[r * D + d] = -g;
      }
    }
  });
}

namespace {
template <typename T>
void row_sqnorms(int64_t M, int64_t D, const T* A, T* n) {
  parallel_for(0, M, row_grain(D), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      T acc = T(0);
      for (int64_t d = 0; d < D; ++d) acc += A[r * D + d] * A[r * D + d];
      n[r] = acc;
    }
  });
}
template <typename T>
inline T clamped_norm(T sq) {
  return std::max(std::sqrt(sq), T(kCosEps));
}
}  // namespace

template <typename T>
void pairwise_forward_cpu(Pairwise m, int64_t M, int64_t N, int64_t D, const T* A, const T* B,
                          T* out, T* na, T* nb) {
  row_sqnorms(M, D, A, na);
  row_sqnorms(N, D, B, nb);
  gemm_cpu<T>(false, true, M, N, D, T(1), A, D, B, D, T(0), out, N);  // out = A B^T
  parallel_for(0, M, std::max<int64_t>(1, 8192 / std::max<int64_t>(N, 1)), [&](int64_t r0,
                                                                                 int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      T* o = out + i * N;
      if (m == Pairwise::Cosine) {
        const T ia = T(1) / clamped_norm(na[i]);
        for (int64_t j = 0; j < N; ++j) o[j] = T(1) - o[j] * ia / clamped_norm(nb[j]);
      } else {
        for (int64_t j = 0; j < N; ++j) {
          const T s = std::max(na[i] + nb[j] - T(2) * o[j], T(0));
          o[j] = m == Pairwise::Euclidean ? std::sqrt(s) : s;
        }
      }
    }
  });
}

template <typename T>
void pairwise_backward_cpu(Pairwise m, int64_t M, int64_t N, int64_t D, const T* A, const T* B,
                           const T* out, const T* na, const T* nb, const T* gout, T* gA, T* gB,
                           T* work) {
  T* W = work;               // (M, N)
  T* alpha = work + M * N;   // (M)
  T* beta = alpha + M;       // (N)
  // W and alpha, row-parallel.
  parallel_for(0, M, std::max<int64_t>(1, 8192 / std::max<int64_t>(N, 1)), [&](int64_t r0,
                                                                                 int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      const T* g = gout + i * N;
      const T* o = out + i * N;
      T* w = W + i * N;
      T acc = T(0);
      if (m == Pairwise::Cosine) {
        const T ma = clamped_norm(na[i]);
        for (int64_t j = 0; j < N; ++j) {
          w[j] = g[j] / (ma * clamped_norm(nb[j]));
          acc += g[j] * (T(1) - o[j]);
        }
        alpha[i] = std::sqrt(na[i]) > T(kCosEps) ? acc / (ma * ma) : T(0);
      } else {
        for (int64_t j = 0; j < N; ++j) {
          if (m == Pairwise::SqEuclidean) w[j] = o[j] > T(0) ? T(2) * g[j] : T(0);
          else w[j] = o[j] > T(kL2GradEps) ? g[j] / o[j] : T(0);
          acc += w[j];
        }
        alpha[i] = acc;
      }
    }
  });
  // beta: column sums, serial over rows, vectorised over columns.
  std::fill(beta, beta + N, T(0));
  for (int64_t i = 0; i < M; ++i) {
    const T* w = W + i * N;
    const T* g = gout + i * N;
    const T* o = out + i * N;
    if (m == Pairwise::Cosine) {
      for (int64_t j = 0; j < N; ++j) beta[j] += g[j] * (T(1) - o[j]);
    } else {
      for (int64_t j = 0; j < N; ++j) beta[j] += w[j];
    }
  }
  if (m == Pairwise::Cosine) {
    for (int64_t j = 0; j < N; ++j) {
      const T mb = clamped_norm(nb[j]);
      beta[j] = std::sqrt(nb[j]) > T(kCosEps) ? beta[j] / (mb * mb) : T(0);
    }
  }
  if (gA) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t d = 0; d < D; ++d) gA[i * D + d] = alpha[i] * A[i * D + d];
    gemm_cpu<T>(false, false, M, D, N, T(-1), W, N, B, D, T(1), gA, D);  // gA -= W B
  }
  if (gB) {
    for (int64_t j = 0; j < N; ++j)
      for (int64_t d = 0; d < D; ++d) gB[j * D + d] = beta[j] * B[j * D + d];
    gemm_cpu<T>(true, false, N, D, M, T(-1), W, N, A, D, T(1), gB, D);  // gB -= W^T A
  }
}

#define MN_DIST_INST(T)                                                                          \
  template void abs_diff_forward_cpu<T>(int64_t, const T*, const T*, T*);                      \
  template void abs_diff_backward_cpu<T>(int64_t, const T*, const T*, const T*, T*, T*);       \
  template void row_distance_forward_cpu<T>(RowDist, int64_t, int64_t, const T*, const T*, T*); \
  template void row_distance_backward_cpu<T>(RowDist, int64_t, int64_t, const T*, const T*,    \
                                             const T*, const T*, T*, T*);                      \
  template void pairwise_forward_cpu<T>(Pairwise, int64_t, int64_t, int64_t, const T*,         \
                                        const T*, T*, T*, T*);                                 \
  template void pairwise_backward_cpu<T>(Pairwise, int64_t, int64_t, int64_t, const T*,        \
                                         const T*, const T*, const T*, const T*, const T*, T*, \
                                         T*, T*);
MN_DIST_INST(float)
MN_DIST_INST(double)
#undef MN_DIST_INST

// ---------------------------------------------------------------------------
// Tensor level
namespace {
void check_pair(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(op, a, "a");
  check_defined(op, b, "b");
  check_floating(op, a);
  check_same_dtype(op, a, b);
  check_same_device(op, a, b);
}
}  // namespace

Tensor abs_diff_forward(const Tensor& a_in, const Tensor& b_in) {
  const char* op = "abs_diff";
  check_pair(op, a_in, b_in);
  check_same_shape(op, a_in, b_in);
  Tensor a = a_in.contiguous(), b = b_in.contiguous();
  Tensor y = Tensor::empty(a.shape(), a.dtype(), a.device());
  if (a.numel() == 0) return y;
  MN_DISPATCH_FLOAT(a.dtype(), op, [&] {
    if (a.is_cuda()) {
#ifdef MN_WITH_CUDA
      abs_diff_forward_cuda<scalar_t>(a.numel(), a.data<scalar_t>(), b.data<scalar_t>(),
                                      y.data<scalar_t>());
#else
      check_cuda_usable(op, a);
#endif
    } else {
      abs_diff_forward_cpu<scalar_t>(a.numel(), a.data<scalar_t>(), b.data<scalar_t>(),
                                     y.data<scalar_t>());
    }
  });
  return y;
}

std::pair<Tensor, Tensor> abs_diff_backward(const Tensor& a_in, const Tensor& b_in,
                                            const Tensor& gy_in) {
  const char* op = "abs_diff_backward";
  check_pair(op, a_in, b_in);
  check_same_shape(op, a_in, gy_in);
  Tensor a = a_in.contiguous(), b = b_in.contiguous(), gy = gy_in.contiguous();
  Tensor ga = Tensor::empty(a.shape(), a.dtype(), a.device());
  Tensor gb = Tensor::empty(a.shape(), a.dtype(), a.device());
  if (a.numel() == 0) return {ga, gb};
  MN_DISPATCH_FLOAT(a.dtype(), op, [&] {
    if (a.is_cuda()) {
#ifdef MN_WITH_CUDA
      abs_diff_backward_cuda<scalar_t>(a.numel(), a.data<scalar_t>(), b.data<scalar_t>(),
                                       gy.data<scalar_t>(), ga.data<scalar_t>(),
                                       gb.data<scalar_t>());
#else
      check_cuda_usable(op, a);
#endif
    } else {
      abs_diff_backward_cpu<scalar_t>(a.numel(), a.data<scalar_t>(), b.data<scalar_t>(),
                                      gy.data<scalar_t>(), ga.data<scalar_t>(),
                                      gb.data<scalar_t>());
    }
  });
  return {ga, gb};
}

Tensor row_distance_forward(RowDist k, const Tensor& a_in, const Tensor& b_in) {
  const char* op = "row_distance";
  check_pair(op, a_in, b_in);
  check_dim(op, a_in, 2, "a");
  check_same_shape(op, a_in, b_in);
  Tensor a = a_in.contiguous(), b = b_in.contiguous();
  const int64_t N = a.size(0), D = a.size(1);
  Tensor out = Tensor::empty({N}, a.dtype(), a.device());
  if (N == 0) return out;
  MN_DISPATCH_FLOAT(a.dtype(), op, [&] {
    if (a.is_cuda()) {
#ifdef MN_WITH_CUDA
      row_distance_forward_cuda<scalar_t>(k, N, D, a.data<scalar_t>(), b.data<scalar_t>(),
                                          out.data<scalar_t>());
#else
      check_cuda_usable(op, a);
#endif
    } else {
      row_distance_forward_cpu<scalar_t>(k, N, D, a.data<scalar_t>(), b.data<scalar_t>(),
                                         out.data<scalar_t>());
    }
  });
  return out;
}

std::pair<Tensor, Tensor> row_distance_backward(RowDist k, const Tensor& a_in, const Tensor& b_in,
                                                const Tensor& out_in, const Tensor& gout_in) {
  const char* op = "row_distance_backward";
  check_pair(op, a_in, b_in);
  check_dim(op, a_in, 2, "a");
  check_same_shape(op, a_in, b_in);
  check_same_shape(op, out_in, gout_in);
  Tensor a = a_in.contiguous(), b = b_in.contiguous(), out = out_in.contiguous(),
         gout = gout_in.contiguous();
  const int64_t N = a.size(0), D = a.size(1);
  MN_CHECK(out.numel() == N, op, ": out must have N = ", N, " elements, got ",
           shape_str(out.shape()));
  Tensor ga = Tensor::empty(a.shape(), a.dtype(), a.device());
  Tensor gb = Tensor::empty(a.shape(), a.dtype(), a.device());
  if (a.numel() == 0) return {ga, gb};
  MN_DISPATCH_FLOAT(a.dtype(), op, [&] {
    if (a.is_cuda()) {
#ifdef MN_WITH_CUDA
      row_distance_backward_cuda<scalar_t>(k, N, D, a.data<scalar_t>(), b.data<scalar_t>(),
                                           out.data<scalar_t>(), gout.data<scalar_t>(),
                                           ga.data<scalar_t>(), gb.data<scalar_t>());
#else
      check_cuda_usable(op, a);
#endif
    } else {
      row_distance_backward_cpu<scalar_t>(k, N, D, a.data<scalar_t>(), b.data<scalar_t>(),
                                          out.data<scalar_t>(), gout.data<scalar_t>(),
                                          ga.data<scalar_t>(), gb.data<scalar_t>());
    }
  });
  return {ga, gb};
}

PairwiseResult pairwise_distance_forward(Pairwise m, const Tensor& a_in, const Tensor& b_in) {
  const char* op = pairwise_name(m);
  check_pair(op, a_in, b_in);
  check_dim(op, a_in, 2, "a");
  check_dim(op, b_in, 2, "b");
  MN_CHECK(a_in.size(1) == b_in.size(1), op, ": feature sizes differ: a ",
           shape_str(a_in.shape()), " vs b ", shape_str(b_in.shape()));
  Tensor a = a_in.contiguous(), b = b_in.contiguous();
  const int64_t M = a.size(0), N = b.size(0), D = a.size(1);
  if (m != Pairwise::Cosine && M > 0 && N > 0) {
    // Euclidean distances do not change when both sets move by the same vector,
    // but the expansion's rounding error (about ulp(|a|^2)) does: embeddings
    // clustered far from the origin (e.g. sigmoid outputs near 0.5) lose every
    // small distance to cancellation in float32. Centring both sets on their
    // joint mean keeps the norms small. The backward (gA_i = sum_j W_ij (A_i - B_j))
    // is translation invariant too, so it may use the original rows.
    Tensor c = binary_scalar(BinaryOp::Mul,
                             binary(BinaryOp::Add, sum(a, {0}, true), sum(b, {0}, true)),
                             1.0 / static_cast<double>(M + N));  // (1, D)
    a = binary(BinaryOp::Sub, a, c);
    b = binary(BinaryOp::Sub, b, c);
  }
  PairwiseResult r{Tensor::empty({M, N}, a.dtype(), a.device()),
                   Tensor::empty({M}, a.dtype(), a.device()),
                   Tensor::empty({N}, a.dtype(), a.device())};
  if (M == 0 || N == 0) return r;
  MN_DISPATCH_FLOAT(a.dtype(), op, [&] {
    if (a.is_cuda()) {
#ifdef MN_WITH_CUDA
      pairwise_forward_cuda<scalar_t>(m, M, N, D, a.data<scalar_t>(), b.data<scalar_t>(),
                                      r.out.data<scalar_t>(), r.na.data<scalar_t>(),
                                      r.nb.data<scalar_t>());
#else
      check_cuda_usable(op, a);
#endif
    } else {
      pairwise_forward_cpu<scalar_t>(m, M, N, D, a.data<scalar_t>(), b.data<scalar_t>(),
                                     r.out.data<scalar_t>(), r.na.data<scalar_t>(),
                                     r.nb.data<scalar_t>());
    }
  });
  return r;
}

std::pair<Tensor, Tensor> pairwise_distance_backward(Pairwise m, const Tensor& a_in,
                                                     const Tensor& b_in, const PairwiseResult& f,
                                                     const Tensor& gout_in) {
  const char* op = "pairwise_distance_backward";
  check_pair(op, a_in, b_in);
  check_same_shape(op, f.out, gout_in);
  Tensor a = a_in.contiguous(), b = b_in.contiguous(), gout = gout_in.contiguous();
  const int64_t M = a.size(0), N = b.size(0), D = a.size(1);
  Tensor ga = Tensor::zeros(a.shape(), a.dtype(), a.device());
  Tensor gb = Tensor::zeros(b.shape(), b.dtype(), b.device());
  if (M == 0 || N == 0 || D == 0) return {ga, gb};
  Tensor work = Tensor::empty({M * N + M + N}, a.dtype(), a.device());
  MN_DISPATCH_FLOAT(a.dtype(), op, [&] {
    if (a.is_cuda()) {
#ifdef MN_WITH_CUDA
      pairwise_backward_cuda<scalar_t>(m, M, N, D, a.data<scalar_t>(), b.data<scalar_t>(),
                                       f.out.data<scalar_t>(), f.na.data<scalar_t>(),
                                       f.nb.data<scalar_t>(), gout.data<scalar_t>(),
                                       ga.data<scalar_t>(), gb.data<scalar_t>(),
                                       work.data<scalar_t>());
#else
      check_cuda_usable(op, a);
#endif
    } else {
      pairwise_backward_cpu<scalar_t>(m, M, N, D, a.data<scalar_t>(), b.data<scalar_t>(),
                                      f.out.data<scalar_t>(), f.na.data<scalar_t>(),
                                      f.nb.data<scalar_t>(), gout.data<scalar_t>(),
                                      ga.data<scalar_t>(), gb.data<scalar_t>(),
                                      work.data<scalar_t>());
    }
  });
  return {ga, gb};
}

}  // namespace mn::kernels
