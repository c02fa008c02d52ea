// nn::PReLU: the parameter's name, shape and PyTorch's initial 0.25, and a step
// of SGD moving only the slopes of channels that saw negative inputs.
#include <gtest/gtest.h>

#include "autograd/ops.h"
#include "nn/layers/prelu.h"
#include "nn/optim/optimizer.h"
#include "tests/common/test_util.h"

using namespace mn;
using ag::Variable;

TEST(PReLULayer, NameInitAndLearnsOnlyWhereInputsAreNegative) {
  nn::PReLUOptions o;
  o.num_parameters = 2;
  nn::PReLU layer(o);
  auto named = layer.named_parameters();
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].first, "weight");
  EXPECT_EQ(layer.weight().data().to_double_vector(), (std::vector<double>{0.25, 0.25}));
  // Channel 0 positive only, channel 1 negative only: (N=1, C=2, 2).
  Tensor x = Tensor::from_vector(std::vector<float>{1.f, 2.f, -1.f, -3.f}, {1, 2, 2});
  Variable y = layer.forward(Variable(x));
  EXPECT_EQ(y.data().to_double_vector(), (std::vector<double>{1, 2, -0.25, -0.75}));
  ag::sum(y).backward();
  // d sum / d a_1 = -1 + -3 = -4; a_0 saw no negative input.
  EXPECT_EQ(layer.weight().grad().to_double_vector(), (std::vector<double>{0, -4}));
  nn::SGD opt(layer.parameters(), 0.1);
  opt.step();
  EXPECT_EQ(layer.weight().data().to_double_vector()[0], 0.25);
  EXPECT_NEAR(layer.weight().data().to_double_vector()[1], 0.65, 1e-6);
  EXPECT_THROW(nn::PReLU(nn::PReLUOptions{0}), Error);
}
