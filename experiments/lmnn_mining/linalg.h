// Small dense float64 linear algebra for the large-margin metric-learning study
// (Poorheravi et al.): a row-major matrix, products through the library's GEMM,
// two symmetric eigensolvers of our own, the projection onto the PSD cone and
// PCA. General enough to move to the library later (kernels/ or a linalg/
// folder); kept here because this study is its only user today.
//
// Eigensolvers:
//   * eigh()        Householder tridiagonalisation + implicit symmetric QR with
//                   Wilkinson shifts: O(n^3) with a small constant (PCA Gram
//                   matrices of 400 x 400, metrics of 30 x 30 every iteration).
//   * eigh_jacobi() cyclic Jacobi rotations: slower, simplest to trust; the
//                   oracle the tests compare eigh() against.
// Both return eigenvalues in DESCENDING order with unit eigenvectors as columns.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/cpu_features.h"

// The solver's inner loops (eigensolver phases, pair distances, gradient
// rows) are written once as NAME_body (MN_LMNN_BODY: always inlined) and
// compiled twice by MN_LMNN_SIMD: NAME_avx2 with AVX2 + FMA, NAME_base for the
// baseline build; NAME calls the first when the library's CPU path
// (runtime/cpu_features.h: best supported, or MN_CPU_ISA) is avx2 or better, as
// the library's kernels dispatch. (GCC's and clang's target_clones with
// "arch=haswell" test for an Intel Haswell CPU, not for its features: an AMD
// Zen 3 ran the baseline clones.)
#define MN_LMNN_BODY inline __attribute__((always_inline))
#define MN_LMNN_SIMD(ret, name, params, args)                                          \
  __attribute__((target("avx2,fma"))) ret name##_avx2 params { return name##_body args; } \
  ret name##_base params { return name##_body args; }                                  \
  ret name params {                                                                    \
    return ::mn::cpu_isa() == ::mn::CpuIsa::Scalar ? name##_base args : name##_avx2 args; \
  }

namespace mn::lmnn {

struct Mat {
  int64_t rows = 0, cols = 0;
  std::vector<double> a;  // (rows, cols) row-major
  Mat() = default;
  Mat(int64_t r, int64_t c, double v = 0.0) : rows(r), cols(c), a(static_cast<size_t>(r * c), v) {}
  double& operator()(int64_t i, int64_t j) { return a[static_cast<size_t>(i * cols + j)]; }
  double operator()(int64_t i, int64_t j) const { return a[static_cast<size_t>(i * cols + j)]; }
  double* row(int64_t i) { return a.data() + i * cols; }
  const double* row(int64_t i) const { return a.data() + i * cols; }
  static Mat identity(int64_t n);
};

// C = op(A) op(B) through kernels::gemm_cpu<double>.
Mat matmul(const Mat& A, const Mat& B, bool trans_a = false, bool trans_b = false);
Mat transpose(const Mat& A);
// Rows `idx` of A.
Mat take_rows(const Mat& A, const std::vector<int64_t>& idx);
double frobenius(const Mat& A);

struct Eigen {
  std::vector<double> values;  // (n) descending
  Mat vectors;                 // (n, n) column j is the eigenvector of values[j]
};
// A must be square and symmetric (only checked for shape; the lower triangle is
// used as the truth). Throws mn::Error when QR does not converge.
Eigen eigh(const Mat& A);
Eigen eigh_jacobi(const Mat& A);

// V diag(f(lambda)) V^T for a decomposition.
Mat reconstruct(const Eigen& e, const std::vector<double>& values);
// Nearest PSD matrix in the Frobenius norm: negative eigenvalues clipped to 0.
Mat project_psd(const Mat& M);
// Both from one decomposition: returns the projection, *L its factor.
Mat project_psd_factored(const Mat& M, Mat* L);
// C = op(A) op(B) into C, reusing C's storage when its size already fits.
void matmul_into(const Mat& A, const Mat& B, bool trans_a, bool trans_b, Mat& C);
// A factor L (n, n) with M = L L^T, L = Psi Sigma^{1/2} (Eq. 13), columns in
// descending eigenvalue order; negative eigenvalues are clipped to 0 first.
Mat psd_factor(const Mat& M);

// PCA fitted on X (n, D): mean (D), components (D, q) with unit columns in
// descending variance order, the variances. For n < D the n x n Gram matrix is
// decomposed (the eigenface trick), else the D x D covariance.
struct Pca {
  std::vector<double> mean;      // (D)
  Mat components;                // (D, q)
  std::vector<double> variance;  // (q)
};
Pca fit_pca(const Mat& X, int64_t q);
// (X - mean) components -> (n, q)
Mat pca_transform(const Pca& p, const Mat& X);

}  // namespace mn::lmnn
