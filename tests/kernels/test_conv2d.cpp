// conv2d tests: forward against a textbook loop written here, backward-data and
// backward-weight against the adjoint identities of the (linear) convolution,
// float64 gradchecks through the tape, CPU-vs-CUDA parity (both CUDA versions)
// at the Koch shapes and at odd shapes, and error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/ops_conv.h"
#include "kernels/conv2d.h"
#include "kernels/cpu/conv2d_direct.h"
#include "kernels/gemm_config.h"
#include "runtime/cpu_features.h"
#include "runtime/parallel.h"
#include "tests/common/test_util.h"

namespace mn {
namespace {

using kernels::Conv2dAlgo;
using kernels::Conv2dParams;

Conv2dParams params(int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh = 1,
                    int64_t dw = 1, Conv2dAlgo a = Conv2dAlgo::Default) {
  Conv2dParams p;
  p.stride_h = sh, p.stride_w = sw, p.pad_h = ph, p.pad_w = pw, p.dilation_h = dh,
  p.dilation_w = dw, p.algo = a;
  return p;
}

// The textbook definition, seven loops, in double.
std::vector<double> reference_conv(const Tensor& x, const Tensor& w, const Tensor& b,
                                   const Conv2dParams& p) {
  const auto X = x.to_double_vector(), Wt = w.to_double_vector();
  const std::vector<double> B = b.defined() ? b.to_double_vector() : std::vector<double>();
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t K = w.size(0), R = w.size(2), S = w.size(3);
  const int64_t P = (H + 2 * p.pad_h - p.dilation_h * (R - 1) - 1) / p.stride_h + 1;
  const int64_t Q = (W + 2 * p.pad_w - p.dilation_w * (S - 1) - 1) / p.stride_w + 1;
  std::vector<double> y(N * K * P * Q);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t i = 0; i < P; ++i)
        for (int64_t j = 0; j < Q; ++j) {
          double acc = B.empty() ? 0.0 : B[k];
          for (int64_t c = 0; c < C; ++c)
            for (int64_t r = 0; r < R; ++r)
              for (int64_t s = 0; s < S; ++s) {
                const int64_t h = i * p.stride_h - p.pad_h + r * p.dilation_h;
                const int64_t ww = j * p.stride_w - p.pad_w + s * p.dilation_w;
                if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
                acc += Wt[((k * C + c) * R + r) * S + s] * X[((n * C + c) * H + h) * W + ww];
              }
          y[((n * K + k) * P + i) * Q + j] = acc;
        }
  return y;
}

double dot(const Tensor& a, const Tensor& b) {
  const auto u = a.to_double_vector(), v = b.to_double_vector();
  EXPECT_EQ(u.size(), v.size());
  double s = 0;
  for (size_t i = 0; i < u.size(); ++i) s += u[i] * v[i];
  return s;
}

struct Case {
  Shape x, w;
  Conv2dParams p;
};

std::vector<Case> odd_cases() {
  return {
      {{2, 3, 7, 6}, {4, 3, 3, 2}, params(1, 1, 0, 0)},
      {{1, 1, 9, 8}, {1, 1, 3, 3}, params(2, 1, 1, 0)},
      {{2, 2, 10, 9}, {3, 2, 3, 2}, params(2, 3, 1, 2)},
      {{2, 3, 11, 10}, {5, 3, 2, 3}, params(1, 2, 2, 1, 2, 3)},   // dilation
      {{3, 4, 5, 5}, {2, 4, 1, 1}, params(1, 1, 0, 0)},           // pointwise
      {{1, 2, 6, 7}, {3, 2, 1, 1}, params(2, 2, 0, 0)},           // strided 1x1
      {{2, 1, 4, 4}, {2, 1, 4, 4}, params(1, 1, 0, 0)},           // 1x1 output
  };
}

// ---- forward vs textbook loop ------------------------------------------------
TEST(Conv2dKernel, ForwardMatchesTextbookLoopFloat64) {
  for (Conv2dAlgo a : {Conv2dAlgo::Direct, Conv2dAlgo::Gemm}) {
    for (const Case& c : odd_cases()) {
      Conv2dParams p = c.p;
      p.algo = a;
      Tensor x = test::rand(c.x, -1, 1, DType::F64, Device::cpu(), 1);
      Tensor w = test::rand(c.w, -1, 1, DType::F64, Device::cpu(), 2);
      Tensor b = test::rand({c.w[0]}, -1, 1, DType::F64, Device::cpu(), 3);
      Tensor y = kernels::conv2d_forward(x, w, b, p);
      // float64 sums of at most C*R*S = 24 products of values in [-1, 1]:
      // rounding is ~1e-15, so 1e-12 is loose yet catches any indexing error.
      EXPECT_TRUE(test::all_close(reference_conv(x, w, b, p), y.to_double_vector(), 1e-12, 1e-12))
          << "algo " << int(a) << " x " << shape_str(c.x) << " w " << shape_str(c.w);
    }
  }
}

TEST(Conv2dKernel, ForwardFloat32KochLayerShapesSmallBatch) {
  // The four Koch layers at batch 1 (the GEMM path at the real C, K, R, S, H, W).
  const std::vector<std::pair<Shape, Shape>> layers = {{{1, 1, 105, 105}, {64, 1, 10, 10}},
                                                       {{1, 64, 48, 48}, {128, 64, 7, 7}},
                                                       {{1, 128, 21, 21}, {128, 128, 4, 4}},
                                                       {{1, 128, 9, 9}, {256, 128, 4, 4}}};
  for (const auto& [xs, ws] : layers) {
    Tensor x = test::rand(xs, 0, 1, DType::F32, Device::cpu(), 4);
    Tensor w = test::rand(ws, -0.05, 0.05, DType::F32, Device::cpu(), 5);
    Tensor b = test::rand({ws[0]}, -0.1, 0.1, DType::F32, Device::cpu(), 6);
    Tensor y = kernels::conv2d_forward(x, w, b, params(1, 1, 0, 0, 1, 1, Conv2dAlgo::Gemm));
    // Up to 3136 float32 products of magnitude <= 0.05: accumulated rounding
    // ~ sqrt(3136) * 6e-8 * |sum| << 1e-4; atol 1e-4 + rtol 1e-4.
    EXPECT_TRUE(test::all_close(reference_conv(x, w, b, Conv2dParams{}), y.to_double_vector(), 1e-4,
                                1e-4))
        << shape_str(xs) << " * " << shape_str(ws);
  }
}

// ---- backward via adjoint identities -------------------------------------------
// conv is linear in x: <conv(x, w), dy> = <x, bwd_data(dy, w)>, and linear in w:
// <conv(x, w), dy> = <w, bwd_weight(dy, x)> (no bias). db = sum of dy per channel.
TEST(Conv2dKernel, BackwardAdjointIdentitiesFloat64) {
  for (Conv2dAlgo a : {Conv2dAlgo::Direct, Conv2dAlgo::Gemm}) {
    for (const Case& c : odd_cases()) {
      Conv2dParams p = c.p;
      p.algo = a;
      Tensor x = test::rand(c.x, -1, 1, DType::F64, Device::cpu(), 7);
      Tensor w = test::rand(c.w, -1, 1, DType::F64, Device::cpu(), 8);
      Tensor y = kernels::conv2d_forward(x, w, Tensor(), p);
      Tensor dy = test::rand(y.shape(), -1, 1, DType::F64, Device::cpu(), 9);
      const double lhs = dot(y, dy);
      Tensor dx = kernels::conv2d_backward_data(dy, w, c.x, p);
      Tensor dw = kernels::conv2d_backward_weight(dy, x, c.w, p);
      // Both sides are the same float64 sum in a different order: 1e-10 relative.
      EXPECT_NEAR(lhs, dot(x, dx), 1e-10 * (1 + std::abs(lhs))) << "data, algo " << int(a);
      EXPECT_NEAR(lhs, dot(w, dw), 1e-10 * (1 + std::abs(lhs))) << "weight, algo " << int(a);
      Tensor db = kernels::conv2d_backward_bias(dy);
      const auto d = dy.to_double_vector();
      std::vector<double> ref(c.w[0], 0.0);
      const int64_t PQ = y.size(2) * y.size(3);
      for (size_t i = 0; i < d.size(); ++i) ref[(i / PQ) % c.w[0]] += d[i];
      EXPECT_TRUE(test::all_close(ref, db.to_double_vector(), 1e-12, 1e-12));
    }
  }
}

TEST(Conv2dKernel, GemmBackwardMatchesDirectFloat32) {
  for (const Case& c : odd_cases()) {
    Tensor x = test::rand(c.x, -1, 1, DType::F32, Device::cpu(), 10);
    Tensor w = test::rand(c.w, -1, 1, DType::F32, Device::cpu(), 11);
    Conv2dParams pd = c.p, pg = c.p;
    pd.algo = Conv2dAlgo::Direct, pg.algo = Conv2dAlgo::Gemm;
    Tensor y = kernels::conv2d_forward(x, w, Tensor(), pd);
    Tensor dy = test::rand(y.shape(), -1, 1, DType::F32, Device::cpu(), 12);
    // Sums of <= a few hundred float32 terms in [-1, 1]: 1e-5 absolute and relative.
    EXPECT_TRUE(test::all_close(kernels::conv2d_backward_data(dy, w, c.x, pd),
                                kernels::conv2d_backward_data(dy, w, c.x, pg), 1e-5, 1e-5));
    EXPECT_TRUE(test::all_close(kernels::conv2d_backward_weight(dy, x, c.w, pd),
                                kernels::conv2d_backward_weight(dy, x, c.w, pg), 1e-5, 1e-5));
  }
}

// The implicit-GEMM path (im2col rows packed straight from the input, dW^T as
// col * dY^T) against the direct loops on every instruction-set path this CPU
// supports (MN_CPU_ISA / set_cpu_isa), with C*R*S = 400 > KC = 256 so that the
// GEMM's depth blocking and the row source's row wrap-around are exercised.
TEST(Conv2dKernel, GemmPathMatchesDirectOnEveryIsa) {
  struct IsaCase {
    Shape x, w;
    Conv2dParams p;
  };
  const std::vector<IsaCase> cases = {{{3, 16, 19, 17}, {7, 16, 5, 5}, params(1, 1, 2, 1)},
                                      {{2, 16, 23, 21}, {9, 16, 5, 5}, params(2, 1, 0, 3, 2, 1)},
                                      // P*Q = 30 < 64: one product over all images
                                      {{4, 20, 8, 9}, {6, 20, 4, 4}, params(1, 1, 0, 0)}};
  for (CpuIsa isa : {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx512}) {
    if (!cpu_isa_supported(isa)) {
      std::printf("[  NOTE    ] %s path not supported by this CPU: not tested here\n",
                  cpu_isa_name(isa));
      continue;
    }
    CpuIsaScope scope(isa);
    for (DType dt : {DType::F64, DType::F32}) {
      // float64: sums of <= ~2000 products in [-1, 1], rounding ~1e-13: 1e-10.
      // float32: the same sums, rounding up to ~sqrt(2000) * 6e-8 * 500 = 1.4e-3
      // (a wrong or missing term is ~0.25): 5e-3 absolute + relative.
      const double tol = dt == DType::F64 ? 1e-10 : 5e-3;
      for (const IsaCase& c : cases) {
        SCOPED_TRACE(std::string(cpu_isa_name(isa)) + (dt == DType::F64 ? " f64 x " : " f32 x ") +
                     shape_str(c.x) + " w " + shape_str(c.w));
        Conv2dParams pd = c.p, pg = c.p;
        pd.algo = Conv2dAlgo::Direct, pg.algo = Conv2dAlgo::Gemm;
        Tensor x = test::rand(c.x, -1, 1, dt, Device::cpu(), 30);
        Tensor w = test::rand(c.w, -1, 1, dt, Device::cpu(), 31);
        Tensor b = test::rand({c.w[0]}, -1, 1, dt, Device::cpu(), 32);
        Tensor y = kernels::conv2d_forward(x, w, b, pd);
        EXPECT_TRUE(test::all_close(y, kernels::conv2d_forward(x, w, b, pg), tol, tol));
        Tensor dy = test::rand(y.shape(), -1, 1, dt, Device::cpu(), 33);
        EXPECT_TRUE(test::all_close(kernels::conv2d_backward_data(dy, w, c.x, pd),
                                    kernels::conv2d_backward_data(dy, w, c.x, pg), tol, tol));
        EXPECT_TRUE(test::all_close(kernels::conv2d_backward_weight(dy, x, c.w, pd),
                                    kernels::conv2d_backward_weight(dy, x, c.w, pg), tol, tol));
      }
    }
  }
}

// The CPU passes give bit-identical results for any thread count (backward-weight
// sums its image chunks in a fixed order over fixed chunks): 1, 2, 3 and 5
// threads, batch 23 (chunks of unequal size), float32 where rounding shows.
// Two shapes: P*Q = 60 (one product over all images) and 180 (per image).
TEST(Conv2dKernel, CpuResultsIndependentOfThreadCount) {
  for (const Shape& xs : {Shape{23, 3, 13, 11}, Shape{19, 3, 33, 11}}) {
    const int saved = num_threads();
    const Shape ws{5, 3, 3, 4};
    Conv2dParams p;
    p.stride_h = 2, p.pad_w = 1;
    Tensor x = test::rand(xs, -1, 1, DType::F32, Device::cpu(), 20);
    Tensor w = test::rand(ws, -1, 1, DType::F32, Device::cpu(), 21);
    std::vector<float> y1, dx1, dw1;
    for (int threads : {1, 2, 3, 5}) {
      set_num_threads(threads);
      Tensor y = kernels::conv2d_forward(x, w, Tensor(), p);
      Tensor dy = test::rand(y.shape(), -1, 1, DType::F32, Device::cpu(), 22);
      std::vector<float> yv = y.to_vector<float>(),
                         dxv = kernels::conv2d_backward_data(dy, w, xs, p).to_vector<float>(),
                         dwv = kernels::conv2d_backward_weight(dy, x, ws, p).to_vector<float>();
      if (threads == 1) {
        y1 = yv, dx1 = dxv, dw1 = dwv;
        continue;
      }
      EXPECT_EQ(yv, y1) << threads << " threads: forward, x " << shape_str(xs);
      EXPECT_EQ(dxv, dx1) << threads << " threads: backward-data";
      EXPECT_EQ(dwv, dw1) << threads << " threads: backward-weight";
    }
    set_num_threads(saved);
  }
}

// The vectorised direct kernels (float32, stride 1, small images; AVX2): forward
// with bias against the seven-loop reference in double, backward-data against
// the direct loops in double, backward-weight against the direct loops, on
// shapes that take them: 16 + 8 output channels (a half block), P*Q and C*R*S
// not multiples of the 6-wide tiles, one image (the work split over channel
// blocks instead of images), images summed in groups with a short last group
// (backward-weight), asymmetric kernels and padding, a 3x3 map, a reduction
// long enough to be cut into channel chunks (64 x 3 x 3 on 14x14), and for
// backward-data's scatter kernel 16 + 8 and 12 input channels (a half block, a
// part-filled block) and the sampling net's 5x5 layer (P*Q = 64: a short last
// tile of 4 positions). Each is also run with 1, 2 and 3 threads, which must
// agree bit for bit. The dispatch sends the backward-data of 3x3 "same" layers
// on maps of more than 16 positions to the flipped correlation, the others to
// the scatter kernel, so the scatter kernel is also called directly on every
// shape (into a NaN-filled dx, which it must overwrite entirely).
TEST(Conv2dKernel, VectorDirectMatchesReferenceAndIsThreadIndependent) {
  if (!cpu_isa_supported(CpuIsa::Avx2)) {
    std::printf("[  SKIPPED ] this CPU lacks AVX2: the vectorised direct kernel is not used here\n");
    GTEST_SKIP() << "no AVX2";
  }
  using kernels::Conv2dPass;
  CpuIsaScope scope(CpuIsa::Avx2);
  struct VCase {
    Shape x, w;
    Conv2dParams p;
  };
  const std::vector<VCase> cases = {
      {{3, 16, 14, 14}, {64, 16, 3, 3}, params(1, 1, 1, 1)},
      {{2, 64, 14, 14}, {24, 64, 3, 3}, params(1, 1, 1, 1)},
      {{2, 8, 12, 12}, {24, 8, 5, 5}, params(1, 1, 0, 0)},
      {{3, 32, 12, 12}, {64, 32, 5, 5}, params(1, 1, 0, 0)},  // the sampling net's conv2
      {{1, 32, 12, 12}, {64, 32, 5, 5}, params(1, 1, 0, 0)},
      {{1, 32, 7, 7}, {32, 32, 3, 3}, params(1, 1, 1, 1)},
      {{2, 8, 9, 11}, {16, 8, 3, 5}, params(1, 1, 1, 2)},
      {{2, 24, 10, 9}, {16, 24, 5, 3}, params(1, 1, 2, 0)},
      {{2, 12, 8, 8}, {8, 12, 3, 3}, params(1, 1, 1, 1)},
      {{5, 64, 3, 3}, {8, 64, 3, 3}, params(1, 1, 1, 1)},
      // backward-weight sums images in groups of ceil(128 / P*Q) = 6: a group of 6, then 1
      {{7, 16, 5, 5}, {16, 16, 3, 3}, params(1, 1, 1, 1)},
  };
  const int saved = num_threads();
  for (const VCase& c : cases) {
    SCOPED_TRACE("x " + shape_str(c.x) + " w " + shape_str(c.w));
    Tensor x = test::rand(c.x, -1, 1, DType::F32, Device::cpu(), 40);
    Tensor w = test::rand(c.w, -1, 1, DType::F32, Device::cpu(), 41);
    Tensor b = test::rand({c.w[0]}, -1, 1, DType::F32, Device::cpu(), 42);
    const kernels::Conv2dGeom g = kernels::conv2d_geometry("test", c.x, c.w, c.p);
    ASSERT_TRUE(kernels::conv2d_cpu_vector_direct_applies(g, Conv2dPass::Forward));
    ASSERT_TRUE(kernels::conv2d_cpu_vector_direct_applies(g, Conv2dPass::BackwardData));
    ASSERT_TRUE(kernels::conv2d_cpu_vector_direct_applies(g, Conv2dPass::BackwardWeight));
    const std::vector<double> ref = reference_conv(x, w, b, c.p);
    Tensor dy = test::rand({g.N, g.K, g.P, g.Q}, -1, 1, DType::F32, Device::cpu(), 43);
    Conv2dParams pd = c.p;
    pd.algo = Conv2dAlgo::Direct;
    const Tensor dx_ref = kernels::conv2d_backward_data(dy.to(DType::F64), w.to(DType::F64), c.x, pd);
    // The scatter kernel called directly.
    const kernels::detail::DirectConv d{g.N, g.C, g.H, g.W, g.K, g.R, g.S, g.ph, g.pw};
    std::vector<float> wpT(static_cast<size_t>(kernels::detail::direct_data_packed_size(d)));
    kernels::detail::pack_direct_data_weights(d, w.data<float>(), wpT.data());
    auto scatter = [&] {
      Tensor dx = Tensor::empty(c.x, DType::F32);
      dx.fill_(std::nan(""));
      kernels::detail::direct_conv_data_avx2(d, dy.data<float>(), wpT.data(), dx.data<float>());
      return dx;
    };
    std::vector<float> y1, dx1, dw1, dxs1;
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      Tensor y = kernels::conv2d_forward(x, w, b, c.p);
      Tensor dx = kernels::conv2d_backward_data(dy, w, c.x, c.p);
      Tensor dw = kernels::conv2d_backward_weight(dy, x, c.w, c.p);
      Tensor dxs = scatter();
      if (threads == 1) {
        // Forward: float sums of <= 600 products in [-1, 1] (~1e-5 rounding; a
        // wrong or missing term is ~0.25). Backward-weight sums N*P*Q <= 600
        // products the same way, backward-data K*R*S <= 1600 (measured worst
        // error 5e-5 at |dx| up to ~40 on the 5x5 layer, against the double
        // reference; every case stays within 3e-5 + 3e-5 |dx|).
        EXPECT_TRUE(test::all_close(ref, y.to_double_vector(), 1e-4, 1e-4));
        EXPECT_TRUE(test::all_close(dx_ref, dx, 1e-4, 1e-4));
        EXPECT_TRUE(test::all_close(dx_ref, dxs, 1e-4, 1e-4)) << "scatter kernel";
        EXPECT_TRUE(test::all_close(kernels::conv2d_backward_weight(dy, x, c.w, pd), dw, 1e-4, 1e-4));
        y1 = y.to_vector<float>(), dx1 = dx.to_vector<float>(), dw1 = dw.to_vector<float>();
        dxs1 = dxs.to_vector<float>();
        continue;
      }
      EXPECT_EQ(y.to_vector<float>(), y1) << threads << " threads: forward";
      EXPECT_EQ(dx.to_vector<float>(), dx1) << threads << " threads: backward-data";
      EXPECT_EQ(dw.to_vector<float>(), dw1) << threads << " threads: backward-weight";
      EXPECT_EQ(dxs.to_vector<float>(), dxs1) << threads << " threads: scatter kernel";
    }
    set_num_threads(saved);
  }
  // Forward only at depths 16..63 (backward-weight keeps the GEMM there): the
  // sampling net's conv1 (depth 25, 576 positions: the transposed copy-out) with
  // a bias, and a map of 4 positions (the element-wise copy-out) without one.
  struct FCase {
    Shape x, w;
    bool bias;
  };
  for (const FCase& c : std::vector<FCase>{{{3, 1, 28, 28}, {32, 1, 5, 5}, true},
                                           {{2, 2, 4, 4}, {24, 2, 3, 3}, false}}) {
    SCOPED_TRACE("forward only: x " + shape_str(c.x) + " w " + shape_str(c.w));
    const kernels::Conv2dGeom g = kernels::conv2d_geometry("test", c.x, c.w, Conv2dParams{});
    ASSERT_TRUE(kernels::conv2d_cpu_vector_direct_applies(g, Conv2dPass::Forward));
    EXPECT_FALSE(kernels::conv2d_cpu_vector_direct_applies(g, Conv2dPass::BackwardWeight));
    Tensor x = test::rand(c.x, -1, 1, DType::F32, Device::cpu(), 44);
    Tensor w = test::rand(c.w, -1, 1, DType::F32, Device::cpu(), 45);
    Tensor b = c.bias ? test::rand({c.w[0]}, -1, 1, DType::F32, Device::cpu(), 46) : Tensor();
    std::vector<float> y1;
    for (int threads : {1, 3}) {
      set_num_threads(threads);
      Tensor y = kernels::conv2d_forward(x, w, b, Conv2dParams{});
      if (threads == 1) {
        EXPECT_TRUE(test::all_close(reference_conv(x, w, b, Conv2dParams{}), y.to_double_vector(), 1e-4, 1e-4));
        y1 = y.to_vector<float>();
      } else {
        EXPECT_EQ(y.to_vector<float>(), y1) << threads << " threads";
      }
    }
    set_num_threads(saved);
  }
  // The sampling net's conv2 at its training batch takes the kernel for all three passes.
  const kernels::Conv2dGeom sampling2 =
      kernels::conv2d_geometry("test", {128, 32, 12, 12}, {64, 32, 5, 5}, Conv2dParams{});
  for (Conv2dPass pass : {Conv2dPass::Forward, Conv2dPass::BackwardData, Conv2dPass::BackwardWeight})
    EXPECT_TRUE(kernels::conv2d_cpu_vector_direct_applies(sampling2, pass)) << int(pass);
  // Not taken where it does not apply: stride 2, output channels not a multiple of
  // 8, a single input channel of a 3x3 kernel (depth 9 < 16), Koch's fourth layer
  // (depth 2048), or switched off.
  auto applies = [](const Shape& xs, const Shape& ws, const Conv2dParams& p) {
    return kernels::conv2d_cpu_vector_direct_applies(kernels::conv2d_geometry("test", xs, ws, p),
                                                     Conv2dPass::Forward);
  };
  EXPECT_FALSE(applies({2, 16, 14, 14}, {16, 16, 3, 3}, params(2, 2, 1, 1)));
  EXPECT_FALSE(applies({2, 16, 14, 14}, {12, 16, 3, 3}, params(1, 1, 1, 1)));
  EXPECT_FALSE(applies({2, 1, 28, 28}, {64, 1, 3, 3}, params(1, 1, 1, 1)));
  EXPECT_FALSE(applies({2, 128, 9, 9}, {256, 128, 4, 4}, params(1, 1, 0, 0)));
  EXPECT_TRUE(applies({2, 16, 14, 14}, {16, 16, 3, 3}, params(1, 1, 1, 1)));
  auto applies_data = [](const Shape& xs, const Shape& ws, const Conv2dParams& p) {
    return kernels::conv2d_cpu_vector_direct_applies(kernels::conv2d_geometry("test", xs, ws, p),
                                                     Conv2dPass::BackwardData);
  };
  EXPECT_FALSE(applies_data({2, 32, 12, 12}, {64, 32, 5, 5}, params(2, 2, 0, 0)));
  EXPECT_FALSE(applies_data({2, 32, 12, 12}, {12, 32, 5, 5}, params(1, 1, 0, 0)));
  kernels::set_conv2d_cpu_vector_direct(false);
  EXPECT_FALSE(applies({2, 16, 14, 14}, {16, 16, 3, 3}, params(1, 1, 1, 1)));
  for (Conv2dPass pass : {Conv2dPass::Forward, Conv2dPass::BackwardData, Conv2dPass::BackwardWeight})
    EXPECT_FALSE(kernels::conv2d_cpu_vector_direct_applies(sampling2, pass)) << int(pass);
  kernels::set_conv2d_cpu_vector_direct(true);
}

// ---- gradcheck through the tape --------------------------------------------------
TEST(Conv2dGradcheck, InputWeightBiasFloat64) {
  const std::vector<Case> cases = {
      {{2, 3, 6, 5}, {4, 3, 3, 2}, params(1, 1, 0, 0)},
      {{2, 2, 7, 6}, {3, 2, 3, 3}, params(2, 1, 1, 2)},
      {{1, 2, 9, 8}, {2, 2, 2, 3}, params(1, 2, 1, 1, 2, 2)},
      {{2, 1, 5, 5}, {2, 1, 1, 1}, params(1, 1, 0, 0)},
  };
  for (Conv2dAlgo a : {Conv2dAlgo::Direct, Conv2dAlgo::Gemm}) {
    for (const Case& c : cases) {
      Conv2dParams p = c.p;
      p.algo = a;
      auto f = [p](const std::vector<ag::Variable>& v) { return ag::conv2d(v[0], v[1], v[2], p); };
      const std::vector<Tensor> in = {test::rand(c.x, -1, 1, DType::F64, Device::cpu(), 13),
                                      test::rand(c.w, -1, 1, DType::F64, Device::cpu(), 14),
                                      test::rand({c.w[0]}, -1, 1, DType::F64, Device::cpu(), 15)};
      ag::GradcheckResult r = ag::gradcheck(f, in);
      EXPECT_TRUE(r.ok) << "algo " << int(a) << " x " << shape_str(c.x) << ": " << r.message;
      EXPECT_EQ(r.skipped, 0) << "conv2d is smooth: nothing should be skipped";
    }
  }
}

TEST(Conv2dGradcheck, WithoutBiasAndOnlyWeightRequiresGrad) {
  auto f = [](const std::vector<ag::Variable>& v) {
    return ag::conv2d(v[0], v[1], ag::Variable(), params(1, 1, 1, 1));
  };
  ag::GradcheckOptions o;
  o.check_input = {false, true};
  ag::GradcheckResult r = ag::gradcheck(f,
                                        {test::rand({2, 2, 5, 4}, -1, 1, DType::F64, Device::cpu(), 16),
                                         test::rand({3, 2, 3, 3}, -1, 1, DType::F64, Device::cpu(), 17)},
                                        o);
  EXPECT_TRUE(r.ok) << r.message;
}

// ---- error paths -------------------------------------------------------------------
TEST(Conv2dKernel, ErrorsNameShapes) {
  Tensor x = Tensor::zeros({2, 3, 8, 8});
  try {
    kernels::conv2d_forward(x, Tensor::zeros({4, 2, 3, 3}), Tensor(), Conv2dParams{});
    FAIL() << "channel mismatch not detected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(2, 3, 8, 8)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(4, 2, 3, 3)"), std::string::npos) << e.what();
  }
  try {
    kernels::conv2d_forward(x, Tensor::zeros({4, 3, 9, 9}), Tensor(), Conv2dParams{});
    FAIL() << "kernel larger than input not detected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("larger than padded input"), std::string::npos) << e.what();
  }
  EXPECT_THROW(kernels::conv2d_forward(x, Tensor::zeros({4, 3, 0, 3}), Tensor(), Conv2dParams{}),
               Error);
  EXPECT_THROW(kernels::conv2d_forward(x, Tensor::zeros({4, 3, 3, 3}), Tensor::zeros({5}),
                                       Conv2dParams{}),
               Error);
  EXPECT_THROW(kernels::conv2d_forward(Tensor::zeros({3, 8, 8}), Tensor::zeros({4, 3, 3, 3}),
                                       Tensor(), Conv2dParams{}),
               Error);
  EXPECT_THROW(kernels::conv2d_forward(x, Tensor::zeros({4, 3, 3, 3}), Tensor(), params(0, 1, 0, 0)),
               Error);
}

// ---- CPU vs CUDA -------------------------------------------------------------------
void expect_parity(const Shape& xs, const Shape& ws, const Conv2dParams& p0, DType dt,
                   double tol) {
  Tensor x = test::rand(xs, -1, 1, dt, Device::cpu(), 20);
  Tensor w = test::rand(ws, -0.2, 0.2, dt, Device::cpu(), 21);
  Tensor b = test::rand({ws[0]}, -1, 1, dt, Device::cpu(), 22);
  Conv2dParams pc = p0;
  pc.algo = Conv2dAlgo::Gemm;
  Tensor y = kernels::conv2d_forward(x, w, b, pc);
  Tensor dy = test::rand(y.shape(), -1, 1, dt, Device::cpu(), 23);
  Tensor dx = kernels::conv2d_backward_data(dy, w, xs, pc);
  Tensor dw = kernels::conv2d_backward_weight(dy, x, ws, pc);
  Tensor db = kernels::conv2d_backward_bias(dy);
  const Device g = Device::cuda();
  for (Conv2dAlgo a : {Conv2dAlgo::Direct, Conv2dAlgo::Gemm}) {
    Conv2dParams p = p0;
    p.algo = a;
    const std::string what = "algo " + std::to_string(int(a)) + " x " + shape_str(xs) + " w " +
                             shape_str(ws);
    EXPECT_TRUE(test::all_close(y, kernels::conv2d_forward(x.to(g), w.to(g), b.to(g), p), tol, tol)) << what;
    EXPECT_TRUE(test::all_close(dx, kernels::conv2d_backward_data(dy.to(g), w.to(g), xs, p), tol, tol)) << what;
    // The weight gradient sums N*P*Q terms: scale the tolerance by sqrt of that count.
    const double n = double(y.size(0) * y.size(2) * y.size(3));
    EXPECT_TRUE(test::all_close(dw, kernels::conv2d_backward_weight(dy.to(g), x.to(g), ws, p),
                                tol * std::sqrt(n), tol)) << what;
    EXPECT_TRUE(test::all_close(db, kernels::conv2d_backward_bias(dy.to(g)), tol * std::sqrt(n), tol)) << what;
  }
}

TEST(Conv2dCuda, ParityOddShapes) {
  MN_SKIP_IF_NO_CUDA();
  for (const Case& c : odd_cases()) {
    // float64: both sides round at ~1e-16 per term; 1e-11 catches any indexing error.
    expect_parity(c.x, c.w, c.p, DType::F64, 1e-11);
    // float32: different summation orders of <= ~100 terms of size <= 0.2: 1e-5.
    expect_parity(c.x, c.w, c.p, DType::F32, 1e-5);
  }
  // Sizes that are not multiples of the 64x64x16 tiles, N = 1, C = 1, wide K.
  expect_parity({1, 1, 67, 65}, {70, 1, 5, 3}, params(1, 1, 2, 1), DType::F32, 1e-5);
  expect_parity({3, 17, 13, 19}, {65, 17, 3, 3}, params(2, 1, 1, 1), DType::F32, 2e-5);
}

TEST(Conv2dCuda, ParityKochShapes) {
  MN_SKIP_IF_NO_CUDA();
  // The Koch layers with their real C, K, R, S, H, W; batch 6 instead of 150 to
  // keep the float32 CPU reference cheap (the batch only repeats the same code).
  // float32 sums of up to 3136 terms of size <= 0.2: ~sqrt(3136) * 1e-7 * 0.2 * |x|
  // per forward element; 1e-4 leaves margin.
  expect_parity({6, 1, 105, 105}, {64, 1, 10, 10}, Conv2dParams{}, DType::F32, 1e-4);
  expect_parity({6, 64, 48, 48}, {128, 64, 7, 7}, Conv2dParams{}, DType::F32, 1e-4);
  expect_parity({6, 128, 21, 21}, {128, 128, 4, 4}, Conv2dParams{}, DType::F32, 1e-4);
  expect_parity({6, 128, 9, 9}, {256, 128, 4, 4}, Conv2dParams{}, DType::F32, 1e-4);
}

// Backward-data with stride 1 runs as a forward convolution of dy with flipped weights
// (CudaSpeedups::conv_bwd_data_flip); both that path and the gather it replaces match
// the CPU: stride 1 with and without padding, dilation, a padding wider than the
// kernel reach (dh*(R-1) < ph: the gather runs), more than 64 input channels.
TEST(Conv2dCuda, BackwardDataFlipOnAndOff) {
  MN_SKIP_IF_NO_CUDA();
  const kernels::CudaSpeedups saved = kernels::cuda_speedups();
  for (bool flip : {true, false}) {
    kernels::CudaSpeedups s = saved;
    s.conv_bwd_data_flip = flip;
    kernels::set_cuda_speedups(s);
    SCOPED_TRACE(flip ? "flip on" : "flip off");
    const std::vector<Case> cases = {
        {{2, 3, 7, 6}, {4, 3, 3, 2}, params(1, 1, 0, 0)},
        {{2, 3, 9, 8}, {70, 3, 3, 5}, params(1, 1, 1, 2)},
        {{1, 2, 12, 11}, {3, 2, 3, 2}, params(1, 1, 2, 1, 2, 3)},  // dilation 2 x 3
        {{2, 2, 6, 5}, {3, 2, 2, 2}, params(1, 1, 2, 1)},          // ph = 2 > dh*(R-1) = 1
        {{1, 130, 6, 6}, {5, 130, 3, 3}, params(1, 1, 1, 1)},      // C > 64: 128-row tiles
    };
    for (const Case& c : cases) {
      expect_parity(c.x, c.w, c.p, DType::F64, 1e-11);
      expect_parity(c.x, c.w, c.p, DType::F32, 2e-5);
    }
  }
  kernels::set_cuda_speedups(saved);
}

// The 64 x 256 tile (>= 135,168 columns and <= 64 rows: here the forward and the
// backward-data), on and off, with the flipped backward-data on and off. (Koch's
// layers: KochShapesWithAndWithoutTheSpeedups below.)
TEST(Conv2dCuda, WideTileOnAndOff) {
  MN_SKIP_IF_NO_CUDA();
  const kernels::CudaSpeedups saved = kernels::cuda_speedups();
  for (int v = 0; v < 4; ++v) {
    kernels::CudaSpeedups s = saved;
    s.conv_bwd_data_flip = v & 1;
    s.conv_wide_tile = v & 2;
    kernels::set_cuda_speedups(s);
    SCOPED_TRACE("flip " + std::to_string(v & 1) + ", wide tile " + std::to_string(v >> 1));
    expect_parity({15, 2, 100, 100}, {8, 2, 3, 3}, params(1, 1, 1, 1), DType::F32, 2e-5);
  }
  kernels::set_cuda_speedups(saved);
}

// Koch's layers 1 and 2 with every combination of the flipped backward-data and the
// 64 x 256 tile, which needs >= 135,168 columns: layer 1's forward has 9,216 an image,
// layer 2's backward-data 2,304, so batch 16 and 60. The reference is the Direct
// algorithm in float64 on the GPU (itself checked against the CPU above): a float32 CPU
// reference at batch 60 would take minutes.
TEST(Conv2dCuda, KochShapesWithAndWithoutTheSpeedups) {
  MN_SKIP_IF_NO_CUDA();
  MN_SKIP_IF_SMALL_SHAPES_ONLY();
  const kernels::CudaSpeedups saved = kernels::cuda_speedups();
  const Device g = Device::cuda();
  struct Layer {
    Shape x, w;
  };
  for (const Layer& l : {Layer{{16, 1, 105, 105}, {64, 1, 10, 10}}, Layer{{60, 64, 48, 48}, {128, 64, 7, 7}}}) {
    Tensor x = test::rand(l.x, -1, 1, DType::F32, g, 40);
    Tensor w = test::rand(l.w, -0.2, 0.2, DType::F32, g, 41);
    Tensor b = test::rand({l.w[0]}, -1, 1, DType::F32, g, 42);
    Conv2dParams pd;
    pd.algo = Conv2dAlgo::Direct;
    const Tensor x64 = x.to(DType::F64), w64 = w.to(DType::F64);
    const Tensor y_ref = kernels::conv2d_forward(x64, w64, b.to(DType::F64), pd).cpu();
    Tensor dy = test::rand(y_ref.shape(), -1, 1, DType::F32, g, 43);
    const Tensor dx_ref = kernels::conv2d_backward_data(dy.to(DType::F64), w64, l.x, pd).cpu();
    const Tensor dw_ref = kernels::conv2d_backward_weight(dy.to(DType::F64), x64, l.w, pd).cpu();
    const double n = double(y_ref.size(0) * y_ref.size(2) * y_ref.size(3));
    for (int v = 0; v < 4; ++v) {
      kernels::CudaSpeedups s = saved;
      s.conv_bwd_data_flip = v & 1;
      s.conv_wide_tile = v & 2;
      kernels::set_cuda_speedups(s);
      SCOPED_TRACE("x " + shape_str(l.x) + ", flip " + std::to_string(v & 1) + ", wide tile " +
                   std::to_string(v >> 1));
      Conv2dParams p;
      p.algo = Conv2dAlgo::Gemm;
      EXPECT_TRUE(test::all_close(y_ref, kernels::conv2d_forward(x, w, b, p).cpu(), 1e-4, 1e-4));
      EXPECT_TRUE(test::all_close(dx_ref, kernels::conv2d_backward_data(dy, w, l.x, p).cpu(), 1e-4, 1e-4));
      EXPECT_TRUE(test::all_close(dw_ref, kernels::conv2d_backward_weight(dy, x, l.w, p).cpu(),
                                  1e-4 * std::sqrt(n), 1e-4));
    }
  }
  kernels::set_cuda_speedups(saved);
}

TEST(Conv2dCuda, GradcheckOnDeviceFloat64) {
  MN_SKIP_IF_NO_CUDA();
  const Device g = Device::cuda();
  auto f = [](const std::vector<ag::Variable>& v) {
    return ag::conv2d(v[0], v[1], v[2], params(2, 1, 1, 1, 1, 2));
  };
  ag::GradcheckResult r = ag::gradcheck(f, {test::rand({2, 2, 7, 8}, -1, 1, DType::F64, g, 30),
                                            test::rand({3, 2, 3, 2}, -1, 1, DType::F64, g, 31),
                                            test::rand({3}, -1, 1, DType::F64, g, 32)});
  EXPECT_TRUE(r.ok) << r.message;
}

}  // namespace
}  // namespace mn
