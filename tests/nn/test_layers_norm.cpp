// nn modules of the normalisation / dropout / activation / distance layers:
// parameters and buffers, train vs eval behaviour, and agreement with the ops.
#include <gtest/gtest.h>

#include <cmath>

#include "nn/layers/activation.h"
#include "nn/layers/batchnorm.h"
#include "nn/layers/distance.h"
#include "nn/layers/dropout.h"
#include "nn/layers/lrn.h"
#include "tests/common/test_util.h"

namespace mn {
namespace {

using ag::Variable;

TEST(NormLayersTest, BatchNormModuleTrainThenEval) {
  nn::BatchNorm bn(nn::BatchNormOptions(3).of(DType::F64));
  EXPECT_EQ(bn.parameters().size(), 2u);  // weight, bias
  EXPECT_EQ(bn.named_buffers().size(), 2u);  // running_mean, running_var
  Tensor x = test::rand({4, 3, 2, 2}, 1, 3, DType::F64);
  Variable y = bn(Variable(x));
  // Training output per channel: mean 0, biased variance 1 - eps-ish.
  auto yv = y.data().to_double_vector();
  for (int c = 0; c < 3; ++c) {
    double s = 0, ss = 0;
    for (int n = 0; n < 4; ++n)
      for (int i = 0; i < 4; ++i) s += yv[(n * 3 + c) * 4 + i];
    for (int n = 0; n < 4; ++n)
      for (int i = 0; i < 4; ++i) ss += std::pow(yv[(n * 3 + c) * 4 + i] - s / 16, 2);
    EXPECT_NEAR(s / 16, 0.0, 1e-12);
    EXPECT_NEAR(ss / 16, 1.0, 1e-4);  // var / (var + 1e-5) with var ~ 1/3
  }
  // The running stats moved away from (0, 1).
  EXPECT_GT(bn.running_mean().to_double_vector()[0], 0.1);
  bn.eval();
  Variable ye = bn(Variable(x));
  auto rm = bn.running_mean().to_double_vector(), rv = bn.running_var().to_double_vector();
  auto xv = x.to_double_vector(), yev = ye.data().to_double_vector();
  for (size_t i = 0; i < xv.size(); ++i) {
    const size_t c = (i / 4) % 3;
    EXPECT_NEAR(yev[i], (xv[i] - rm[c]) / std::sqrt(rv[c] + 1e-5), 1e-12);
  }
}

TEST(NormLayersTest, BatchNormBackwardReachesParameters) {
  nn::BatchNorm bn(nn::BatchNormOptions(5).of(DType::F64));
  Variable x(test::randn({6, 5}, DType::F64), true);
  Variable y = bn(x);
  y.backward(test::randn({6, 5}, DType::F64, Device::cpu(), 2));
  EXPECT_TRUE(x.has_grad());
  EXPECT_TRUE(bn.weight().has_grad());
  EXPECT_TRUE(bn.bias().has_grad());
}

TEST(NormLayersTest, DropoutModuleTrainAndEval) {
  Generator g(7, 0);
  nn::Dropout drop(0.5, g);
  Tensor x = Tensor::ones({1000}, DType::F32);
  Variable y = drop(Variable(x));
  int64_t kept = 0;
  for (float v : y.data().to_vector<float>()) {
    EXPECT_TRUE(v == 0.0f || v == 2.0f);
    kept += v != 0.0f;
  }
  EXPECT_GT(kept, 400);
  EXPECT_LT(kept, 600);
  EXPECT_EQ(g.offset(), 250u);
  drop.eval();
  Variable v(x);
  EXPECT_TRUE(drop(v).is_same(v));
}

TEST(NormLayersTest, ActivationAndLrnModulesMatchOps) {
  Tensor x = test::randn({2, 6, 3, 3}, DType::F64);
  Variable v(x);
  EXPECT_TRUE(test::all_close(ag::relu(v).data(), nn::ReLU()(v).data(), 0, 0));
  EXPECT_TRUE(test::all_close(ag::elu(v, 0.3).data(), nn::ELU(0.3)(v).data(), 0, 0));
  EXPECT_TRUE(test::all_close(ag::selu(v).data(), nn::SELU()(v).data(), 0, 0));
  EXPECT_TRUE(test::all_close(ag::softplus(v, 2, 10).data(), nn::Softplus(2, 10)(v).data(), 0, 0));
  EXPECT_TRUE(test::all_close(ag::sigmoid_act(v).data(), nn::Sigmoid()(v).data(), 0, 0));
  EXPECT_TRUE(test::all_close(ag::tanh_act(v).data(), nn::Tanh()(v).data(), 0, 0));
  kernels::LrnOptions o;
  o.alpha_over_n = true;
  EXPECT_TRUE(test::all_close(ag::lrn(v, o).data(), nn::LRN(5, 1e-4, 0.75, 2.0, true)(v).data(), 0, 0));
}

TEST(NormLayersTest, DistanceModules) {
  Tensor a = test::randn({4, 3}, DType::F64, Device::cpu(), 1);
  Tensor b = test::randn({4, 3}, DType::F64, Device::cpu(), 2);
  Variable va(a), vb(b);
  EXPECT_EQ(nn::AbsDiff()(va, vb).shape(), (Shape{4, 3}));
  EXPECT_EQ(nn::L1Distance()(va, vb).shape(), (Shape{4}));
  EXPECT_EQ(nn::L2Distance(true)(va, vb).shape(), (Shape{4}));
  EXPECT_EQ(nn::PairwiseDistance(kernels::Pairwise::Cosine)(va, vb).shape(), (Shape{4, 4}));
  auto l2 = nn::L2Distance()(va, vb).data().to_double_vector();
  auto l2s = nn::L2Distance(true)(va, vb).data().to_double_vector();
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(l2[i] * l2[i], l2s[i], 1e-12);
  nn::AbsDiff m;
  EXPECT_THROW(static_cast<nn::Module&>(m).forward(va), Error);
}

}  // namespace
}  // namespace mn
