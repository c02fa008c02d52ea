// Tests of the parameter initialisers (nn/init.h): fans and gains as PyTorch
// defines them, bounds and standard deviations against the formulas (statistics
// at 5 standard errors, see tests/runtime/test_rng.cpp), reproducibility from a
// seed, and CPU-vs-CUDA bit equality.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "nn/init.h"
#include "tests/common/test_util.h"

namespace mn::nn {
namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  Tensor ca = a.cpu().contiguous(), cb = b.cpu().contiguous();
  return ca.shape() == cb.shape() && ca.dtype() == cb.dtype() &&
         std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) == 0;
}

double sample_std(const std::vector<double>& x, double* mean_out = nullptr) {
  double m = 0;
  for (double v : x) m += v;
  m /= x.size();
  double s = 0;
  for (double v : x) s += (v - m) * (v - m);
  if (mean_out) *mean_out = m;
  return std::sqrt(s / (x.size() - 1));
}

TEST(NnInit, FansLikePyTorch) {
  // Conv weight (K, C, R, S): fan_in = C R S, fan_out = K R S.
  auto f = init::calculate_fans(Tensor::empty({64, 3, 10, 10}));
  EXPECT_EQ(f.fan_in, 300);
  EXPECT_EQ(f.fan_out, 6400);
  // Linear weight (out, in).
  f = init::calculate_fans(Tensor::empty({4096, 9216}));
  EXPECT_EQ(f.fan_in, 9216);
  EXPECT_EQ(f.fan_out, 4096);
  EXPECT_THROW(init::calculate_fans(Tensor::empty({5})), Error);
}

TEST(NnInit, Gains) {
  using init::Nonlinearity;
  EXPECT_EQ(init::calculate_gain(Nonlinearity::Linear), 1.0);
  EXPECT_EQ(init::calculate_gain(Nonlinearity::Sigmoid), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain(Nonlinearity::Tanh), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain(Nonlinearity::ReLU), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(init::calculate_gain(Nonlinearity::LeakyReLU, 0.2), std::sqrt(2.0 / 1.04));
  EXPECT_DOUBLE_EQ(init::calculate_gain(Nonlinearity::SELU), 0.75);
}

TEST(NnInit, XavierUniformBoundAndVariance) {
  Generator g(1);
  Tensor w = Tensor::empty({256, 512}, DType::F64);
  init::xavier_uniform_(w, 1.0, g);
  const double bound = std::sqrt(6.0 / (256 + 512));
  auto x = w.to_double_vector();
  double mx = 0;
  for (double v : x) mx = std::max(mx, std::fabs(v));
  EXPECT_LE(mx, bound);
  EXPECT_GT(mx, 0.999 * bound);  // 131072 draws reach the edge
  // U(-b, b): variance b^2/3; se of the sample variance sqrt((b^4/5 - b^4/9) / n).
  const double sd = sample_std(x), n = static_cast<double>(x.size());
  const double b4 = std::pow(bound, 4);
  EXPECT_NEAR(sd * sd, bound * bound / 3, 5 * std::sqrt((b4 / 5 - b4 / 9) / n));
}

TEST(NnInit, XavierNormalStd) {
  Generator g(2);
  Tensor w = Tensor::empty({128, 64, 3, 3}, DType::F32);  // fan_in 576, fan_out 1152
  init::xavier_normal_(w, 2.0, g);
  const double expect = 2.0 * std::sqrt(2.0 / (576 + 1152));
  auto x = w.to_double_vector();
  // se of a normal sample's std: sigma / sqrt(2 n).
  EXPECT_NEAR(sample_std(x), expect, 5 * expect / std::sqrt(2.0 * x.size()));
}

TEST(NnInit, KaimingNormalAndUniform) {
  using init::FanMode;
  using init::Nonlinearity;
  Generator g(3);
  Tensor w = Tensor::empty({128, 64, 3, 3}, DType::F64);  // fan_in 576
  init::kaiming_normal_(w, 0.0, FanMode::FanIn, Nonlinearity::ReLU, g);
  const double expect = std::sqrt(2.0) / std::sqrt(576.0);
  auto x = w.to_double_vector();
  double mean = 0;
  const double sd = sample_std(x, &mean);
  EXPECT_NEAR(sd, expect, 5 * expect / std::sqrt(2.0 * x.size()));
  EXPECT_NEAR(mean, 0.0, 5 * expect / std::sqrt(x.size()));

  // Uniform, fan_out mode (fan_out = 128 * 9), default leaky_relu a = 0: gain sqrt(2).
  Tensor u = Tensor::empty({128, 64, 3, 3}, DType::F32);
  init::kaiming_uniform_(u, 0.0, FanMode::FanOut, Nonlinearity::LeakyReLU, g);
  const double bound = std::sqrt(3.0) * std::sqrt(2.0) / std::sqrt(128.0 * 9);
  auto y = u.to_double_vector();
  double mx = 0;
  for (double v : y) mx = std::max(mx, std::fabs(v));
  EXPECT_LE(mx, bound * (1 + 1e-7));  // float32 rounding of the bound
  EXPECT_GT(mx, 0.999 * bound);
  const double s = sample_std(y);
  EXPECT_NEAR(s * s, bound * bound / 3,
              5 * std::sqrt((std::pow(bound, 4) / 5 - std::pow(bound, 4) / 9) / y.size()));
}

TEST(NnInit, NormalUniformConstant) {
  Generator g(4);
  Tensor t = Tensor::empty({200000}, DType::F64);
  init::normal_(t, 3.0, 0.5, g);
  double mean = 0;
  const double sd = sample_std(t.to_double_vector(), &mean);
  EXPECT_NEAR(mean, 3.0, 5 * 0.5 / std::sqrt(200000.0));
  EXPECT_NEAR(sd, 0.5, 5 * 0.5 / std::sqrt(400000.0));
  init::uniform_(t, 1.0, 2.0, g);
  for (double v : t.to_double_vector()) {
    ASSERT_GE(v, 1.0);
    ASSERT_LT(v, 2.0);
  }
  init::constant_(t, 0.25);
  for (double v : t.to_double_vector()) ASSERT_EQ(v, 0.25);
  init::zeros_(t);
  for (double v : t.to_double_vector()) ASSERT_EQ(v, 0.0);
  // Zero-element weights are left alone and consume nothing.
  Tensor e = Tensor::empty({0, 5}, DType::F32);
  const uint64_t before = g.offset();
  init::kaiming_uniform_(e, 0.0, init::FanMode::FanIn, init::Nonlinearity::ReLU, g);
  init::xavier_normal_(e, 1.0, g);
  EXPECT_EQ(g.offset(), before);
}

TEST(NnInit, SameSeedSameWeights) {
  auto make = [](uint64_t seed) {
    Generator g(seed);
    Tensor a = Tensor::empty({64, 1, 10, 10}, DType::F32), b = Tensor::empty({4096, 96}, DType::F32);
    init::kaiming_normal_(a, 0.0, init::FanMode::FanIn, init::Nonlinearity::ReLU, g);
    init::xavier_uniform_(b, 1.0, g);
    return std::make_pair(a, b);
  };
  auto p = make(42), q = make(42), r = make(43);
  EXPECT_TRUE(same_bits(p.first, q.first));
  EXPECT_TRUE(same_bits(p.second, q.second));
  EXPECT_FALSE(same_bits(p.first, r.first));
  EXPECT_FALSE(same_bits(p.second, r.second));
  // The second weight depends on the first one's draws (the offset advanced).
  Generator g(42);
  Tensor b = Tensor::empty({4096, 96}, DType::F32);
  init::xavier_uniform_(b, 1.0, g);
  EXPECT_FALSE(same_bits(b, p.second));
}

TEST(NnInitCuda, SameSeedSameWeightsOnCpuAndGpu) {
  MN_SKIP_IF_NO_CUDA();
  for (DType dt : {DType::F32, DType::F64}) {
    auto make = [&](Device dev) {
      Generator g(7);
      Tensor a = Tensor::empty({128, 64, 7, 7}, dt, dev), b = Tensor::empty({4096, 9216}, dt, dev),
             c = Tensor::empty({4096}, dt, dev);
      init::kaiming_normal_(a, 0.0, init::FanMode::FanIn, init::Nonlinearity::ReLU, g);
      init::xavier_uniform_(b, 1.0, g);
      init::normal_(c, 0.5, 0.01, g);
      return std::vector<Tensor>{a, b, c};
    };
    auto cpu = make(Device::cpu()), gpu = make(Device::cuda(0));
    for (size_t k = 0; k < cpu.size(); ++k) {
      EXPECT_TRUE(gpu[k].is_cuda());
      EXPECT_TRUE(same_bits(cpu[k], gpu[k])) << dtype_name(dt) << " tensor " << k;
    }
  }
}

}  // namespace
}  // namespace mn::nn
