// The tensor-core precisions (kernels/gemm_config.h: TF32 and BF16 on our mma.sync kernels,
// TF32 also on the older WMMA kernels): the process-wide settings (CPU tests), and GPU
// parity against float64 CPU oracles, in TF32 and in BF16, of
//   - the CUDA GEMM (CudaGemmVariant::TensorCoreTF32, chosen for float when
//     allow_tf32() is on): all four transpose combinations, odd sizes around the
//     128x128x16 tile, padded leading dimensions, alpha/beta, batched calls, the
//     float4 path, and the Tensor-level matmul;
//   - the implicit-GEMM conv2d (igemm_tf32_kernel): forward, backward-data and
//     backward-weight (split-K, deterministic) at the Koch layer shapes (batch 2)
//     and at strided / padded / dilated odd shapes;
// plus: with the switch off the float results are FP32-accurate again, double is
// never affected, and with it on the results really are TF32 (they deviate from
// the float64 oracle by more than any FP32 summation could).
//
// Tolerance (BF16: the same argument with 7 explicit mantissa bits, 2^-9 per input,
// 2^-8 per product). TF32 keeps 10 explicit mantissa bits; rounding to nearest moves each
// input by at most 2^-11 relative, so a product a*b moves by at most
// (2 * 2^-11 + 2^-22) |ab| ~= 2^-10 |ab| and a dot product by at most
// 2^-10 * sum_k |a_ik b_kj| (worst case: no cancellation of the rounding errors).
// We allow twice that: the second 2^-10 covers the tensor cores' float
// accumulation inside an MMA (not IEEE round-to-nearest) and a truncating
// conversion, should the hardware do either. On top comes the FP32 bound of
// tests/kernels/test_gemm.cpp, 8 (sqrt(K) + 2) 2^-24 sum|ab|. The bound is applied
// with the largest sum|ab| (+ |beta c|) of the output as atol; sums of |.| are
// within a small factor of each other for the random inputs used. A wrong operand,
// transpose, edge tile or split range gives errors of order sqrt(K) |ab| ~ 1 and
// fails; so does a missing term for the small K cases (bound < 0.05 for K <= 64).
// Every test restores the switch and the GEMM variant (RAII guards).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "kernels/conv2d.h"
#include "kernels/distance.h"
#include "kernels/cuda/gemm.h"
#include "kernels/gemm.h"
#include "kernels/gemm_config.h"
#include "tests/common/test_util.h"

namespace mn::kernels {
namespace {

constexpr double kTf32 = 1.0 / 1024;  // 2^-10: the per-product bound of TF32 inputs
constexpr double kBf16 = 1.0 / 256;   // 2^-8: the per-product bound of BF16 inputs
constexpr double kU32 = 1.0 / (1 << 24);

double fp32_bound(int64_t K, double mag) { return 8 * (std::sqrt(double(K)) + 2) * kU32 * mag; }
double tf32_bound(int64_t K, double mag) { return 2 * kTf32 * mag + fp32_bound(K, mag); }
double bf16_bound(int64_t K, double mag) { return 2 * kBf16 * mag + fp32_bound(K, mag); }
[[maybe_unused]] double prec_bound(Precision p, int64_t K, double mag) {
  return p == Precision::TF32 ? tf32_bound(K, mag) : p == Precision::BF16 ? bf16_bound(K, mag) : fp32_bound(K, mag);
}

// Sets both precisions and the CUDA GEMM variant; restores them when the test ends.
class PrecisionGuard {
 public:
  explicit PrecisionGuard(Precision p, CudaGemmVariant v = CudaGemmVariant::Tiled)
      : scope_(p), saved_v_(cuda_gemm_variant()) {
    set_cuda_gemm_variant(v);
  }
  ~PrecisionGuard() { set_cuda_gemm_variant(saved_v_); }
  PrecisionGuard(const PrecisionGuard&) = delete;
  PrecisionGuard& operator=(const PrecisionGuard&) = delete;

 private:
  PrecisionScope scope_;
  CudaGemmVariant saved_v_;
};
// TF32 on (both settings) or FP32.
class Tf32Guard : public PrecisionGuard {
 public:
  explicit Tf32Guard(bool on, CudaGemmVariant v = CudaGemmVariant::Tiled)
      : PrecisionGuard(on ? Precision::TF32 : Precision::FP32, v) {}
};

// ---- the precision policy (CPU: the scope itself) ------------------------------------
TEST(Tf32Policy, Fp32ScopeNestsAndIsPerThread) {
  EXPECT_FALSE(fp32_forced());
  {
    const Fp32Scope a;
    EXPECT_TRUE(fp32_forced());
    {
      const Fp32Scope b;
      EXPECT_TRUE(fp32_forced());
    }
    EXPECT_TRUE(fp32_forced()) << "the inner scope ended the outer one";
    bool other = true;
    std::thread([&] { other = fp32_forced(); }).join();
    EXPECT_FALSE(other) << "a scope on one thread forced FP32 on another";
  }
  EXPECT_FALSE(fp32_forced());
}

// ---- the switch (CPU) -----------------------------------------------------------------
TEST(Tf32Switch, DefaultFollowsEnvironmentAndSetGetWork) {
  // Nothing else in this binary changes the switch without restoring it, so here
  // it still has its initial value: on only when MN_ALLOW_TF32=1 (or MN_PRECISION=tf32).
  const char* e = std::getenv("MN_ALLOW_TF32");
  const char* pe = std::getenv("MN_PRECISION");
  const bool env_on = (pe != nullptr && *pe != '\0') ? std::strcmp(pe, "tf32") == 0
                                                      : e != nullptr && std::strcmp(e, "1") == 0;
  EXPECT_EQ(allow_tf32(), env_on);
  {
    Tf32Guard g(true);
    EXPECT_TRUE(allow_tf32());
    set_allow_tf32(false);
    EXPECT_FALSE(allow_tf32());
    set_allow_tf32(true);
    EXPECT_TRUE(allow_tf32());
  }
  EXPECT_EQ(allow_tf32(), env_on);  // the guard restored it
}

TEST(Tf32Switch, TensorCoreVariantIsSelectable) {
  Tf32Guard g(false, CudaGemmVariant::TensorCoreTF32);
  EXPECT_EQ(cuda_gemm_variant(), CudaGemmVariant::TensorCoreTF32);
  EXPECT_THROW(set_cuda_gemm_variant(static_cast<CudaGemmVariant>(7)), Error);
  EXPECT_EQ(cuda_gemm_variant(), CudaGemmVariant::TensorCoreTF32);
}

TEST(Tf32Switch, CpuResultsDoNotDependOnTheSwitch) {
  const Tensor a = test::rand({33, 17}, -1, 1, DType::F32, Device::cpu(), 1);
  const Tensor b = test::rand({17, 65}, -1, 1, DType::F32, Device::cpu(), 2);
  std::vector<float> off, on;
  {
    Tf32Guard g(false);
    off = matmul(a, b).to_vector<float>();
  }
  {
    Tf32Guard g(true);
    on = matmul(a, b).to_vector<float>();
  }
  EXPECT_TRUE(off == on);  // bit for bit: the CPU never uses TF32
}

#ifdef MN_WITH_CUDA
// ---- GEMM -----------------------------------------------------------------------------
struct GemmCase {
  bool ta, tb;
  int64_t M, N, K;
  int64_t pad = 0;  // added to every leading dimension
  double alpha = 1, beta = 0;
  int64_t batch = 1;
  int64_t lda() const { return (ta ? M : K) + pad; }
  int64_t ldb() const { return (tb ? K : N) + pad; }
  int64_t ldc() const { return N + pad; }
  int64_t sa() const { return (ta ? K : M) * lda(); }
  int64_t sb() const { return (tb ? N : K) * ldb(); }
  int64_t sc() const { return M * ldc(); }
  std::string str() const {
    return "ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) + " M=" + std::to_string(M) +
           " N=" + std::to_string(N) + " K=" + std::to_string(K) + " pad=" + std::to_string(pad) +
           " alpha=" + std::to_string(alpha) + " beta=" + std::to_string(beta) +
           " batch=" + std::to_string(batch);
  }
};

// Runs one batched GEMM on the GPU with the current settings; returns the whole C
// (padding included) and, through ref/mag, the float64 oracle and the largest
// |alpha| sum|ab| + |beta c|. beta == 0: C starts as NaN and must not be read.
template <typename T>
std::vector<T> run_gemm(const GemmCase& p, uint64_t seed, std::vector<double>* ref, double* mag) {
  const int64_t sa = p.sa(), sb = p.sb(), sc = p.sc();
  const auto A = test::rand_vec(p.batch * sa, -1, 1, seed);
  const auto B = test::rand_vec(p.batch * sb, -1, 1, seed + 1);
  const auto C0 = test::rand_vec(p.batch * sc, -1, 1, seed + 2);
  std::vector<T> At(A.begin(), A.end()), Bt(B.begin(), B.end()), Ct(C0.begin(), C0.end());
  if (p.beta == 0)
    for (int64_t z = 0; z < p.batch; ++z)
      for (int64_t i = 0; i < p.M; ++i)
        for (int64_t j = 0; j < p.N; ++j)
          Ct[z * sc + i * p.ldc() + j] = std::numeric_limits<T>::quiet_NaN();
  // The oracle on the values the GPU sees (rounded to T); the padding keeps C0.
  ref->assign(Ct.begin(), Ct.end());
  *mag = 0;
  for (int64_t z = 0; z < p.batch; ++z)
    for (int64_t i = 0; i < p.M; ++i)
      for (int64_t j = 0; j < p.N; ++j) {
        double acc = 0, m = 0;
        for (int64_t k = 0; k < p.K; ++k) {
          const double a = At[z * sa + (p.ta ? k * p.lda() + i : i * p.lda() + k)];
          const double b = Bt[z * sb + (p.tb ? j * p.ldb() + k : k * p.ldb() + j)];
          acc += a * b;
          m += std::abs(a * b);
        }
        const int64_t idx = z * sc + i * p.ldc() + j;
        const double c0 = double(T(C0[idx]));
        (*ref)[idx] = p.beta == 0 ? p.alpha * acc : p.alpha * acc + p.beta * c0;
        *mag = std::max(*mag, std::abs(p.alpha) * m + (p.beta == 0 ? 0 : std::abs(p.beta * c0)));
      }
  Tensor dA = Tensor::from_vector(At, {p.batch * sa}, Device::cuda());
  Tensor dB = Tensor::from_vector(Bt, {p.batch * sb}, Device::cuda());
  Tensor dC = Tensor::from_vector(Ct, {p.batch * sc}, Device::cuda());
  gemm_batched_cuda<T>(p.ta, p.tb, p.batch, p.M, p.N, p.K, T(p.alpha), dA.data<T>(), p.lda(), sa,
                       dB.data<T>(), p.ldb(), sb, T(p.beta), dC.data<T>(), p.ldc(), sc);
  return dC.to_vector<T>();
}

template <typename T>
std::vector<double> as_double(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// Sizes around the 128 x 128 x 16 tile and the 16 x 16 x 8 fragments.
std::vector<GemmCase> tf32_gemm_cases() {
  const int64_t sizes[][3] = {{33, 65, 17},  {1, 1, 1},     {7, 129, 33},   {129, 7, 8},
                              {128, 128, 16}, {130, 257, 40}, {17, 33, 200}, {64, 300, 9}};
  const double ab[][2] = {{1, 0}, {0.5, 2}, {-1.5, 1}};
  std::vector<GemmCase> out;
  int c = 0;
  for (auto& s : sizes)
    for (int t = 0; t < 4; ++t) {
      GemmCase p{(t & 1) != 0, (t & 2) != 0, s[0], s[1], s[2]};
      p.pad = (c % 3 == 1) ? 3 : 0;
      p.alpha = ab[c % 3][0];
      p.beta = ab[c % 3][1];
      p.batch = (c % 4 == 3) ? 3 : 1;
      out.push_back(p);
      ++c;
    }
  // Multiples of 4, unpadded and 16-byte aligned: the float4 loader, batched.
  for (int t = 0; t < 4; ++t) {
    out.push_back(GemmCase{(t & 1) != 0, (t & 2) != 0, 256, 132, 72, 0, 1.0, 0.0, 2});
    out.push_back(GemmCase{(t & 1) != 0, (t & 2) != 0, 132, 260, 36, 4, 0.5, 2.0, 3});
  }
  return out;
}

// Tiled at precision p: float goes to the tensor-core kernel.
void expect_gemm_parity(Precision prec, uint64_t seed) {
  PrecisionGuard g(prec);
  for (const GemmCase& p : tf32_gemm_cases()) {
    std::vector<double> ref;
    double mag;
    const auto got = run_gemm<float>(p, seed += 3, &ref, &mag);
    EXPECT_TRUE(test::all_close(ref, as_double(got), prec_bound(prec, p.K, mag), 0)) << precision_name(prec) << " " << p.str();
  }
}

TEST(Tf32GemmCuda, ParityWithOracleAllTransposesOddSizesBatched) {
  MN_SKIP_IF_NO_CUDA();
  expect_gemm_parity(Precision::TF32, 300);
}

TEST(Bf16GemmCuda, ParityWithOracleAllTransposesOddSizesBatched) {
  MN_SKIP_IF_NO_CUDA();
  expect_gemm_parity(Precision::BF16, 1300);
}

TEST(Tf32GemmCuda, ExplicitVariantUsesTf32EvenWithTheSwitchOffAndLeavesDoubleAlone) {
  MN_SKIP_IF_NO_CUDA();
  Tf32Guard g(false, CudaGemmVariant::TensorCoreTF32);
  for (int t = 0; t < 4; ++t) {
    const GemmCase p{(t & 1) != 0, (t & 2) != 0, 33, 65, 17, 1, 0.5, 2.0, 2};
    std::vector<double> ref;
    double mag;
    const auto f = run_gemm<float>(p, 400 + t, &ref, &mag);
    EXPECT_TRUE(test::all_close(ref, as_double(f), tf32_bound(p.K, mag), 0)) << p.str();
    // double ignores TensorCoreTF32 (runs Tiled): the float64 bound of test_gemm.cpp.
    const auto d = run_gemm<double>(p, 410 + t, &ref, &mag);
    const double u64 = std::numeric_limits<double>::epsilon() / 2;
    EXPECT_TRUE(test::all_close(ref, as_double(d), 8 * (std::sqrt(17.0) + 2) * u64 * mag, 0))
        << "double " << p.str();
  }
}

TEST(Tf32GemmCuda, SwitchOffIsFp32Accurate) {
  MN_SKIP_IF_NO_CUDA();
  expect_gemm_parity(Precision::FP32, 500);
}

// With the switch on, the float result must show TF32 rounding: some entry is
// further from the float64 oracle than the FP32 bound allows (for these inputs a
// CPU simulation of TF32 rounding gives a largest error ~8x that bound, and ~0.04x
// the TF32 bound). Catches a silent FP32 fallback.
TEST(Tf32GemmCuda, SwitchOnReallyRoundsToTf32) {
  MN_SKIP_IF_NO_CUDA();
  Tf32Guard g(true);
  const GemmCase p{false, false, 64, 64, 256};
  std::vector<double> ref;
  double mag;
  const auto got = run_gemm<float>(p, 600, &ref, &mag);
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::abs(ref[i] - got[i]));
  EXPECT_GT(worst, fp32_bound(p.K, mag));
  EXPECT_LE(worst, tf32_bound(p.K, mag));
}

TEST(Tf32GemmCuda, TensorLevelMatmul) {
  MN_SKIP_IF_NO_CUDA();
  Tf32Guard g(true);
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    const Shape sa = ta ? Shape{2, 70, 33} : Shape{2, 33, 70};
    const Shape sb = tb ? Shape{2, 45, 70} : Shape{2, 70, 45};
    const Tensor a = test::rand(sa, -1, 1, DType::F32, Device::cpu(), 90 + t);
    const Tensor b = test::rand(sb, -1, 1, DType::F32, Device::cpu(), 95 + t);
    const Tensor ref = matmul(a.to(DType::F64), b.to(DType::F64), ta, tb);
    const Tensor got = matmul(a.cuda(), b.cuda(), ta, tb);
    // K = 70 products of size <= 1: sum|ab| <= 70.
    EXPECT_TRUE(test::all_close(ref, got.cpu(), tf32_bound(70, 70.0), 0)) << "t=" << t;
  }
}

// ---- conv2d ----------------------------------------------------------------------------
Conv2dParams conv_params(int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh = 1,
                         int64_t dw = 1) {
  Conv2dParams p;
  p.stride_h = sh, p.stride_w = sw, p.pad_h = ph, p.pad_w = pw, p.dilation_h = dh,
  p.dilation_w = dw, p.algo = Conv2dAlgo::Gemm;
  return p;
}

Tensor abs_of(const Tensor& t) {
  std::vector<double> v = t.to_double_vector();
  for (double& x : v) x = std::abs(x);
  return Tensor::from_vector(v, t.shape());
}

double max_of(const Tensor& t) {
  double m = 0;
  for (double x : t.to_double_vector()) m = std::max(m, x);
  return m;
}

// Float inputs; float64 CPU references on the same (float-representable) values;
// the magnitudes sum|a b| are the same convolutions of |x|, |w|, |dy|.
struct ConvProblem {
  Tensor x, w, b, dy;                   // float32, CPU
  Tensor y_ref, dx_ref, dw_ref;         // float64
  double y_tol, dx_tol, dw_tol;
  ConvProblem(const Shape& xs, const Shape& ws, const Conv2dParams& p, Precision prec, uint64_t seed) {
    x = test::rand(xs, -1, 1, DType::F32, Device::cpu(), seed);
    w = test::rand(ws, -0.2, 0.2, DType::F32, Device::cpu(), seed + 1);
    b = test::rand({ws[0]}, -1, 1, DType::F32, Device::cpu(), seed + 2);
    const Tensor x64 = x.to(DType::F64), w64 = w.to(DType::F64);
    y_ref = conv2d_forward(x64, w64, b.to(DType::F64), p);
    dy = test::rand(y_ref.shape(), -1, 1, DType::F32, Device::cpu(), seed + 3);
    const Tensor dy64 = dy.to(DType::F64);
    dx_ref = conv2d_backward_data(dy64, w64, xs, p);
    dw_ref = conv2d_backward_weight(dy64, x64, ws, p);
    const int64_t C = ws[1], K = ws[0], R = ws[2], S = ws[3];
    const int64_t npq = y_ref.size(0) * y_ref.size(2) * y_ref.size(3);
    auto bound = [&](int64_t terms, double mag) {
      return prec_bound(prec, terms, mag);
    };
    // The forward bias is added once in float: 2^-24 |y| more, covered by the +2 of the bound.
    y_tol = bound(C * R * S, max_of(conv2d_forward(abs_of(x64), abs_of(w64), Tensor(), p)) + 1.0);
    dx_tol = bound(K * R * S, max_of(conv2d_backward_data(abs_of(dy64), abs_of(w64), xs, p)));
    dw_tol = bound(npq, max_of(conv2d_backward_weight(abs_of(dy64), abs_of(x64), ws, p)));
  }
};

void expect_conv_parity(const Shape& xs, const Shape& ws, const Conv2dParams& p, Precision prec,
                        uint64_t seed) {
  PrecisionGuard g(prec);
  ConvProblem c(xs, ws, p, prec, seed);
  const Device d = Device::cuda();
  const std::string what = std::string(precision_name(prec)) + " x " + shape_str(xs) + " w " +
                           shape_str(ws) + " stride " + std::to_string(p.stride_h) + "," +
                           std::to_string(p.stride_w) + " pad " + std::to_string(p.pad_h) + "," +
                           std::to_string(p.pad_w) + " dil " + std::to_string(p.dilation_h) + "," +
                           std::to_string(p.dilation_w);
  const Tensor y = conv2d_forward(c.x.to(d), c.w.to(d), c.b.to(d), p);
  EXPECT_TRUE(test::all_close(c.y_ref, y.cpu(), c.y_tol, 0)) << "forward " << what;
  const Tensor dx = conv2d_backward_data(c.dy.to(d), c.w.to(d), xs, p);
  EXPECT_TRUE(test::all_close(c.dx_ref, dx.cpu(), c.dx_tol, 0)) << "backward-data " << what;
  const Tensor dw = conv2d_backward_weight(c.dy.to(d), c.x.to(d), ws, p);
  EXPECT_TRUE(test::all_close(c.dw_ref, dw.cpu(), c.dw_tol, 0)) << "backward-weight " << what;
  // Split-K partials are summed in a fixed order: a second run is bit-identical.
  const Tensor dw2 = conv2d_backward_weight(c.dy.to(d), c.x.to(d), ws, p);
  EXPECT_TRUE(dw.to_vector<float>() == dw2.to_vector<float>())
      << "backward-weight determinism " << what;
}

struct ConvShape {
  Shape x, w;
  Conv2dParams p;
};

// The Koch layers with their real C, K, R, S, H, W at batch 2 (backward-weight
// then splits N*P*Q into 10 to 144 ranges), and odd shapes: strides, padding,
// dilation, 1x1, outputs that are not multiples of the 64 x 128 tile.
std::vector<ConvShape> conv_shapes() {
  return {
      {{2, 1, 105, 105}, {64, 1, 10, 10}, conv_params(1, 1, 0, 0)},
      {{2, 64, 48, 48}, {128, 64, 7, 7}, conv_params(1, 1, 0, 0)},
      {{2, 128, 21, 21}, {128, 128, 4, 4}, conv_params(1, 1, 0, 0)},
      {{2, 128, 9, 9}, {256, 128, 4, 4}, conv_params(1, 1, 0, 0)},
      {{3, 5, 13, 11}, {7, 5, 3, 2}, conv_params(2, 1, 1, 2, 2, 1)},
      {{2, 3, 11, 10}, {5, 3, 2, 3}, conv_params(1, 2, 2, 1, 2, 3)},
      {{3, 17, 13, 19}, {65, 17, 3, 3}, conv_params(2, 1, 1, 1)},
      {{1, 1, 67, 65}, {70, 1, 5, 3}, conv_params(1, 1, 2, 1)},
      {{3, 4, 5, 5}, {2, 4, 1, 1}, conv_params(1, 1, 0, 0)},
      {{2, 1, 4, 4}, {2, 1, 4, 4}, conv_params(1, 1, 0, 0)},
      // conv4 (the CPU presets' trunk): 3 x 3, padding 1, 64 channels, 28 x 28 halving.
      {{2, 1, 28, 28}, {64, 1, 3, 3}, conv_params(1, 1, 1, 1)},
      {{2, 64, 14, 14}, {64, 64, 3, 3}, conv_params(1, 1, 1, 1)},
      {{2, 64, 3, 3}, {64, 64, 3, 3}, conv_params(1, 1, 1, 1)},
  };
}

// Both TF32 kernels: the mma.sync one (default) and the older WMMA one (tc_mma off).
TEST(Tf32ConvCuda, ParityKochConv4AndOddShapesBothKernels) {
  MN_SKIP_IF_NO_CUDA();
  const CudaSpeedups saved = cuda_speedups();
  for (bool mma : {true, false}) {
    CudaSpeedups sp = saved;
    sp.tc_mma = mma;
    set_cuda_speedups(sp);
    uint64_t seed = 700;
    for (const ConvShape& s : conv_shapes()) expect_conv_parity(s.x, s.w, s.p, Precision::TF32, seed += 5);
  }
  set_cuda_speedups(saved);
}

TEST(Bf16ConvCuda, ParityKochConv4AndOddShapes) {
  MN_SKIP_IF_NO_CUDA();
  uint64_t seed = 1700;
  for (const ConvShape& s : conv_shapes()) expect_conv_parity(s.x, s.w, s.p, Precision::BF16, seed += 5);
}

TEST(Tf32ConvCuda, SwitchOffIsFp32Accurate) {
  MN_SKIP_IF_NO_CUDA();
  uint64_t seed = 800;
  for (const ConvShape& s : conv_shapes()) expect_conv_parity(s.x, s.w, s.p, Precision::FP32, seed += 5);
}

// As for the GEMM: with the switch on, the forward output shows TF32 rounding
// beyond the FP32 bound, and the Direct oracle is never affected by the switch.
// Relative to the typical TF32 error the FP32 bound grows like K, so a short
// reduction separates them clearly (C*R*S = 144: a CPU simulation of TF32 rounding
// gives a largest error ~10x the FP32 bound; at 3136 it would be ~1x).
TEST(Tf32ConvCuda, SwitchOnReallyRoundsToTf32AndDirectIgnoresIt) {
  MN_SKIP_IF_NO_CUDA();
  Tf32Guard g(true);
  const Shape xs{2, 16, 12, 12}, ws{32, 16, 3, 3};
  const Conv2dParams p = conv_params(1, 1, 0, 0);
  ConvProblem c(xs, ws, p, Precision::TF32, 900);
  ConvProblem f(xs, ws, p, Precision::FP32, 900);  // same inputs, the FP32 tolerance
  const Device d = Device::cuda();
  const auto ref = c.y_ref.to_double_vector();
  const auto y = conv2d_forward(c.x.to(d), c.w.to(d), c.b.to(d), p).to_double_vector();
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::abs(ref[i] - y[i]));
  EXPECT_GT(worst, f.y_tol);
  EXPECT_LE(worst, c.y_tol);
  Conv2dParams pd = p;
  pd.algo = Conv2dAlgo::Direct;
  EXPECT_TRUE(test::all_close(c.y_ref, conv2d_forward(c.x.to(d), c.w.to(d), c.b.to(d), pd).cpu(),
                              f.y_tol, 0));
}

TEST(Tf32ConvCuda, DoubleIsNeverAffected) {
  MN_SKIP_IF_NO_CUDA();
  Tf32Guard g(true);
  const Shape xs{2, 3, 11, 10}, ws{5, 3, 2, 3};
  const Conv2dParams p = conv_params(1, 2, 2, 1, 2, 3);
  const Tensor x = test::rand(xs, -1, 1, DType::F64, Device::cpu(), 950);
  const Tensor w = test::rand(ws, -1, 1, DType::F64, Device::cpu(), 951);
  const Tensor y = conv2d_forward(x, w, Tensor(), p);
  // float64, at most 18 terms of size <= 1: 1e-12 (as tests/kernels/test_conv2d.cpp).
  EXPECT_TRUE(test::all_close(
      y, conv2d_forward(x.cuda(), w.cuda(), Tensor(), p).cpu(), 1e-12, 0));
}
// ---- the precision policy on the GPU: TF32 and BF16 never reach distances ------------------
// 64 points a small step (0.01) apart around a common offset (1.0 in 128 dims): a.b is
// near 128 while a squared distance is near 0.026, so TF32's 2^-11 relative rounding of
// a.b (about 0.06) would swamp it. The pairwise distances, forward and backward, must be
// bit-identical with the switch off, on, and with the TF32 variant selected; the same
// Gram product through matmul must differ with the switch on (the switch is live) and
// not inside an Fp32Scope.
TEST(Tf32PolicyCuda, PairwiseDistancesAndScopedMatmulIgnoreTheSwitch) {
  MN_SKIP_IF_NO_CUDA();
  const Device d = Device::cuda();
  const Tensor noise = test::rand({64, 128}, -0.01, 0.01, DType::F64, Device::cpu(), 960);
  std::vector<double> v = noise.to_double_vector();
  for (double& e : v) e += 1.0;
  const Tensor x = Tensor::from_vector(v, {64, 128}).to(DType::F32).to(d);
  const Tensor g = test::rand({64, 64}, -1, 1, DType::F32, d, 961);
  for (Metric m : {Metric::L2Squared, Metric::L2, Metric::Cosine}) {
    SCOPED_TRACE(metric_name(m));
    std::vector<Tensor> outs;
    for (int policy = 0; policy < 4; ++policy) {  // FP32, TF32, TF32 on WMMA by name, BF16
      PrecisionGuard guard(policy == 0 ? Precision::FP32 : policy == 3 ? Precision::BF16 : Precision::TF32,
                           policy == 2 ? CudaGemmVariant::TensorCoreTF32 : CudaGemmVariant::Tiled);
      const PairwiseResult r = pairwise_distance_forward(m, x, x);
      const auto gr = pairwise_distance_backward(m, x, x, r, g);
      outs.push_back(r.out.cpu());
      outs.push_back(gr.first.cpu());
    }
    for (int k = 2; k < 8; ++k)
      EXPECT_TRUE(test::all_close(outs[k % 2], outs[k], 0, 0)) << "policy " << k / 2 << (k % 2 ? " backward" : " forward");
  }
  Tensor fp32, tf32, bf16, scoped;
  {
    Tf32Guard guard(false);
    fp32 = matmul(x, x, false, true).cpu();
  }
  {
    PrecisionGuard guard(Precision::BF16);
    bf16 = matmul(x, x, false, true).cpu();
    const Fp32Scope s;
    EXPECT_TRUE(test::all_close(fp32, matmul(x, x, false, true).cpu(), 0, 0)) << "matmul used BF16 inside an Fp32Scope";
  }
  EXPECT_FALSE(test::all_close(fp32, bf16, 1e-3, 0)) << "the BF16 setting changed nothing";
  {
    Tf32Guard guard(true);
    tf32 = matmul(x, x, false, true).cpu();
    const Fp32Scope s;
    scoped = matmul(x, x, false, true).cpu();
  }
  EXPECT_FALSE(test::all_close(fp32, tf32, 1e-3, 0)) << "the TF32 switch changed nothing: the test measures nothing";
  EXPECT_TRUE(test::all_close(fp32, scoped, 0, 0)) << "matmul used TF32 inside an Fp32Scope";
}
#endif  // MN_WITH_CUDA

}  // namespace
}  // namespace mn::kernels
