// The mma.sync tensor-core kernels on a GPU (kernels/cuda/mma_*.cu), beyond the parity
// tests of test_tf32.cpp (which run them through the dispatch in TF32 and BF16):
//   - the rounding is what the policy says: the result equals, to FP32 accumulation
//     error, the float64 product of the inputs rounded to TF32 (nearest, ties away) or
//     BF16 (nearest even), and differs from the unrounded product by more than that;
//   - the fused bias + ReLU epilogue gives the same bits as the convolution followed by
//     a ReLU pass (same kernel, same sums), with the fusion on and off;
//   - the Koch layers at the study's batch (150 images: 2-17 x 10^7 outputs, split-K over
//     2.6 x 10^5 positions) against the FP32 GPU kernels, all three passes, both
//     precisions (skipped with MN_TEST_SHAPES=small);
//   - the Koch dense layer (150 x 9216 -> 4096, split-K) through matmul.
// Tolerances as in test_tf32.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/activation.h"
#include "kernels/conv2d.h"
#include "kernels/gemm.h"
#include "kernels/gemm_config.h"
#include "kernels/mma_layout.h"
#include "tests/common/test_util.h"

namespace mn::kernels {
namespace {

constexpr double kU32 = 1.0 / (1 << 24);
double fp32_bound(int64_t K, double mag) { return 8 * (std::sqrt(double(K)) + 2) * kU32 * mag; }
double tc_bound(Precision p, int64_t K, double mag) {
  return 2 * (p == Precision::BF16 ? 1.0 / 256 : 1.0 / 1024) * mag + fp32_bound(K, mag);
}

// x rounded as the tensor cores round their inputs (kernels/mma_layout.h, host versions).
Tensor rounded(const Tensor& x, Precision p) {
  std::vector<float> v = x.to_vector<float>();
  for (float& e : v)
    e = p == Precision::TF32 ? mma::u2f(mma::to_tf32(mma::f2u(e)))
                             : mma::u2f(uint32_t(mma::bf16_rn_host(mma::f2u(e))) << 16);
  return Tensor::from_vector(v, x.shape());
}
double max_abs(const Tensor& t) {
  double m = 0;
  for (double x : t.to_double_vector()) m = std::max(m, std::abs(x));
  return m;
}
double max_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to_double_vector(), y = b.to_double_vector();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}
Tensor abs_t(const Tensor& t) {
  std::vector<double> v = t.to_double_vector();
  for (double& x : v) x = std::abs(x);
  return Tensor::from_vector(v, t.shape());
}

TEST(MmaRoundingCuda, GemmAndConvEqualTheProductOfRoundedInputs) {
  MN_SKIP_IF_NO_CUDA();
  for (Precision p : {Precision::TF32, Precision::BF16}) {
    SCOPED_TRACE(precision_name(p));
    PrecisionScope scope(p);
    // GEMM, K = 200.
    const Tensor a = test::rand({70, 200}, -1, 1, DType::F32, Device::cpu(), 10);
    const Tensor b = test::rand({200, 90}, -1, 1, DType::F32, Device::cpu(), 11);
    const Tensor got = matmul(a.cuda(), b.cuda()).cpu();
    const Tensor exact = matmul(a.to(DType::F64), b.to(DType::F64));
    const Tensor want = matmul(rounded(a, p).to(DType::F64), rounded(b, p).to(DType::F64));
    const double mag = max_abs(matmul(abs_t(a), abs_t(b)));
    EXPECT_LE(max_diff(got, want), fp32_bound(200, mag)) << "not the product of the rounded inputs";
    EXPECT_GT(max_diff(got, exact), fp32_bound(200, mag)) << "no rounding at all: an FP32 kernel ran";
    // Convolution forward, C R S = 144.
    Conv2dParams cp;
    const Tensor x = test::rand({2, 16, 12, 12}, -1, 1, DType::F32, Device::cpu(), 12);
    const Tensor w = test::rand({32, 16, 3, 3}, -1, 1, DType::F32, Device::cpu(), 13);
    const Tensor y = conv2d_forward(x.cuda(), w.cuda(), Tensor(), cp).cpu();
    const Tensor ywant = conv2d_forward(rounded(x, p).to(DType::F64), rounded(w, p).to(DType::F64), Tensor(), cp);
    const Tensor yexact = conv2d_forward(x.to(DType::F64), w.to(DType::F64), Tensor(), cp);
    const double ymag = max_abs(conv2d_forward(abs_t(x), abs_t(w), Tensor(), cp));
    EXPECT_LE(max_diff(y, ywant), fp32_bound(144, ymag)) << "conv: not the product of the rounded inputs";
    EXPECT_GT(max_diff(y, yexact), fp32_bound(144, ymag)) << "conv: no rounding at all";
  }
}

TEST(MmaFusedReluCuda, BiasAndReluInTheEpilogueEqualConvThenReluBitForBit) {
  MN_SKIP_IF_NO_CUDA();
  const CudaSpeedups saved = cuda_speedups();
  for (Precision p : {Precision::TF32, Precision::BF16}) {
    PrecisionScope scope(p);
    for (const auto& [xs, ws] : std::vector<std::pair<Shape, Shape>>{{{3, 1, 40, 40}, {64, 1, 10, 10}},
                                                                     {{2, 64, 20, 20}, {128, 64, 7, 7}}}) {
      const Tensor x = test::rand(xs, -1, 1, DType::F32, Device::cuda(), 20);
      const Tensor w = test::rand(ws, -0.2, 0.2, DType::F32, Device::cuda(), 21);
      const Tensor b = test::rand({ws[0]}, -0.5, 0.5, DType::F32, Device::cuda(), 22);
      Conv2dParams plain, fused;
      fused.relu = true;
      const Tensor want = activation_forward(Act::ReLU, conv2d_forward(x, w, b, plain)).cpu();
      for (bool on : {true, false}) {
        CudaSpeedups sp = saved;
        sp.conv_fused_relu = on;
        set_cuda_speedups(sp);
        const Tensor got = conv2d_forward(x, w, b, fused).cpu();
        EXPECT_TRUE(got.to_vector<float>() == want.to_vector<float>())
            << precision_name(p) << " " << shape_str(ws) << " fused " << on;
      }
    }
  }
  set_cuda_speedups(saved);
}

// The Koch layers at 150 images against the FP32 GPU kernels (which the parity tests
// hold to the float64 CPU oracle at batch 2): each pass within the tensor-core bound of
// the FP32 result, the bound's magnitude from the FP32 kernels on |x|, |w|, |dy|.
TEST(MmaKochCuda, LayersAtTheStudysBatchAgainstFp32AllPasses) {
  MN_SKIP_IF_NO_CUDA();
  MN_SKIP_IF_SMALL_SHAPES_ONLY();
  struct L {
    Shape x, w;
  };
  const L layers[] = {{{150, 1, 105, 105}, {64, 1, 10, 10}},
                      {{150, 64, 48, 48}, {128, 64, 7, 7}},
                      {{150, 128, 21, 21}, {128, 128, 4, 4}},
                      {{150, 128, 9, 9}, {256, 128, 4, 4}}};
  const Conv2dParams cp;
  uint64_t seed = 40;
  for (const L& l : layers) {
    const Device d = Device::cuda();
    const Tensor x = test::rand(l.x, 0, 1, DType::F32, d, ++seed);
    const Tensor w = test::rand(l.w, -0.1, 0.1, DType::F32, d, ++seed);
    const Tensor b = test::rand({l.w[0]}, -0.1, 0.1, DType::F32, d, ++seed);
    Tensor y32, dx32, dw32, ymag, dxmag, dwmag, dy;
    {
      PrecisionScope fp32(Precision::FP32);
      y32 = conv2d_forward(x, w, b, cp);
      dy = test::rand(y32.shape(), -1, 1, DType::F32, d, ++seed);
      dx32 = conv2d_backward_data(dy, w, l.x, cp);
      dw32 = conv2d_backward_weight(dy, x, l.w, cp);
      const Tensor ax = abs_t(x.cpu()).to(DType::F32).to(d), aw = abs_t(w.cpu()).to(DType::F32).to(d);
      const Tensor ady = abs_t(dy.cpu()).to(DType::F32).to(d);
      ymag = conv2d_forward(ax, aw, Tensor(), cp);
      dxmag = conv2d_backward_data(ady, aw, l.x, cp);
      dwmag = conv2d_backward_weight(ady, ax, l.w, cp);
    }
    const int64_t crs = l.w[1] * l.w[2] * l.w[3], krs = l.w[0] * l.w[2] * l.w[3];
    const int64_t npq = y32.size(0) * y32.size(2) * y32.size(3);
    for (Precision p : {Precision::TF32, Precision::BF16}) {
      PrecisionScope scope(p);
      const std::string what = std::string(precision_name(p)) + " w " + shape_str(l.w);
      const double ytol = tc_bound(p, crs, max_abs(ymag.cpu()) + 0.1) + fp32_bound(crs, max_abs(ymag.cpu()) + 0.1);
      EXPECT_LE(max_diff(conv2d_forward(x, w, b, cp).cpu(), y32.cpu()), ytol) << "forward " << what;
      if (l.x[1] > 1) {
        const double tol = tc_bound(p, krs, max_abs(dxmag.cpu())) + fp32_bound(krs, max_abs(dxmag.cpu()));
        EXPECT_LE(max_diff(conv2d_backward_data(dy, w, l.x, cp).cpu(), dx32.cpu()), tol) << "backward-data " << what;
      }
      const double wtol = tc_bound(p, npq, max_abs(dwmag.cpu())) + fp32_bound(npq, max_abs(dwmag.cpu()));
      const Tensor dw = conv2d_backward_weight(dy, x, l.w, cp);
      EXPECT_LE(max_diff(dw.cpu(), dw32.cpu()), wtol) << "backward-weight " << what;
      EXPECT_TRUE(dw.cpu().to_vector<float>() == conv2d_backward_weight(dy, x, l.w, cp).cpu().to_vector<float>())
          << "backward-weight not deterministic " << what;
    }
  }
}

// The Koch dense layer's three products (forward, backward-data, backward-weight; the
// forward splits K = 9216) through matmul, against the FP32 GPU GEMM.
TEST(MmaKochCuda, DenseLayerProductsAgainstFp32) {
  MN_SKIP_IF_NO_CUDA();
  MN_SKIP_IF_SMALL_SHAPES_ONLY();
  const Device d = Device::cuda();
  const Tensor x = test::rand({150, 9216}, 0, 1, DType::F32, d, 60);
  const Tensor w = test::rand({4096, 9216}, -0.01, 0.01, DType::F32, d, 61);
  const Tensor dy = test::rand({150, 4096}, -1, 1, DType::F32, d, 62);
  struct Prod {
    const char* name;
    const Tensor &a, &b;
    bool ta, tb;
    int64_t K;
  };
  const Prod prods[] = {{"forward x w^T", x, w, false, true, 9216},
                        {"backward-data dy w", dy, w, false, false, 4096},
                        {"backward-weight dy^T x", dy, x, true, false, 150}};
  for (const Prod& pr : prods) {
    Tensor ref, mag;
    {
      PrecisionScope fp32(Precision::FP32);
      ref = matmul(pr.a, pr.b, pr.ta, pr.tb).cpu();
      mag = matmul(abs_t(pr.a.cpu()).to(DType::F32).to(d), abs_t(pr.b.cpu()).to(DType::F32).to(d), pr.ta, pr.tb).cpu();
    }
    for (Precision p : {Precision::TF32, Precision::BF16}) {
      PrecisionScope scope(p);
      const double tol = tc_bound(p, pr.K, max_abs(mag)) + fp32_bound(pr.K, max_abs(mag));
      EXPECT_LE(max_diff(matmul(pr.a, pr.b, pr.ta, pr.tb).cpu(), ref), tol) << pr.name << " " << precision_name(p);
    }
  }
}

}  // namespace
}  // namespace mn::kernels
