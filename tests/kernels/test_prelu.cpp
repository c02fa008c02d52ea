// PReLU (kernels/prelu.h, ag::prelu): forward and both gradients against a
// direct double loop, per-channel and shared slopes, 2-D and 4-D inputs,
// float64 gradchecks for x and the slope, shape errors, and CPU/CUDA parity.
#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "autograd/ops_layers.h"
#include "kernels/prelu.h"
#include "tests/common/test_util.h"

namespace mn {
namespace {

using ag::Variable;

struct Ref {
  std::vector<double> y, gx, ga;
};
// Direct loops over (n, c, s) in double.
Ref reference(const Tensor& x, const Tensor& a, const Tensor& gy) {
  const int64_t N = x.size(0), C = x.dim() >= 2 ? x.size(1) : 1;
  const int64_t S = x.numel() / std::max<int64_t>(1, N * C);
  const auto xv = x.to_double_vector(), av = a.to_double_vector(), gv = gy.to_double_vector();
  Ref r{std::vector<double>(xv.size()), std::vector<double>(xv.size()), std::vector<double>(av.size(), 0.0)};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < S; ++s) {
        const size_t i = static_cast<size_t>((n * C + c) * S + s);
        const size_t k = av.size() == 1 ? 0 : static_cast<size_t>(c);
        const bool pos = xv[i] > 0;
        r.y[i] = pos ? xv[i] : av[k] * xv[i];
        r.gx[i] = pos ? gv[i] : av[k] * gv[i];
        if (!pos) r.ga[k] += gv[i] * xv[i];
      }
  return r;
}

TEST(PReLU, MatchesDirectLoopsPerChannelAndShared) {
  // Planes of 10 (eight lanes and a tail) and 24 positions; (N, C) rows with one
  // and with three 64-channel blocks of the slope gradient's S = 1 path.
  for (Shape shape : std::vector<Shape>{{3, 4, 2, 5}, {2, 3, 4, 6}, {6, 7}, {5, 130}}) {
    for (int64_t na : {int64_t{1}, shape[1]}) {
      for (DType dt : {DType::F64, DType::F32}) {
        Tensor x = test::rand(shape, -2, 2, dt, Device::cpu(), 5);
        Tensor a = test::rand({na}, 0.05, 0.6, dt, Device::cpu(), 6);
        Tensor gy = test::randn(shape, dt, Device::cpu(), 7);
        Ref r = reference(x, a, gy);
        const double tol = dt == DType::F64 ? 1e-13 : 1e-5;
        EXPECT_TRUE(test::all_close(r.y, kernels::prelu_forward(x, a).to_double_vector(), tol, tol));
        auto g = kernels::prelu_backward(x, a, gy);
        EXPECT_TRUE(test::all_close(r.gx, g.first.to_double_vector(), tol, tol));
        EXPECT_TRUE(test::all_close(r.ga, g.second.to_double_vector(), tol, tol)) << "slope gradient, na " << na;
        EXPECT_EQ(g.second.numel(), na);
      }
    }
  }
  // x = 0 takes the negative branch: y = 0, dy/dx = a.
  Tensor z = Tensor::zeros({1, 1}, DType::F64);
  Tensor a = Tensor::from_vector(std::vector<double>{0.3}, {1});
  auto g = kernels::prelu_backward(z, a, Tensor::ones({1, 1}, DType::F64));
  EXPECT_DOUBLE_EQ(g.first.to_double_vector()[0], 0.3);
}

TEST(PReLU, GradcheckInputAndSlope) {
  for (int64_t na : {int64_t{1}, int64_t{3}}) {
    Tensor x = test::rand({2, 3, 2, 2}, -2, 2, DType::F64, Device::cpu(), 11);
    Tensor a = test::rand({na}, 0.1, 0.5, DType::F64, Device::cpu(), 12);
    auto res = ag::gradcheck([](const std::vector<Variable>& v) { return ag::prelu(v[0], v[1]); }, {x, a});
    EXPECT_TRUE(res.ok) << "na " << na << ": " << res.message;
  }
}

TEST(PReLU, WrongSlopeSizeNamesTheShapes) {
  Tensor x = Tensor::zeros({2, 3, 4}, DType::F32);
  try {
    kernels::prelu_forward(x, Tensor::zeros({2}, DType::F32));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("prelu"), std::string::npos) << m;
    EXPECT_NE(m.find("one per channel (3"), std::string::npos) << m;
  }
}

TEST(PReLUCuda, Parity) {
  MN_SKIP_IF_NO_CUDA();
  for (Shape shape : test::sized({{150, 32, 24, 24}, {150, 256}, {1, 1, 7, 5}})) {
    for (int64_t na : {int64_t{1}, shape[1]}) {
      for (DType dt : {DType::F32, DType::F64}) {
        Tensor x = test::rand(shape, -3, 3, dt, Device::cpu(), 3);
        Tensor a = test::rand({na}, 0.05, 0.5, dt, Device::cpu(), 4);
        Tensor gy = test::randn(shape, dt, Device::cpu(), 5);
        EXPECT_TRUE(test::all_close(kernels::prelu_forward(x, a), kernels::prelu_forward(x.cuda(), a.cuda()), 0, 0));
        auto gc = kernels::prelu_backward(x, a, gy);
        auto gd = kernels::prelu_backward(x.cuda(), a.cuda(), gy.cuda());
        EXPECT_TRUE(test::all_close(gc.first, gd.first, 0, 0));
        // The slope gradient sums in a different (fixed) order on each device.
        const double tol = dt == DType::F32 ? 1e-4 : 1e-11;
        EXPECT_TRUE(test::all_close(gc.second, gd.second, tol, tol)) << "na " << na;
        // Deterministic on the GPU: the same bits twice.
        auto gd2 = kernels::prelu_backward(x.cuda(), a.cuda(), gy.cuda());
        EXPECT_TRUE(test::all_close(gd.second, gd2.second, 0, 0));
      }
    }
  }
}

}  // namespace
}  // namespace mn
