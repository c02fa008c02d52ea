// CPU distances: elementwise |a - b|, per-row L1 / L2 distances, and the
// pairwise distance matrices: L1 in the direct difference form (row-parallel
// loops), squared L2 / L2 / cosine with our GEMM for A B^T plus row-parallel
// elementwise passes. The readable oracle of kernels/cuda/distance.cu. The
// formulas and the zero-distance conventions are in kernels/distance.h; the
// Tensor-level dispatch is kernels/distance.cpp.
#include "kernels/distance.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/distance_math.h"
#include "kernels/cpu/gemm.h"
#include "runtime/parallel.h"

namespace mn::kernels {

namespace {
using dist_math::sgn;
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
      if (k == Metric::L1) {
        out[r] = dist_math::row_l1(p, q, D);
      } else {
        const T s = dist_math::row_sq_l2(p, q, D);  // the fused losses' d^2, bit for bit
        out[r] = k == Metric::L2 ? std::sqrt(s) : s;
      }
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

namespace {
// L1 forward: out[i, j] = sum_d |A_id - B_jd|, row-parallel.
template <typename T>
void pairwise_l1_forward(int64_t M, int64_t N, int64_t D, const T* A, const T* B, T* out) {
  parallel_for(0, M, std::max<int64_t>(1, 4096 / std::max<int64_t>(N * D, 1)), [&](int64_t r0,
                                                                                   int64_t r1) {
    for (int64_t i = r0; i < r1; ++i)
      for (int64_t j = 0; j < N; ++j) out[i * N + j] = dist_math::row_l1(A + i * D, B + j * D, D);
  });
}
// L1 backward: gX[r, d] = s * sum_c g(r, c) sign(X_rd - Y_cd), rows of X in parallel;
// g(r, c) = G[r * gs_r + c * gs_c] (so one routine serves gA and, transposed, gB).
template <typename T>
void pairwise_l1_backward_rows(int64_t R, int64_t C, int64_t D, const T* X, const T* Y,
                               const T* G, int64_t gs_r, int64_t gs_c, T s, T* gX) {
  parallel_for(0, R, std::max<int64_t>(1, 4096 / std::max<int64_t>(C * D, 1)), [&](int64_t r0,
                                                                                   int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      T* g = gX + r * D;
      std::fill(g, g + D, T(0));
      for (int64_t c = 0; c < C; ++c) {
        const T w = s * G[r * gs_r + c * gs_c];
        if (w == T(0)) continue;
        for (int64_t d = 0; d < D; ++d) g[d] += w * sgn(X[r * D + d] - Y[c * D + d]);
      }
    }
  });
}
}  // namespace

template <typename T>
void pairwise_forward_cpu(Pairwise m, int64_t M, int64_t N, int64_t D, const T* A, const T* B,
                          T* out, T* na, T* nb) {
  if (m == Metric::L1) {
    pairwise_l1_forward(M, N, D, A, B, out);
    return;
  }
  const bool self = A == B && M == N;
  gemm_cpu<T>(false, true, M, N, D, T(1), A, D, B, D, T(0), out, N);  // out = A B^T
  if (self) {
    // Norms from the Gram diagonal: then S_ii = G_ii + G_ii - 2 G_ii = 0 exactly
    // and S is symmetric (the miners' (B, B) matrix).
    for (int64_t i = 0; i < M; ++i) na[i] = out[i * N + i];
    if (nb != na) std::copy(na, na + M, nb);
  } else {
    row_sqnorms(M, D, A, na);
    row_sqnorms(N, D, B, nb);
  }
  parallel_for(0, M, std::max<int64_t>(1, 8192 / std::max<int64_t>(N, 1)), [&](int64_t r0,
                                                                                 int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      T* o = out + i * N;
      if (m == Pairwise::Cosine) {
        // g / (|a| |b|), not g / |a| / |b|: the product of the norms commutes, so
        // the self case is exactly symmetric (and the formula is the CUDA one).
        const T ma = clamped_norm(na[i]);
        for (int64_t j = 0; j < N; ++j) o[j] = T(1) - o[j] / (ma * clamped_norm(nb[j]));
      } else {
        for (int64_t j = 0; j < N; ++j) {
          const T s = self && i == j ? T(0) : std::max(na[i] + nb[j] - T(2) * o[j], T(0));
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
  if (m == Metric::L1) {
    if (gA) pairwise_l1_backward_rows(M, N, D, A, B, gout, N, 1, T(1), gA);
    if (gB) pairwise_l1_backward_rows(N, M, D, B, A, gout, 1, N, T(1), gB);  // sign flips with the order
    return;
  }
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

}  // namespace mn::kernels
