// The sampling study's EmbeddingNet (nn/models/embedding_net.h): shapes,
// parameter names, a float64 gradcheck through the whole net (PReLU included)
// and a clear error for a wrong input.
#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/models/embedding_net.h"
#include "tests/common/test_util.h"

using namespace mn;
using namespace mn::nn;

TEST(EmbeddingNet, ShapesAndNames) {
  Generator g(1);
  EmbeddingNet net(EmbeddingNetOptions{}, g);
  EXPECT_EQ(net.flat_features(), 1024);  // 64 x 4 x 4 for 28x28
  Variable y = net.forward(Variable(test::randn({3, 1, 28, 28}, DType::F32, Device::cpu(), 2)));
  EXPECT_EQ(y.data().shape(), (Shape{3, 2}));
  std::vector<std::string> names;
  for (const auto& [n, p] : net.named_parameters()) names.push_back(n);
  const std::vector<std::string> want{"conv1.weight", "conv1.bias", "prelu1.weight", "conv2.weight", "conv2.bias",
                                      "prelu2.weight", "fc1.weight", "fc1.bias", "prelu3.weight", "fc2.weight",
                                      "fc2.bias", "prelu4.weight", "fc3.weight", "fc3.bias"};
  EXPECT_EQ(names, want);
  // The study's net has 1,024 x 256 + 256 x 256 + 256 x 2 dense weights (about 0.35 M parameters in all).
  int64_t n = 0;
  for (const auto& p : net.parameters()) n += p.data().numel();
  EXPECT_EQ(n, 32 * 25 + 32 + 1 + 64 * 32 * 25 + 64 + 1 + 1024 * 256 + 256 + 1 + 256 * 256 + 256 + 1 + 256 * 2 + 2);
  EXPECT_THROW(net.forward(Variable(test::randn({2, 1, 20, 20}, DType::F32, Device::cpu(), 3))), Error);
}

TEST(EmbeddingNet, Float64Gradcheck) {
  Generator g(4);
  EmbeddingNetOptions o;
  o.input_size = 16;  // 12 -> 6 -> 2 -> 1: a small net with every layer kind
  o.conv1 = 3;
  o.conv2 = 4;
  o.hidden = 5;
  o.embedding = 2;
  o.dtype = DType::F64;
  EmbeddingNet net(o, g);
  auto r = ag::gradcheck([&](const std::vector<Variable>& v) { return net.forward(v[0]); },
                         {test::randn({2, 1, 16, 16}, DType::F64, Device::cpu(), 5)});
  EXPECT_TRUE(r.ok) << r.message;
}
