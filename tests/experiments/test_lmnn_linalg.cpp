// The LMNN study's float64 linear algebra (experiments/lmnn_mining/linalg.h):
// both symmetric eigensolvers on known spectra and on random symmetric matrices
// (A = V L V^T, V^T V = I, the two solvers agree), repeated eigenvalues, the PSD
// projection and factor, PCA (Gram path against covariance path), and the
// baseline and AVX2 builds of the eigensolver's loops against each other.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "experiments/lmnn_mining/linalg.h"
#include "tests/common/test_util.h"

namespace mn::lmnn {
namespace {

Mat random_symmetric(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd;
  Mat A(n, n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j <= i; ++j) A(i, j) = A(j, i) = nd(rng);
  return A;
}

// A random orthogonal matrix: the eigenvectors of a random symmetric one,
// orthonormalised again by Gram-Schmidt so the test does not trust eigh.
Mat random_orthogonal(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd;
  Mat Q(n, n);
  for (double& v : Q.a) v = nd(rng);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t p = 0; p < j; ++p) {
      double dot = 0;
      for (int64_t i = 0; i < n; ++i) dot += Q(i, j) * Q(i, p);
      for (int64_t i = 0; i < n; ++i) Q(i, j) -= dot * Q(i, p);
    }
    double nrm = 0;
    for (int64_t i = 0; i < n; ++i) nrm += Q(i, j) * Q(i, j);
    for (int64_t i = 0; i < n; ++i) Q(i, j) /= std::sqrt(nrm);
  }
  return Q;
}

Mat with_spectrum(const Mat& Q, const std::vector<double>& lambda) {
  Eigen e{lambda, Q};
  return reconstruct(e, lambda);
}

// |A - V diag(l) V^T| and |V^T V - I|, both relative to |A|.
void expect_valid_decomposition(const Mat& A, const Eigen& e, double tol) {
  const int64_t n = A.rows;
  const Mat R = reconstruct(e, e.values);
  double err = 0;
  for (size_t q = 0; q < A.a.size(); ++q) err = std::max(err, std::abs(R.a[q] - A.a[q]));
  const double scale = std::max(frobenius(A), 1.0);
  EXPECT_LE(err, tol * scale) << "reconstruction error for n = " << n;
  const Mat VtV = matmul(e.vectors, e.vectors, true, false);
  double orth = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) orth = std::max(orth, std::abs(VtV(i, j) - (i == j ? 1.0 : 0.0)));
  EXPECT_LE(orth, tol) << "V^T V - I for n = " << n;
  for (int64_t j = 0; j + 1 < n; ++j) EXPECT_GE(e.values[j], e.values[j + 1]) << "order at " << j;
}

// Round-off budget: a few hundred ulps times n for O(n^3) sweeps of rotations.
constexpr double kTol = 1e-11;

TEST(LmnnLinalg, KnownSpectraTwoByTwoAndDiagonal) {
  Mat A(2, 2);
  A(0, 0) = 2, A(0, 1) = 1, A(1, 0) = 1, A(1, 1) = 2;
  for (const Eigen& e : {eigh(A), eigh_jacobi(A)}) {
    EXPECT_NEAR(e.values[0], 3.0, 1e-14);
    EXPECT_NEAR(e.values[1], 1.0, 1e-14);
    EXPECT_NEAR(std::abs(e.vectors(0, 0)), std::sqrt(0.5), 1e-14);
  }
  Mat D(4, 4);
  D(0, 0) = -1, D(1, 1) = 5, D(2, 2) = 0, D(3, 3) = 2;
  const Eigen e = eigh(D);
  const std::vector<double> expect = {5, 2, 0, -1};
  EXPECT_TRUE(test::all_close(expect, e.values, 0, 0));
  const Mat one(1, 1, 7.0);
  EXPECT_EQ(eigh(one).values[0], 7.0);
}

TEST(LmnnLinalg, KnownSpectrumSecondDifferenceMatrix) {
  // tridiag(-1, 2, -1) of size n: eigenvalues 2 - 2 cos(j pi / (n + 1)).
  for (int64_t n : {3, 10, 40}) {
    Mat A(n, n);
    for (int64_t i = 0; i < n; ++i) {
      A(i, i) = 2;
      if (i + 1 < n) A(i, i + 1) = A(i + 1, i) = -1;
    }
    std::vector<double> expect;
    for (int64_t j = n; j >= 1; --j) expect.push_back(2 - 2 * std::cos(j * M_PI / (n + 1)));
    EXPECT_TRUE(test::all_close(expect, eigh(A).values, 1e-12, 0)) << "n = " << n;
    EXPECT_TRUE(test::all_close(expect, eigh_jacobi(A).values, 1e-12, 0)) << "n = " << n;
    expect_valid_decomposition(A, eigh(A), kTol);
  }
}

TEST(LmnnLinalg, PlantedSpectrumWithRepeatedEigenvalues) {
  const Mat A = with_spectrum(random_orthogonal(8, 3), {5, 1, -2, 1, 0, 5, -2, 1});
  const std::vector<double> sorted = {5, 5, 1, 1, 1, 0, -2, -2};
  for (const Eigen& e : {eigh(A), eigh_jacobi(A)}) {
    EXPECT_TRUE(test::all_close(sorted, e.values, 1e-12, 0));
    expect_valid_decomposition(A, e, kTol);
  }
}

TEST(LmnnLinalg, RandomSymmetricMatricesBothSolversAgree) {
  for (int64_t n : {1, 2, 5, 30, 120}) {
    const Mat A = random_symmetric(n, 100 + n);
    const Eigen qr = eigh(A);
    expect_valid_decomposition(A, qr, kTol * n);
    if (n <= 30) {
      const Eigen jac = eigh_jacobi(A);
      expect_valid_decomposition(A, jac, kTol * n);
      EXPECT_TRUE(test::all_close(jac.values, qr.values, 1e-11, 0)) << "n = " << n;
    }
  }
}

// The eigensolver's loops run as built for the baseline and for AVX2 + FMA
// (MN_LMNN_SIMD): both decompose, and agree to round-off.
TEST(LmnnLinalg, BaselineAndAvx2PathsAgree) {
  if (!cpu_isa_supported(CpuIsa::Avx2)) GTEST_SKIP() << "this CPU has no AVX2 + FMA";
  for (int64_t n : {3, 30, 61}) {
    const Mat A = random_symmetric(n, 200 + n);
    Eigen base, avx2;
    {
      CpuIsaScope scope(CpuIsa::Scalar);
      base = eigh(A);
    }
    {
      CpuIsaScope scope(CpuIsa::Avx2);
      avx2 = eigh(A);
    }
    expect_valid_decomposition(A, base, kTol * n);
    expect_valid_decomposition(A, avx2, kTol * n);
    EXPECT_TRUE(test::all_close(base.values, avx2.values, 1e-12, 1e-12)) << "n = " << n;
  }
}

TEST(LmnnLinalg, NonFiniteInputThrowsInsteadOfLooping) {
  Mat A = random_symmetric(6, 9);
  A(2, 3) = A(3, 2) = std::nan("");
  EXPECT_THROW(eigh(A), Error);
  EXPECT_THROW(eigh(Mat(2, 3)), Error);
}

TEST(LmnnLinalg, PsdProjectionClipsNegativeEigenvalues) {
  const Mat Q = random_orthogonal(6, 5);
  const Mat A = with_spectrum(Q, {3, 1, 0.5, -0.5, -1, -4});
  const Mat P = project_psd(A);
  const Mat expect = with_spectrum(Q, {3, 1, 0.5, 0, 0, 0});
  EXPECT_TRUE(test::all_close(expect.a, P.a, 1e-12, 0));
  const Eigen e = eigh(P);
  EXPECT_GE(e.values.back(), -1e-12);
  EXPECT_TRUE(test::all_close(P.a, project_psd(P).a, 1e-12, 0)) << "projection is idempotent";
  // The factor: L L^T = projected M, columns by descending eigenvalue.
  const Mat L = psd_factor(A);
  EXPECT_TRUE(test::all_close(expect.a, matmul(L, L, false, true).a, 1e-12, 0));
  double c0 = 0, c1 = 0;
  for (int64_t i = 0; i < 6; ++i) c0 += L(i, 0) * L(i, 0), c1 += L(i, 1) * L(i, 1);
  EXPECT_NEAR(c0, 3.0, 1e-12);
  EXPECT_NEAR(c1, 1.0, 1e-12);
}

TEST(LmnnLinalg, PcaGramPathMatchesCovariancePath) {
  // 12 points in 20-D (Gram path) and the same points padded... compared with
  // the covariance path on the transpose-free case by fitting on 25 >= 20 rows.
  std::mt19937_64 rng(4);
  std::normal_distribution<double> nd;
  Mat X(25, 20);
  for (int64_t i = 0; i < 25; ++i)
    for (int64_t j = 0; j < 20; ++j) X(i, j) = nd(rng) * (j < 3 ? 5.0 - j : 0.3) + 0.1 * j;
  const Pca cov = fit_pca(X, 3);  // n >= D: covariance
  // Duplicate feature space to 40-D (second half zero) so n < D takes the Gram path.
  Mat X2(25, 40);
  for (int64_t i = 0; i < 25; ++i)
    for (int64_t j = 0; j < 20; ++j) X2(i, j) = X(i, j);
  const Pca gram = fit_pca(X2, 3);
  EXPECT_TRUE(test::all_close(cov.variance, gram.variance, 1e-10, 1e-10));
  const Mat Z1 = pca_transform(cov, X), Z2 = pca_transform(gram, X2);
  for (int64_t j = 0; j < 3; ++j) {
    const double sign = Z1(0, j) * Z2(0, j) >= 0 ? 1.0 : -1.0;  // eigenvectors up to sign
    for (int64_t i = 0; i < 25; ++i) EXPECT_NEAR(Z1(i, j), sign * Z2(i, j), 1e-9);
  }
  // Projections are centred and their variances are the eigenvalues.
  for (int64_t j = 0; j < 3; ++j) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < 25; ++i) m += Z1(i, j) / 25;
    for (int64_t i = 0; i < 25; ++i) v += (Z1(i, j) - m) * (Z1(i, j) - m) / 24;
    EXPECT_NEAR(m, 0.0, 1e-10);
    EXPECT_NEAR(v, cov.variance[j], 1e-9 * cov.variance[j]);
  }
}

}  // namespace
}  // namespace mn::lmnn
