// nn::Conv2d / MaxPool2d / AvgPool2d / Linear / Flatten: shapes, parameters,
// default initialisation bounds, linear forward vs a loop, float64 gradchecks
// of linear and flatten, a Koch-branch-shaped stack end to end, CUDA parity.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/gradcheck.h"
#include "autograd/ops_conv.h"
#include "kernels/linear.h"
#include "nn/layers/conv2d.h"
#include "nn/layers/linear.h"
#include "nn/layers/pool.h"
#include "tests/common/test_util.h"

namespace mn {
namespace {

TEST(ConvLayers, Conv2dShapesParametersAndInit) {
  Generator g(42);
  nn::Conv2d conv(nn::Conv2dOptions(3, 8, 5).padding(2).stride(2).of(DType::F64), g);
  EXPECT_EQ(conv.num_parameters(), 8 * 3 * 5 * 5 + 8);
  EXPECT_EQ(conv.parameters().size(), 2u);
  const double bound = 1.0 / std::sqrt(75.0);  // PyTorch default: 1/sqrt(fan_in)
  for (double v : conv.weight().data().to_double_vector()) EXPECT_LE(std::abs(v), bound);
  for (double v : conv.bias().data().to_double_vector()) EXPECT_LE(std::abs(v), bound);
  ag::Variable x(test::rand({2, 3, 11, 10}, -1, 1, DType::F64));
  ag::Variable y = conv(x);
  EXPECT_EQ(y.shape(), Shape({2, 8, 6, 5}));
  // Same seed, same weights.
  Generator g2(42);
  nn::Conv2d conv2(nn::Conv2dOptions(3, 8, 5).of(DType::F64), g2);
  EXPECT_TRUE(test::all_close(conv.weight().data(), conv2.weight().data(), 0, 0));
  nn::Conv2d nobias(nn::Conv2dOptions(3, 4, 3).with_bias(false));
  EXPECT_FALSE(nobias.bias().defined());
  EXPECT_EQ(nobias.parameters().size(), 1u);
}

TEST(ConvLayers, LinearForwardMatchesLoop) {
  Generator g(1);
  nn::Linear lin(nn::LinearOptions(7, 5).of(DType::F64), g);
  Tensor x = test::rand({4, 7}, -1, 1, DType::F64);
  Tensor y = lin(ag::Variable(x)).data();
  const auto X = x.to_double_vector(), W = lin.weight().data().to_double_vector(),
             B = lin.bias().data().to_double_vector();
  std::vector<double> ref(4 * 5);
  for (int i = 0; i < 4; ++i)
    for (int o = 0; o < 5; ++o) {
      double s = B[o];
      for (int k = 0; k < 7; ++k) s += X[i * 7 + k] * W[o * 7 + k];
      ref[i * 5 + o] = s;
    }
  // float64 dot products of 7 terms: 1e-13.
  EXPECT_TRUE(test::all_close(ref, y.to_double_vector(), 1e-13, 1e-13));
  EXPECT_THROW(lin(ag::Variable(test::rand({4, 6}, -1, 1, DType::F64))), Error);
}

TEST(ConvLayers, LinearGradcheckFloat64) {
  auto f = [](const std::vector<ag::Variable>& v) { return ag::linear(v[0], v[1], v[2]); };
  ag::GradcheckResult r = ag::gradcheck(f, {test::rand({3, 6}, -1, 1, DType::F64, Device::cpu(), 1),
                                            test::rand({4, 6}, -1, 1, DType::F64, Device::cpu(), 2),
                                            test::rand({4}, -1, 1, DType::F64, Device::cpu(), 3)});
  EXPECT_TRUE(r.ok) << r.message;
  auto f2 = [](const std::vector<ag::Variable>& v) { return ag::linear(v[0], v[1], ag::Variable()); };
  r = ag::gradcheck(f2, {test::rand({3, 6}, -1, 1, DType::F64, Device::cpu(), 4),
                         test::rand({4, 6}, -1, 1, DType::F64, Device::cpu(), 5)});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(ConvLayers, FlattenGradcheckAndShape) {
  nn::Flatten fl;
  ag::Variable y = fl(ag::Variable(Tensor::zeros({2, 3, 4, 5})));
  EXPECT_EQ(y.shape(), Shape({2, 60}));
  auto f = [](const std::vector<ag::Variable>& v) { return ag::flatten_batch(v[0]); };
  ag::GradcheckResult r =
      ag::gradcheck(f, {test::rand({2, 3, 2, 2}, -1, 1, DType::F64, Device::cpu(), 6)});
  EXPECT_TRUE(r.ok) << r.message;
}

// A miniature Koch branch (conv -> pool -> conv -> pool -> flatten -> linear),
// float64, checked end to end through the tape against central differences.
TEST(ConvLayers, SmallBranchGradcheckFloat64) {
  auto f = [](const std::vector<ag::Variable>& v) {
    ag::Variable h = ag::conv2d(v[0], v[1], v[2], {});
    h = ag::max_pool2d(h, nn::pool_params(2));
    h = ag::conv2d(h, v[3], ag::Variable(), {});
    h = ag::avg_pool2d(h, nn::pool_params(2));
    return ag::linear(ag::flatten_batch(h), v[4], v[5]);
  };
  // Input 2x1x12x12 -> conv 3@3x3 -> 10x10 -> pool 5x5 -> conv 4@2x2 -> 4x4 -> pool 2x2 -> 16.
  ag::GradcheckOptions o;
  o.eps = 1e-5;  // max pool inside: smaller than the spacing of generic random values
  ag::GradcheckResult r = ag::gradcheck(
      f,
      {test::rand({2, 1, 12, 12}, -1, 1, DType::F64, Device::cpu(), 7),
       test::rand({3, 1, 3, 3}, -1, 1, DType::F64, Device::cpu(), 8),
       test::rand({3}, -1, 1, DType::F64, Device::cpu(), 9),
       test::rand({4, 3, 2, 2}, -1, 1, DType::F64, Device::cpu(), 10),
       test::rand({5, 16}, -1, 1, DType::F64, Device::cpu(), 11),
       test::rand({5}, -1, 1, DType::F64, Device::cpu(), 12)},
      o);
  EXPECT_TRUE(r.ok) << r.message;
}

// Conv2d::forward_relu_max_pool (Koch's branch): the one node gives the values and the
// weight gradient of forward_relu then MaxPool2d, bit for bit (the op itself:
// tests/autograd/test_conv_relu_pool.cpp).
TEST(ConvLayers, ForwardReluMaxPoolMatchesTheTwoModules) {
  Generator g(5);
  nn::Conv2d conv(nn::Conv2dOptions(2, 3, 3).of(DType::F64), g);
  nn::MaxPool2d mp(2);
  const Tensor x = test::rand({2, 2, 10, 10}, -1, 1, DType::F64, Device::cpu(), 3);
  ag::Variable a = conv.forward_relu_max_pool(ag::Variable(x), mp.params());
  ag::Variable b = mp(conv.forward_relu(ag::Variable(x)));
  EXPECT_TRUE(test::all_close(b.data(), a.data(), 0, 0));
  a.backward(Tensor::ones(a.shape(), DType::F64));
  const Tensor ga = conv.weight().grad().clone(), gba = conv.bias().grad().clone();
  ag::Variable w = conv.weight(), bias = conv.bias();  // handles to the layer's parameters
  w.zero_grad();
  bias.zero_grad();
  b.backward(Tensor::ones(b.shape(), DType::F64));
  EXPECT_TRUE(test::all_close(conv.weight().grad(), ga, 0, 0));
  EXPECT_TRUE(test::all_close(conv.bias().grad(), gba, 0, 0));
}

TEST(ConvLayers, PoolModules) {
  nn::MaxPool2d mp(2);
  nn::AvgPool2d ap(3, 2, 1, false);
  ag::Variable x(test::rand({1, 2, 9, 8}, -1, 1, DType::F32));
  EXPECT_EQ(mp(x).shape(), Shape({1, 2, 4, 4}));
  EXPECT_EQ(ap(x).shape(), Shape({1, 2, 5, 4}));
  EXPECT_EQ(mp.num_parameters(), 0);
}

TEST(ConvLayersCuda, LinearParity) {
  MN_SKIP_IF_NO_CUDA();
  const Device g = Device::cuda();
  Tensor x = test::rand({150, 9216}, -1, 1, DType::F32, Device::cpu(), 1);
  Tensor w = test::rand({64, 9216}, -0.01, 0.01, DType::F32, Device::cpu(), 2);
  Tensor b = test::rand({64}, -1, 1, DType::F32, Device::cpu(), 3);
  Tensor dy = test::rand({150, 64}, -1, 1, DType::F32, Device::cpu(), 4);
  // 9216-term float32 dot products of size <= 0.01: ~1e-5 absolute; 150-term bias sums: 1e-4.
  EXPECT_TRUE(test::all_close(kernels::linear_forward(x, w, b),
                              kernels::linear_forward(x.to(g), w.to(g), b.to(g)), 1e-4, 1e-4));
  EXPECT_TRUE(test::all_close(kernels::linear_backward_bias(dy),
                              kernels::linear_backward_bias(dy.to(g)), 1e-4, 1e-5));
  auto f = [](const std::vector<ag::Variable>& v) { return ag::linear(v[0], v[1], v[2]); };
  ag::GradcheckResult r = ag::gradcheck(f, {test::rand({3, 6}, -1, 1, DType::F64, g, 1),
                                            test::rand({4, 6}, -1, 1, DType::F64, g, 2),
                                            test::rand({4}, -1, 1, DType::F64, g, 3)});
  EXPECT_TRUE(r.ok) << r.message;
}

}  // namespace
}  // namespace mn
