// Tests of our GEMM: every CPU variant against a textbook triple loop written
// here (accumulated in double), all transpose combinations, odd sizes, padded
// leading dimensions, alpha/beta (beta == 0 must not read C), batched calls,
// the Tensor-level matmul and its argument checks, and CPU-vs-CUDA parity for
// both CUDA variants (skipped without a GPU).
//
// Tolerance: an inner product of K terms accumulated in precision u (2^-24 for
// float, 2^-53 for double) has a probabilistic error bound of about
// sqrt(K) * u * sum_k |a_ik b_kj| (Higham & Mary 2019); the alpha/beta update
// adds a few roundings of |alpha| S + |beta| |C|. We allow 8 (sqrt(K) + 2) u
// times the largest such magnitude: tight enough that one wrong or missing
// term (size ~1e-2 or more here) fails, loose enough for any summation order.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cuda/gemm.h"
#include "kernels/gemm.h"
#include "kernels/gemm_config.h"
#include "runtime/cpu_features.h"
#include "runtime/parallel.h"
#include "tests/common/test_util.h"

namespace mn::kernels {
namespace {

struct Problem {
  bool ta, tb;
  int64_t M, N, K;
  int64_t pad = 0;  // added to every leading dimension
  double alpha = 1, beta = 0;
  int64_t lda() const { return (ta ? M : K) + pad; }
  int64_t ldb() const { return (tb ? K : N) + pad; }
  int64_t ldc() const { return N + pad; }
  int64_t a_size() const { return (ta ? K : M) * lda(); }
  int64_t b_size() const { return (tb ? N : K) * ldb(); }
  int64_t c_size() const { return M * ldc(); }
};

template <typename T>
std::vector<T> random_vec(int64_t n, uint64_t seed) {
  std::vector<double> d = test::rand_vec(n, -1.0, 1.0, seed);
  return std::vector<T>(d.begin(), d.end());
}

// The oracle: C = alpha op(A) op(B) + beta C in double; also returns the bound.
template <typename T>
std::vector<double> reference(const Problem& p, const std::vector<T>& A, const std::vector<T>& B,
                              const std::vector<T>& C0, double* tol) {
  std::vector<double> C(C0.begin(), C0.end());
  double worst = 0;
  for (int64_t i = 0; i < p.M; ++i) {
    for (int64_t j = 0; j < p.N; ++j) {
      double acc = 0, mag = 0;
      for (int64_t k = 0; k < p.K; ++k) {
        double a = p.ta ? A[k * p.lda() + i] : A[i * p.lda() + k];
        double b = p.tb ? B[j * p.ldb() + k] : B[k * p.ldb() + j];
        acc += a * b;
        mag += std::abs(a * b);
      }
      double& c = C[i * p.ldc() + j];
      double cmag = p.beta == 0 ? 0 : std::abs(p.beta * c);
      worst = std::max(worst, std::abs(p.alpha) * mag + cmag);
      c = p.beta == 0 ? p.alpha * acc : p.alpha * acc + p.beta * c;
    }
  }
  const double u = std::numeric_limits<T>::epsilon() / 2;
  *tol = 8 * (std::sqrt(double(p.K)) + 2) * u * std::max(worst, 1e-30);
  return C;
}

// Only the M x N window of C is compared; the padding must be left untouched.
template <typename T>
::testing::AssertionResult matches(const Problem& p, const std::vector<double>& ref,
                                   const std::vector<T>& got, const std::vector<T>& C0,
                                   double tol) {
  std::vector<double> r, g;
  for (int64_t i = 0; i < p.M; ++i)
    for (int64_t j = 0; j < p.ldc(); ++j) {
      const int64_t idx = i * p.ldc() + j;
      r.push_back(j < p.N ? ref[idx] : double(C0[idx]));
      g.push_back(got[idx]);
    }
  return test::all_close(r, g, tol, 0.0);
}

template <typename T>
void run_cpu_case(const Problem& p, uint64_t seed) {
  auto A = random_vec<T>(p.a_size(), seed);
  auto B = random_vec<T>(p.b_size(), seed + 1);
  auto C0 = random_vec<T>(p.c_size(), seed + 2);
  std::vector<T> C = C0;
  if (p.beta == 0) {  // beta == 0 must overwrite without reading: NaN must not leak
    for (int64_t i = 0; i < p.M; ++i)
      for (int64_t j = 0; j < p.N; ++j) C[i * p.ldc() + j] = std::numeric_limits<T>::quiet_NaN();
  }
  double tol;
  auto ref = reference(p, A, B, C0, &tol);
  gemm_cpu<T>(p.ta, p.tb, p.M, p.N, p.K, T(p.alpha), A.data(), p.lda(), B.data(), p.ldb(),
              T(p.beta), C.data(), p.ldc());
  EXPECT_TRUE(matches(p, ref, C, C0, tol))
      << "ta=" << p.ta << " tb=" << p.tb << " M=" << p.M << " N=" << p.N << " K=" << p.K
      << " pad=" << p.pad << " alpha=" << p.alpha << " beta=" << p.beta;
}

// Sizes around the tile (6x16 / 6x8) and block (KC = 256, MC = 144/72) edges.
std::vector<Problem> odd_problems() {
  const int64_t sizes[][3] = {{1, 1, 1},     {1, 7, 33},    {7, 1, 129},    {33, 257, 7},
                              {129, 33, 257}, {257, 129, 1}, {7, 33, 1},     {257, 257, 257},
                              {1, 257, 33},  {33, 7, 300},   {150, 40, 520}, {13, 18, 5}};
  const double ab[][2] = {{1, 0}, {0.5, 2}, {-1.5, 1}};
  std::vector<Problem> out;
  int c = 0;
  for (auto& s : sizes)
    for (int t = 0; t < 4; ++t) {
      Problem p{(t & 1) != 0, (t & 2) != 0, s[0], s[1], s[2]};
      p.pad = (c % 3 == 1) ? 3 : 0;
      p.alpha = ab[c % 3][0];
      p.beta = ab[c % 3][1];
      out.push_back(p);
      ++c;
    }
  return out;
}

class GemmCpuVariant : public ::testing::TestWithParam<CpuGemmVariant> {
 protected:
  void SetUp() override {
    if (GetParam() == CpuGemmVariant::PackedAvx2 && !cpu_has_avx2_fma())
      GTEST_SKIP() << "CPU lacks AVX2/FMA: the avx2 path is not tested on this machine";
    if (GetParam() == CpuGemmVariant::PackedAvx512 && !cpu_has_avx512())
      GTEST_SKIP() << "CPU lacks AVX-512 F/BW/VL/DQ: the avx512 path is not tested on this machine";
    saved_ = cpu_gemm_variant();
    set_cpu_gemm_variant(GetParam());
  }
  void TearDown() override { set_cpu_gemm_variant(saved_); }
  CpuGemmVariant saved_ = CpuGemmVariant::Auto;
};

TEST_P(GemmCpuVariant, FloatAllTransposesOddSizes) {
  uint64_t seed = 10;
  for (const Problem& p : odd_problems()) run_cpu_case<float>(p, seed += 3);
}

TEST_P(GemmCpuVariant, DoubleAllTransposesOddSizes) {
  uint64_t seed = 20;
  for (const Problem& p : odd_problems()) run_cpu_case<double>(p, seed += 3);
}

TEST_P(GemmCpuVariant, AlphaZeroAndKZeroScaleC) {
  for (double beta : {0.0, 1.0, -2.0}) {
    Problem p{false, true, 9, 20, 0};
    p.pad = 1;  // BLAS convention: leading dimensions are >= 1 even when K == 0
    p.beta = beta;
    run_cpu_case<float>(p, 3);
    Problem q{true, false, 9, 20, 17};
    q.alpha = 0;
    q.beta = beta;
    run_cpu_case<double>(q, 4);
  }
}

// Crosses the NC panel edge (4096 float / 2048 double columns) and several KC steps.
TEST_P(GemmCpuVariant, CrossesPanelBoundaries) {
  if (GetParam() == CpuGemmVariant::Reference) GTEST_SKIP() << "covered by the packed variants";
  run_cpu_case<float>(Problem{false, false, 13, 4100, 300, 0, 1.0, 0.5}, 5);
  run_cpu_case<double>(Problem{true, true, 7, 2060, 270, 2, 2.0, 0.0}, 6);
}

INSTANTIATE_TEST_SUITE_P(Variants, GemmCpuVariant,
                         ::testing::Values(CpuGemmVariant::Auto, CpuGemmVariant::Reference,
                                           CpuGemmVariant::PackedPortable,
                                           CpuGemmVariant::PackedAvx2,
                                           CpuGemmVariant::PackedAvx512),
                         [](const auto& info) {
                           switch (info.param) {
                             case CpuGemmVariant::Auto: return std::string("Auto");
                             case CpuGemmVariant::Reference: return std::string("Reference");
                             case CpuGemmVariant::PackedPortable: return std::string("Portable");
                             case CpuGemmVariant::PackedAvx2: return std::string("Avx2");
                             default: return std::string("Avx512");
                           }
                         });

// Auto follows the instruction-set path (MN_CPU_ISA / set_cpu_isa): each path this
// CPU supports gives correct results through the public entry point.
TEST(GemmCpu, EveryIsaPathThroughAuto) {
  for (CpuIsa isa : {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx512}) {
    if (!cpu_isa_supported(isa)) {
      std::printf("[  NOTE    ] %s path not supported by this CPU: not tested here\n",
                  cpu_isa_name(isa));
      continue;
    }
    SCOPED_TRACE(cpu_isa_name(isa));
    CpuIsaScope scope(isa);
    uint64_t seed = 70;
    for (const Problem& p : odd_problems()) run_cpu_case<float>(p, seed += 3);
    run_cpu_case<double>(Problem{true, false, 37, 45, 300, 1, 1.0, 0.5}, 71);
  }
}

// avx2 and avx512 sum each element in the same order: products whose sizes are
// whole tiles of both paths and K <= KC must agree bit for bit.
TEST(GemmCpu, Avx2AndAvx512AgreeBitForBit) {
  if (!cpu_has_avx512()) GTEST_SKIP() << "CPU lacks AVX-512: nothing to compare on this machine";
  const int64_t M = 48, N = 64, K = 200;
  auto A = random_vec<float>(M * K, 81), B = random_vec<float>(K * N, 82);
  std::vector<float> c2(M * N), c5(M * N);
  {
    CpuIsaScope s(CpuIsa::Avx2);
    gemm_cpu<float>(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, c2.data(), N);
  }
  {
    CpuIsaScope s(CpuIsa::Avx512);
    gemm_cpu<float>(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, c5.data(), N);
  }
  for (int64_t i = 0; i < M * N; ++i) ASSERT_EQ(c2[i], c5[i]) << "element " << i;
}

TEST(CpuIsa, ParseAndUnsupportedAreErrors) {
  EXPECT_EQ(parse_cpu_isa("scalar"), CpuIsa::Scalar);
  EXPECT_EQ(parse_cpu_isa("AVX2"), CpuIsa::Avx2);
  EXPECT_EQ(parse_cpu_isa("avx512"), CpuIsa::Avx512);
  EXPECT_THROW(parse_cpu_isa("sse9"), Error);
  EXPECT_THROW(parse_cpu_isa(""), Error);
  EXPECT_TRUE(cpu_isa_supported(CpuIsa::Scalar));
  EXPECT_TRUE(cpu_isa_supported(cpu_isa_best()));
  EXPECT_EQ(cpu_has_avx2_fma(), cpu_isa_supported(CpuIsa::Avx2));
  EXPECT_EQ(cpu_has_avx512(), cpu_isa_supported(CpuIsa::Avx512));
  for (CpuIsa isa : {CpuIsa::Avx2, CpuIsa::Avx512})
    if (!cpu_isa_supported(isa)) {
      EXPECT_THROW(set_cpu_isa(isa), Error);
      EXPECT_THROW(set_cpu_gemm_variant(isa == CpuIsa::Avx2 ? CpuGemmVariant::PackedAvx2
                                                             : CpuGemmVariant::PackedAvx512),
                   Error);
    }
  const CpuIsa before = cpu_isa();
  {
    CpuIsaScope s(CpuIsa::Scalar);
    EXPECT_EQ(cpu_isa(), CpuIsa::Scalar);
  }
  EXPECT_EQ(cpu_isa(), before);
}

// Results must not depend on the thread count (odd counts split tasks unevenly).
TEST(GemmCpu, ThreadCountsAgree) {
  const int saved = num_threads();
  for (int nt : {1, 3}) {
    set_num_threads(nt);
    run_cpu_case<float>(Problem{false, true, 150, 300, 200, 0, 1.0, 0.0}, 7);
    run_cpu_case<double>(Problem{true, false, 100, 70, 300, 1, 1.0, 1.0}, 8);
  }
  set_num_threads(saved);
}

// Many row blocks (each of whole MR-row slivers, spread evenly over the threads)
// with a ragged last sliver: every thread count gives the same bits, on every ISA path.
TEST(GemmCpu, RowBlocksSplitEvenlyAndBitIdenticalAcrossThreads) {
  const int saved = num_threads();
  const int64_t M = 2051, N = 67, K = 300;
  auto A = random_vec<float>(M * K, 21);
  auto B = random_vec<float>(K * N, 22);
  std::vector<float> first;
  for (int nt : {1, 2, 3, 4}) {
    set_num_threads(nt);
    std::vector<float> C(M * N, 0.0f);
    gemm_cpu<float>(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, C.data(), N);
    if (first.empty()) {
      first = C;
      run_cpu_case<float>(Problem{false, false, M, N, K}, 23);  // against the textbook loop
    } else {
      EXPECT_EQ(C, first) << "threads " << nt;
    }
  }
  set_num_threads(saved);
}

TEST(GemmCpu, BatchedMatchesPerMatrixReference) {
  for (int t = 0; t < 4; ++t) {
    for (int64_t batch : {1, 3, 9}) {
      Problem p{(t & 1) != 0, (t & 2) != 0, 17, 23, 40, 1, 1.0, t == 3 ? 0.5 : 0.0};
      const int64_t sa = p.a_size() + 5, sb = p.b_size() + 2, sc = p.c_size() + 7;
      auto A = random_vec<float>(batch * sa, 30 + t);
      auto B = random_vec<float>(batch * sb, 40 + t);
      auto C0 = random_vec<float>(batch * sc, 50 + t);
      std::vector<float> C = C0;
      gemm_batched_cpu<float>(p.ta, p.tb, batch, p.M, p.N, p.K, float(p.alpha), A.data(), p.lda(),
                              sa, B.data(), p.ldb(), sb, float(p.beta), C.data(), p.ldc(), sc);
      for (int64_t b = 0; b < batch; ++b) {
        std::vector<float> Ab(A.begin() + b * sa, A.begin() + b * sa + p.a_size());
        std::vector<float> Bb(B.begin() + b * sb, B.begin() + b * sb + p.b_size());
        std::vector<float> C0b(C0.begin() + b * sc, C0.begin() + b * sc + p.c_size());
        std::vector<float> Cb(C.begin() + b * sc, C.begin() + b * sc + p.c_size());
        double tol;
        auto ref = reference(p, Ab, Bb, C0b, &tol);
        EXPECT_TRUE(matches(p, ref, Cb, C0b, tol)) << "batch " << b << " of " << batch;
        // The gap between matrices is untouched.
        for (int64_t g = p.c_size(); g < sc; ++g) EXPECT_EQ(C[b * sc + g], C0[b * sc + g]);
      }
    }
  }
}

// ---- Tensor-level matmul --------------------------------------------------------

// Textbook loop over Tensors converted to double.
std::vector<double> matmul_loop(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  const bool batched = a.dim() == 3;
  const int64_t o = batched ? 1 : 0, B = batched ? a.size(0) : 1;
  const int64_t M = ta ? a.size(o + 1) : a.size(o), K = ta ? a.size(o) : a.size(o + 1);
  const int64_t N = tb ? b.size(o) : b.size(o + 1);
  auto av = a.to_double_vector(), bv = b.to_double_vector();
  std::vector<double> c(static_cast<size_t>(B * M * N));
  for (int64_t z = 0; z < B; ++z)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += av[z * M * K + (ta ? k * M + i : i * K + k)] *
               bv[z * K * N + (tb ? j * K + k : k * N + j)];
        c[z * M * N + i * N + j] = s;
      }
  return c;
}

TEST(Matmul, TwoDAndBatchedAllTransposes) {
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    const int64_t M = 19, K = 37, N = 11, B = 3;
    for (bool batched : {false, true}) {
      Shape sa = ta ? Shape{K, M} : Shape{M, K}, sb = tb ? Shape{N, K} : Shape{K, N};
      if (batched) sa.insert(sa.begin(), B), sb.insert(sb.begin(), B);
      Tensor a = test::rand(sa, -1, 1, DType::F64, Device::cpu(), 60 + t);
      Tensor b = test::rand(sb, -1, 1, DType::F64, Device::cpu(), 70 + t);
      Tensor c = matmul(a, b, ta, tb);
      Shape want = batched ? Shape{B, M, N} : Shape{M, N};
      ASSERT_EQ(c.shape(), want);
      // float64, K = 37 terms of size <= 1: 1e-13 is ~100x the rounding of the sum.
      EXPECT_TRUE(test::all_close(matmul_loop(a, b, ta, tb), c.to_double_vector(), 1e-13, 0));
    }
  }
}

TEST(Matmul, NonContiguousInputsAreHandled) {
  Tensor a = test::rand({8, 5}, -1, 1, DType::F32, Device::cpu(), 80);  // a.t() is (5, 8)
  Tensor b = test::rand({8, 6}, -1, 1, DType::F32, Device::cpu(), 81);
  Tensor c = matmul(a.t(), b);  // == matmul(a, b, true, false)
  // float32, K = 8: 1e-5 is ~20x the rounding of a sum of 8 terms of size <= 1.
  EXPECT_TRUE(test::all_close(matmul_loop(a, b, true, false), c.to_double_vector(), 1e-5, 0));
}

TEST(Matmul, MismatchesThrow) {
  Tensor a = Tensor::zeros({4, 5}, DType::F32);
  EXPECT_THROW(matmul(a, Tensor::zeros({6, 3}, DType::F32)), Error);          // inner dims
  EXPECT_THROW(matmul(a, Tensor::zeros({4, 3}, DType::F32), true, true), Error);
  EXPECT_THROW(matmul(a, Tensor::zeros({5, 3}, DType::F64)), Error);          // dtype
  EXPECT_THROW(matmul(Tensor::zeros({4, 5}, DType::I32), Tensor::zeros({5, 3}, DType::I32)),
               Error);                                                        // not floating
  EXPECT_THROW(matmul(a, Tensor::zeros({2, 5, 3}, DType::F32)), Error);       // rank
  EXPECT_THROW(matmul(Tensor::zeros({2, 4, 5}), Tensor::zeros({3, 5, 3})), Error);  // batch
  EXPECT_THROW(matmul(Tensor::zeros({5}), Tensor::zeros({5})), Error);        // 1-D
  EXPECT_NO_THROW(matmul(a, Tensor::zeros({5, 3}, DType::F32)));
  // Zero-sized inner dimension: a zero matrix.
  Tensor z = matmul(Tensor::zeros({3, 0}), Tensor::zeros({0, 2}));
  EXPECT_TRUE(test::all_close(std::vector<double>(6, 0.0), z.to_double_vector(), 0, 0));
}

TEST(MatmulCuda, DeviceMismatchThrows) {
  MN_SKIP_IF_NO_CUDA();
  Tensor a = Tensor::zeros({4, 5}), b = Tensor::zeros({5, 3}, DType::F32, Device::cuda());
  EXPECT_THROW(matmul(a, b), Error);
  EXPECT_THROW(matmul(Tensor::zeros({3, 4}, DType::F32, Device::cuda()), a), Error);
}

// ---- CUDA parity --------------------------------------------------------------------
#ifdef MN_WITH_CUDA
template <typename T>
void run_cuda_case(const Problem& p, int64_t batch, uint64_t seed) {
  const int64_t sa = p.a_size(), sb = p.b_size(), sc = p.c_size();
  auto A = random_vec<T>(batch * sa, seed);
  auto B = random_vec<T>(batch * sb, seed + 1);
  auto C0 = random_vec<T>(batch * sc, seed + 2);
  std::vector<T> Cin = C0;
  if (p.beta == 0)
    for (auto& c : Cin) c = std::numeric_limits<T>::quiet_NaN();  // must never be read
  const DType dt = std::is_same<T, float>::value ? DType::F32 : DType::F64;
  Tensor dA = Tensor::from_vector(A, {batch * sa}, Device::cuda());
  Tensor dB = Tensor::from_vector(B, {batch * sb}, Device::cuda());
  Tensor dC = Tensor::from_vector(Cin, {batch * sc}, Device::cuda());
  ASSERT_EQ(dC.dtype(), dt);
  gemm_batched_cuda<T>(p.ta, p.tb, batch, p.M, p.N, p.K, T(p.alpha), dA.data<T>(), p.lda(), sa,
                       dB.data<T>(), p.ldb(), sb, T(p.beta), dC.data<T>(), p.ldc(), sc);
  std::vector<T> gpu = dC.to_vector<T>();
  // CPU result on the same inputs: parity bound (relative error <= 1e-4 for float32).
  std::vector<T> cpu = Cin;
  gemm_batched_cpu<T>(p.ta, p.tb, batch, p.M, p.N, p.K, T(p.alpha), A.data(), p.lda(), sa,
                      B.data(), p.ldb(), sb, T(p.beta), cpu.data(), p.ldc(), sc);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<T> Ab(A.begin() + b * sa, A.begin() + (b + 1) * sa);
    std::vector<T> Bb(B.begin() + b * sb, B.begin() + (b + 1) * sb);
    std::vector<T> C0b(C0.begin() + b * sc, C0.begin() + (b + 1) * sc);
    std::vector<T> Gb(gpu.begin() + b * sc, gpu.begin() + (b + 1) * sc);
    std::vector<T> Pb(cpu.begin() + b * sc, cpu.begin() + (b + 1) * sc);
    double tol;
    auto ref = reference(p, Ab, Bb, C0b, &tol);
    EXPECT_TRUE(matches(p, ref, Gb, C0b, tol)) << "GPU vs oracle, batch " << b;
    // Relative parity with our CPU GEMM: |gpu - cpu| <= 1e-4 * max|cpu| (+ the oracle bound).
    double cmax = 0;
    for (T v : Pb) cmax = std::max(cmax, double(std::abs(v)));
    std::vector<double> pd(Pb.begin(), Pb.end()), gd(Gb.begin(), Gb.end());
    EXPECT_TRUE(test::all_close(pd, gd, 1e-4 * cmax + tol, 0)) << "GPU vs CPU, batch " << b;
  }
}

class GemmCudaVariant : public ::testing::TestWithParam<CudaGemmVariant> {
 protected:
  void SetUp() override {
    saved_ = cuda_gemm_variant();
    set_cuda_gemm_variant(GetParam());
  }
  void TearDown() override { set_cuda_gemm_variant(saved_); }
  CudaGemmVariant saved_ = CudaGemmVariant::Tiled;
};

TEST_P(GemmCudaVariant, FloatAndDoubleParityWithCpu) {
  MN_SKIP_IF_NO_CUDA();
  uint64_t seed = 100;
  for (const Problem& p : odd_problems()) {
    run_cuda_case<float>(p, 1, seed += 3);
    run_cuda_case<double>(p, 1, seed += 3);
  }
  // Multiples of 4 with no padding take the float4 path of the tiled kernel.
  for (int t = 0; t < 4; ++t) {
    run_cuda_case<float>(Problem{(t & 1) != 0, (t & 2) != 0, 256, 132, 72, 0, 1.0, 0.0}, 2, seed++);
    run_cuda_case<float>(Problem{(t & 1) != 0, (t & 2) != 0, 132, 260, 516, 4, 0.5, 2.0}, 3, seed++);
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, GemmCudaVariant,
                         ::testing::Values(CudaGemmVariant::Naive, CudaGemmVariant::Tiled),
                         [](const auto& info) {
                           return std::string(info.param == CudaGemmVariant::Naive ? "Naive"
                                                                                   : "Tiled");
                         });

// Split-K (CudaSpeedups): a few output tiles and a long K, as the Koch dense layer's
// forward (150 x 4096 outputs, K = 9216), with every transpose, alpha and beta, padded
// leading dimensions (the bounds-checked path) and unpadded ones (float4): against the
// oracle with the split on and off, and both settings within the float32 parity bound.
TEST(GemmCuda, SplitKParityAllTransposes) {
  MN_SKIP_IF_NO_CUDA();
  const CudaSpeedups saved = cuda_speedups();
  uint64_t seed = 500;
  for (bool split : {true, false}) {
    CudaSpeedups s = saved;
    s.split_k = split;
    set_cuda_speedups(s);
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      SCOPED_TRACE(std::string("split ") + (split ? "on" : "off") + ", ta " + std::to_string(ta) +
                   ", tb " + std::to_string(tb));
      run_cuda_case<float>(Problem{ta, tb, 150, 256, 2304, 0, 1.0, 0.0}, 1, seed++);
      run_cuda_case<float>(Problem{ta, tb, 70, 45, 3072, 3, 0.5, 2.0}, 1, seed++);
      run_cuda_case<double>(Problem{ta, tb, 33, 130, 1536, 1, -1.5, 0.5}, 1, seed++);
    }
  }
  set_cuda_speedups(saved);
}

TEST(MatmulCuda, TensorLevelParity) {
  MN_SKIP_IF_NO_CUDA();
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    Shape sa = ta ? Shape{2, 70, 33} : Shape{2, 33, 70}, sb = tb ? Shape{2, 45, 70} : Shape{2, 70, 45};
    Tensor a = test::rand(sa, -1, 1, DType::F32, Device::cpu(), 90 + t);
    Tensor b = test::rand(sb, -1, 1, DType::F32, Device::cpu(), 95 + t);
    Tensor ref = matmul(a, b, ta, tb);
    Tensor got = matmul(a.cuda(), b.cuda(), ta, tb);
    EXPECT_TRUE(got.is_cuda());
    // float32, K = 70 terms of size <= 1: relative 1e-4 of the largest entry (~8), see parity bound.
    EXPECT_TRUE(test::all_close(ref, got.cpu(), 1e-3, 1e-4));
  }
}
#endif

}  // namespace
}  // namespace mn::kernels
