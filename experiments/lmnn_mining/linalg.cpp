// Dense float64 linear algebra of the LMNN study: see linalg.h.
#include "experiments/lmnn_mining/linalg.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

// The solver works on host float64 matrices (no Tensor): the CPU GEMM launcher
// directly, not the Tensor-level kernels::matmul (which would copy in and out).
#include "kernels/cpu/gemm.h"
#include "runtime/error.h"

namespace mn::lmnn {

Mat Mat::identity(int64_t n) {
  Mat m(n, n);
  for (int64_t i = 0; i < n; ++i) m(i, i) = 1.0;
  return m;
}

void matmul_into(const Mat& A, const Mat& B, bool trans_a, bool trans_b, Mat& C) {
  const int64_t M = trans_a ? A.cols : A.rows, K = trans_a ? A.rows : A.cols;
  const int64_t Kb = trans_b ? B.cols : B.rows, N = trans_b ? B.rows : B.cols;
  MN_CHECK(K == Kb, "lmnn::matmul: inner sizes differ: op(A) is (", M, ", ", K, "), op(B) is (",
           Kb, ", ", N, ")");
  C.rows = M;
  C.cols = N;
  C.a.resize(static_cast<size_t>(M * N));  // keeps the capacity: no new pages per call
  if (M == 0 || N == 0) return;
  if (K == 0) {
    std::fill(C.a.begin(), C.a.end(), 0.0);
    return;
  }
  kernels::gemm_cpu<double>(trans_a, trans_b, M, N, K, 1.0, A.a.data(), A.cols, B.a.data(), B.cols,
                            0.0, C.a.data(), C.cols);
}

Mat matmul(const Mat& A, const Mat& B, bool trans_a, bool trans_b) {
  Mat C;
  matmul_into(A, B, trans_a, trans_b, C);
  return C;
}

Mat transpose(const Mat& A) {
  Mat T(A.cols, A.rows);
  for (int64_t i = 0; i < A.rows; ++i)
    for (int64_t j = 0; j < A.cols; ++j) T(j, i) = A(i, j);
  return T;
}

Mat take_rows(const Mat& A, const std::vector<int64_t>& idx) {
  Mat R(static_cast<int64_t>(idx.size()), A.cols);
  for (size_t r = 0; r < idx.size(); ++r) {
    MN_CHECK(idx[r] >= 0 && idx[r] < A.rows, "lmnn::take_rows: row ", idx[r], " of a matrix with ",
             A.rows, " rows");
    std::copy(A.row(idx[r]), A.row(idx[r]) + A.cols, R.row(static_cast<int64_t>(r)));
  }
  return R;
}

double frobenius(const Mat& A) {
  double s = 0;
  for (double v : A.a) s += v * v;
  return std::sqrt(s);
}

namespace {

void check_square(const Mat& A, const char* op) {
  MN_CHECK(A.rows == A.cols, op, ": the matrix must be square, got (", A.rows, ", ", A.cols, ")");
}

// The symmetric matrix whose lower triangle is A's (the truth for the solvers).
Mat symmetric_copy(const Mat& Ain, const char* op) {
  check_square(Ain, op);
  const int64_t n = Ain.rows;
  Mat A(n, n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j <= i; ++j) A(i, j) = A(j, i) = Ain(i, j);
  return A;
}

// sqrt(x^2 + z^2) without std::hypot's cost; hypot's scaling only where the
// squares could overflow or underflow (never for the metrics and Gram
// matrices here, kept for safety).
double fast_hypot(double x, double z) {
  const double m = std::max(std::abs(x), std::abs(z));
  if (m > 1e-150 && m < 1e150) return std::sqrt(x * x + z * z);
  return std::hypot(x, z);
}

// A = Q T Q^T with T tridiagonal (diagonal d, sub-diagonal e). Q is kept
// transposed (Qt's row j = Q's column j) so every update below runs along
// contiguous rows.
struct Tridiagonal {
  std::vector<double> d, e;
  Mat Qt;
};

// The solver's eigensolver runs once per step on a 30 x 30 metric: its two
// phases and the QR sweeps are also compiled for AVX2 + FMA and chosen at run
// time (MN_LMNN_SIMD, linalg.h).

// Householder reduction: step k reflects A[k+1.., k] onto alpha e_1, its unit
// vector kept in V's row k (zero: no reflection). Only A's lower triangle is
// read and updated (A is symmetric). p: n doubles of scratch.
MN_LMNN_BODY void householder_steps_body(Mat& A, Mat& V, std::vector<double>& p) {
  const int64_t n = A.rows;
  for (int64_t k = 0; k + 2 < n; ++k) {
    double* v = V.row(k);
    double xnorm = 0;
    for (int64_t i = k + 1; i < n; ++i) xnorm += A(i, k) * A(i, k);
    xnorm = std::sqrt(xnorm);
    if (xnorm == 0.0) continue;
    const double alpha = A(k + 1, k) > 0 ? -xnorm : xnorm;
    double vnorm = 0;
    for (int64_t i = k + 1; i < n; ++i) {
      v[i] = A(i, k) - (i == k + 1 ? alpha : 0.0);
      vnorm += v[i] * v[i];
    }
    vnorm = std::sqrt(vnorm);
    if (vnorm == 0.0) {
      std::fill(v, v + n, 0.0);
      continue;
    }
    for (int64_t i = k + 1; i < n; ++i) v[i] /= vnorm;
    // Trailing block B <- H B H = B - 2 (v w^T + w v^T), w = Bv - (v^T B v) v,
    // p = B v from the lower triangle.
    std::fill(p.begin() + k + 1, p.end(), 0.0);
    for (int64_t i = k + 1; i < n; ++i) {
      const double* Ai = A.row(i);
      double acc = Ai[i] * v[i];
      for (int64_t j = k + 1; j < i; ++j) {
        acc += Ai[j] * v[j];
        p[j] += Ai[j] * v[i];
      }
      p[i] += acc;
    }
    double kappa = 0;
    for (int64_t i = k + 1; i < n; ++i) kappa += v[i] * p[i];
    for (int64_t i = k + 1; i < n; ++i) p[i] -= kappa * v[i];
    for (int64_t i = k + 1; i < n; ++i) {
      double* Ai = A.row(i);
      for (int64_t j = k + 1; j <= i; ++j) Ai[j] -= 2.0 * (v[i] * p[j] + p[i] * v[j]);
    }
    A(k + 1, k) = alpha;
    for (int64_t i = k + 2; i < n; ++i) A(i, k) = 0.0;
  }
}
MN_LMNN_SIMD(void, householder_steps, (Mat& A, Mat& V, std::vector<double>& p), (A, V, p))

// Q = H_0 (H_1 (... H_{n-3})) into Q (the identity on entry), from the last
// reflection back: H_k then touches rows and columns k+1.. only. s: n doubles.
MN_LMNN_BODY void accumulate_q_body(const Mat& V, Mat& Q, std::vector<double>& s) {
  const int64_t n = Q.rows;
  for (int64_t k = n - 3; k >= 0; --k) {
    const double* v = V.row(k);
    std::fill(s.begin() + k + 1, s.end(), 0.0);
    for (int64_t i = k + 1; i < n; ++i) {
      const double* Qi = Q.row(i);
      for (int64_t j = k + 1; j < n; ++j) s[j] += v[i] * Qi[j];
    }
    for (int64_t i = k + 1; i < n; ++i) {
      double* Qi = Q.row(i);
      const double f = 2.0 * v[i];
      for (int64_t j = k + 1; j < n; ++j) Qi[j] -= f * s[j];
    }
  }
}
MN_LMNN_SIMD(void, accumulate_q, (const Mat& V, Mat& Q, std::vector<double>& s), (V, Q, s))

// A = Q T Q^T with T tridiagonal. The buffers are allocated here: the
// dispatched loops allocate nothing and throw nothing.
Tridiagonal tridiagonalize(Mat& A) {
  const int64_t n = A.rows;
  Mat V(n, n), Q = Mat::identity(n);
  std::vector<double> scratch(static_cast<size_t>(n));
  householder_steps(A, V, scratch);
  accumulate_q(V, Q, scratch);
  Tridiagonal t;
  t.d.resize(static_cast<size_t>(n));
  t.e.assign(static_cast<size_t>(std::max<int64_t>(n, 1)), 0.0);
  for (int64_t i = 0; i < n; ++i) t.d[i] = A(i, i);
  for (int64_t i = 0; i + 1 < n; ++i) t.e[i] = A(i + 1, i);
  t.Qt = transpose(Q);
  return t;
}

// Implicit symmetric QR on T with a Wilkinson shift: each sweep chases the
// bulge with Givens rotations, also applied to Qt's rows k and k+1. On return
// t.d holds the eigenvalues (unsorted) and Qt's rows their eigenvectors;
// false when it did not converge (NaN or Inf entries).
MN_LMNN_BODY bool implicit_qr_body(Tridiagonal& t) {
  std::vector<double>& d = t.d;
  std::vector<double>& e = t.e;
  const int64_t n = static_cast<int64_t>(d.size());
  const double eps = std::numeric_limits<double>::epsilon();
  int64_t iterations = 0;
  const int64_t max_iterations = 50 * std::max<int64_t>(n, 1);
  for (;;) {
    for (int64_t i = 0; i + 1 < n; ++i)
      if (std::abs(e[i]) <= eps * (std::abs(d[i]) + std::abs(d[i + 1]))) e[i] = 0.0;
    // The last unreduced block [l, m].
    int64_t m = n - 1;
    while (m > 0 && e[m - 1] == 0.0) --m;
    if (m == 0) break;
    int64_t l = m - 1;
    while (l > 0 && e[l - 1] != 0.0) --l;
    if (++iterations > max_iterations) return false;  // the caller throws
    const double delta = (d[m - 1] - d[m]) / 2.0;
    const double em = e[m - 1];
    const double mu = d[m] - em * em / (delta + (delta >= 0 ? 1.0 : -1.0) * fast_hypot(delta, em));
    double x = d[l] - mu, z = e[l], bulge = 0.0;
    for (int64_t k = l; k < m; ++k) {
      if (k > l) {
        x = e[k - 1];
        z = bulge;
      }
      const double r = fast_hypot(x, z);
      const double c = r == 0.0 ? 1.0 : x / r, s = r == 0.0 ? 0.0 : -z / r;
      if (k > l) e[k - 1] = r;
      // Rows/columns k, k+1 of T: R B R^T with R = [[c, -s], [s, c]].
      const double a = d[k], b = e[k], dd = d[k + 1];
      d[k] = c * c * a - 2.0 * c * s * b + s * s * dd;
      d[k + 1] = s * s * a + 2.0 * c * s * b + c * c * dd;
      e[k] = c * s * a + (c * c - s * s) * b - c * s * dd;
      if (k + 1 < m) {
        bulge = -s * e[k + 1];
        e[k + 1] = c * e[k + 1];
      }
      double* qk = t.Qt.row(k);
      double* qk1 = t.Qt.row(k + 1);
      for (int64_t r2 = 0; r2 < n; ++r2) {
        const double a0 = qk[r2], a1 = qk1[r2];
        qk[r2] = c * a0 - s * a1;
        qk1[r2] = s * a0 + c * a1;
      }
    }
  }
  return true;
}
MN_LMNN_SIMD(bool, implicit_qr, (Tridiagonal& t), (t))

// Eigenpairs by descending eigenvalue (stable, so ties keep their order),
// eigenvectors given as rows.
Eigen sorted_rows(std::vector<double> values, const Mat& rows) {
  const int64_t n = static_cast<int64_t>(values.size());
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t x, int64_t y) { return values[x] > values[y]; });
  Eigen e;
  e.values.resize(static_cast<size_t>(n));
  e.vectors = Mat(n, n);
  for (int64_t j = 0; j < n; ++j) {
    e.values[j] = values[order[j]];
    const double* src = rows.row(order[j]);
    for (int64_t i = 0; i < n; ++i) e.vectors(i, j) = src[i];
  }
  return e;
}

}  // namespace

// Householder reduction A = Q T Q^T (tridiagonalize), then implicit QR sweeps
// on T with a Wilkinson shift (implicit_qr), the rotations also applied to Q.
Eigen eigh(const Mat& Ain) {
  Mat A = symmetric_copy(Ain, "lmnn::eigh");
  Tridiagonal t = tridiagonalize(A);
  MN_CHECK(implicit_qr(t), "lmnn::eigh: the QR iteration did not converge for a ", A.rows, " x ",
           A.rows, " matrix (NaN or Inf entries?)");
  // Qt's row j is column j of Q: the eigenvector of d[j].
  return sorted_rows(t.d, t.Qt);
}

Eigen eigh_jacobi(const Mat& Ain) {
  Mat A = symmetric_copy(Ain, "lmnn::eigh_jacobi");
  const int64_t n = A.rows;
  Mat V = Mat::identity(n);
  const double scale = std::max(frobenius(A), std::numeric_limits<double>::min());
  for (int sweep = 0;; ++sweep) {
    double off = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i + 1; j < n; ++j) off += 2.0 * A(i, j) * A(i, j);
    if (std::sqrt(off) <= 1e-15 * scale) break;
    MN_CHECK(sweep < 100, "lmnn::eigh_jacobi: no convergence after 100 sweeps for a ", n, " x ", n,
             " matrix (NaN or Inf entries?)");
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) {
        const double apq = A(p, q);
        if (apq == 0.0) continue;
        // Zero A(p,q) with P = [[c, s], [-s, c]]: t = tan of the smaller angle.
        const double theta = (A(q, q) - A(p, p)) / (2.0 * apq);
        const double t = (theta >= 0 ? 1.0 : -1.0) / (std::abs(theta) + std::sqrt(theta * theta + 1.0));
        const double c = 1.0 / std::sqrt(t * t + 1.0), s = t * c;
        for (int64_t k = 0; k < n; ++k) {  // columns: A P
          const double akp = A(k, p), akq = A(k, q);
          A(k, p) = c * akp - s * akq;
          A(k, q) = s * akp + c * akq;
        }
        for (int64_t k = 0; k < n; ++k) {  // rows: P^T (A P)
          const double apk = A(p, k), aqk = A(q, k);
          A(p, k) = c * apk - s * aqk;
          A(q, k) = s * apk + c * aqk;
        }
        for (int64_t k = 0; k < n; ++k) {
          const double vkp = V(k, p), vkq = V(k, q);
          V(k, p) = c * vkp - s * vkq;
          V(k, q) = s * vkp + c * vkq;
        }
      }
  }
  std::vector<double> d(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) d[i] = A(i, i);
  return sorted_rows(d, transpose(V));
}

Mat reconstruct(const Eigen& e, const std::vector<double>& values) {
  const int64_t n = e.vectors.rows;
  Mat VL(n, n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) VL(i, j) = e.vectors(i, j) * values[j];
  Mat R = matmul(VL, e.vectors, false, true);
  for (int64_t i = 0; i < n; ++i)  // exact symmetry (round-off would drift otherwise)
    for (int64_t j = 0; j < i; ++j) R(i, j) = R(j, i) = 0.5 * (R(i, j) + R(j, i));
  return R;
}

Mat project_psd(const Mat& M) {
  Eigen e = eigh(M);
  std::vector<double> v = e.values;
  for (double& x : v) x = std::max(x, 0.0);
  return reconstruct(e, v);
}

Mat project_psd_factored(const Mat& M, Mat* L) {
  Eigen e = eigh(M);
  const int64_t n = M.rows;
  std::vector<double> v = e.values;
  for (double& x : v) x = std::max(x, 0.0);
  if (L) {
    *L = Mat(n, n);
    for (int64_t j = 0; j < n; ++j) {
      const double s = std::sqrt(v[j]);
      for (int64_t i = 0; i < n; ++i) (*L)(i, j) = e.vectors(i, j) * s;
    }
  }
  return reconstruct(e, v);
}

Mat psd_factor(const Mat& M) {
  Eigen e = eigh(M);
  const int64_t n = M.rows;
  Mat L(n, n);
  for (int64_t j = 0; j < n; ++j) {
    const double s = std::sqrt(std::max(e.values[j], 0.0));
    for (int64_t i = 0; i < n; ++i) L(i, j) = e.vectors(i, j) * s;
  }
  return L;
}

Pca fit_pca(const Mat& X, int64_t q) {
  const int64_t n = X.rows, D = X.cols;
  MN_CHECK(q >= 1 && q <= std::min(n, D), "lmnn::fit_pca: cannot keep ", q, " components of ", n,
           " points in ", D, " dimensions");
  Pca p;
  p.mean.assign(static_cast<size_t>(D), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < D; ++j) p.mean[j] += X(i, j);
  for (double& m : p.mean) m /= static_cast<double>(n);
  Mat Xc = X;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < D; ++j) Xc(i, j) -= p.mean[j];
  p.components = Mat(D, q);
  p.variance.resize(static_cast<size_t>(q));
  const double denom = static_cast<double>(std::max<int64_t>(n - 1, 1));
  if (n < D) {
    // Eigenface trick: Xc Xc^T v = l v  =>  Xc^T Xc (Xc^T v) = l (Xc^T v), |Xc^T v| = sqrt(l).
    Eigen e = eigh(matmul(Xc, Xc, false, true));
    Mat V(n, q);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < q; ++j) V(i, j) = e.vectors(i, j);
    Mat U = matmul(Xc, V, true, false);  // (D, q)
    for (int64_t j = 0; j < q; ++j) {
      MN_CHECK(e.values[j] > 0, "lmnn::fit_pca: component ", j, " has zero variance (", n,
               " points span fewer than ", q, " dimensions)");
      const double s = 1.0 / std::sqrt(e.values[j]);
      for (int64_t i = 0; i < D; ++i) p.components(i, j) = U(i, j) * s;
      p.variance[j] = e.values[j] / denom;
    }
  } else {
    Eigen e = eigh(matmul(Xc, Xc, true, false));
    for (int64_t j = 0; j < q; ++j) {
      for (int64_t i = 0; i < D; ++i) p.components(i, j) = e.vectors(i, j);
      p.variance[j] = e.values[j] / denom;
    }
  }
  return p;
}

Mat pca_transform(const Pca& p, const Mat& X) {
  MN_CHECK(X.cols == static_cast<int64_t>(p.mean.size()), "lmnn::pca_transform: data has ", X.cols,
           " features, the PCA was fitted on ", p.mean.size());
  Mat Xc = X;
  for (int64_t i = 0; i < X.rows; ++i)
    for (int64_t j = 0; j < X.cols; ++j) Xc(i, j) -= p.mean[j];
  return matmul(Xc, p.components);
}

}  // namespace mn::lmnn
