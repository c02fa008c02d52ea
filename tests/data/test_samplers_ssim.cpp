// SSIM (against a direct 11x11-window loop written here), samplers (triplets,
// pairs, P x K, SSIM mining), CPU/CUDA parity for SSIM.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "../common/test_util.h"
#include "data/samplers.h"
#include "data/ssim.h"
#include "data_test_util.h"

using namespace mn;
using namespace mn::data;

namespace {
// Textbook SSIM: for each valid window position, the weighted moments with the
// 2-D Gaussian w(i,j) = g(i) g(j) / sum, then the mean of the SSIM map.
double ssim_ref(const std::vector<double>& x, const std::vector<double>& y, int H, int W, double L) {
  double g[11], s = 0;
  for (int i = 0; i < 11; ++i) s += g[i] = std::exp(-(i - 5) * (i - 5) / (2 * 1.5 * 1.5));
  double C1 = std::pow(0.01 * L, 2), C2 = std::pow(0.03 * L, 2), tot = 0;
  for (int r = 0; r + 11 <= H; ++r)
    for (int c = 0; c + 11 <= W; ++c) {
      double mx = 0, my = 0, xx = 0, yy = 0, xy = 0;
      for (int i = 0; i < 11; ++i)
        for (int j = 0; j < 11; ++j) {
          double w = g[i] * g[j] / (s * s), a = x[(r + i) * W + c + j], b = y[(r + i) * W + c + j];
          mx += w * a, my += w * b, xx += w * a * a, yy += w * b * b, xy += w * a * b;
        }
      tot += (2 * mx * my + C1) * (2 * (xy - mx * my) + C2) /
             ((mx * mx + my * my + C1) * (xx - mx * mx + yy - my * my + C2));
    }
  return tot / ((H - 10) * (W - 10));
}
}  // namespace

TEST(DataSsim, MatchesDirectWindowLoop) {
  const int N = 4, H = 17, W = 14;
  Tensor imgs = test::rand({N, H, W}, 0, 1, DType::F64, Device::cpu(), 7);
  std::vector<double> v = imgs.to_vector<double>();
  std::vector<int64_t> a = {0, 1, 2, 3, 2}, b = {1, 1, 0, 2, 3};
  Tensor s = ssim_pairs(imgs, Tensor::from_vector(a, {5}), Tensor::from_vector(b, {5}), 1.0);
  std::vector<double> got = s.to_vector<double>(), ref;
  for (int p = 0; p < 5; ++p) {
    std::vector<double> x(v.begin() + a[p] * H * W, v.begin() + (a[p] + 1) * H * W);
    std::vector<double> y(v.begin() + b[p] * H * W, v.begin() + (b[p] + 1) * H * W);
    ref.push_back(ssim_ref(x, y, H, W, 1.0));
  }
  // float64 throughout; separable vs 2-D summation order differs -> 1e-12.
  EXPECT_TRUE(test::all_close(ref, got, 1e-12, 1e-12));
  EXPECT_NEAR(got[1], 1.0, 1e-12);  // SSIM(x, x) = 1
  // float32 path: values in [0,1], accumulation in double -> 1e-6.
  Tensor s32 = ssim_pairs(imgs.to(DType::F32), Tensor::from_vector(a, {5}), Tensor::from_vector(b, {5}), 1.0);
  EXPECT_TRUE(test::all_close(ref, s32.to_double_vector(), 1e-6, 1e-6));
  EXPECT_ANY_THROW(ssim_pairs(imgs, Tensor::from_vector<int64_t>({9}, {1}), Tensor::from_vector<int64_t>({0}, {1}), 1.0));
}

TEST(DataSsim, CudaMatchesCpu) {
  MN_SKIP_IF_NO_CUDA();
  Tensor imgs = test::rand({6, 30, 28}, 0, 1, DType::F32, Device::cpu(), 9);
  std::vector<int64_t> a = {0, 1, 2, 3, 4, 5, 5}, b = {5, 4, 3, 2, 1, 0, 5};
  Tensor cpu = ssim_pairs(imgs, Tensor::from_vector(a, {7}), Tensor::from_vector(b, {7}), 1.0);
  Tensor gpu = ssim_pairs(imgs.cuda(), Tensor::from_vector(a, {7}, Device::cuda()),
                          Tensor::from_vector(b, {7}, Device::cuda()), 1.0);
  // Both accumulate in double from float inputs; only summation order differs.
  EXPECT_TRUE(test::all_close(cpu, gpu.cpu(), 1e-6, 1e-6));
}

namespace {
std::vector<int32_t> labels_for(int C, int per) {
  std::vector<int32_t> l;
  for (int c = 0; c < C; ++c)
    for (int k = 0; k < per + c % 3; ++k) l.push_back(c);
  return l;
}
}  // namespace

TEST(DataSamplers, RandomTripletsRulesAndUniformAnchorClass) {
  auto labels = labels_for(10, 5);
  ClassIndex ci(labels);
  Generator g(1);
  const int n = 20000;
  auto t = sample_random_triplets(ci, n, g);
  std::map<int, int> cnt;
  for (auto& x : t) {
    ASSERT_NE(x.anchor, x.positive);
    ASSERT_EQ(labels[x.anchor], labels[x.positive]);
    ASSERT_NE(labels[x.anchor], labels[x.negative]);
    cnt[labels[x.anchor]]++;
  }
  // Uniform over classes (not images): each class n/10 = 2000 +- 4 sigma
  // (sigma = sqrt(n p (1-p)) = 42.4).
  for (int c = 0; c < 10; ++c) EXPECT_NEAR(cnt[c], 2000, 170) << c;
  Generator g2(1);
  auto t2 = sample_random_triplets(ci, 50, g2);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(t2[i].negative, t[i].negative);
}

TEST(DataSamplers, PairsShareAndPkBatches) {
  auto labels = labels_for(8, 6);
  ClassIndex ci(labels);
  Generator g(2);
  auto pairs = sample_random_pairs(ci, 1000, 0.3, g);
  int gen = 0;
  for (auto& p : pairs) {
    ASSERT_EQ(p.same, labels[p.a] == labels[p.b] ? 1 : 0);
    if (p.same) {
      ASSERT_NE(p.a, p.b);
    }
    gen += p.same;
  }
  EXPECT_EQ(gen, 300);
  auto pk = sample_pk_batch(ci, 4, 5, g);
  ASSERT_EQ(pk.size(), 20u);
  std::set<int> classes;
  for (int p = 0; p < 4; ++p) {
    std::set<int64_t> imgs;
    for (int k = 0; k < 5; ++k) {
      EXPECT_EQ(labels[pk[p * 5 + k]], labels[pk[p * 5]]);
      imgs.insert(pk[p * 5 + k]);
    }
    EXPECT_EQ(imgs.size(), 5u);
    classes.insert(labels[pk[p * 5]]);
  }
  EXPECT_EQ(classes.size(), 4u);
  EXPECT_MN_ERROR(sample_pk_batch(ci, 9, 5, g), "classes have 5 images", "P = 9");
}

TEST(DataSamplers, SsimMinedTripletsAreHardest) {
  auto labels = labels_for(5, 4);
  const int64_t N = static_cast<int64_t>(labels.size());
  Tensor imgs = test::rand({N, 16, 16}, 0, 1, DType::F32, Device::cpu(), 3);
  ClassIndex ci(labels);
  Generator g(4);
  auto t = sample_ssim_triplets(ci, imgs, 1.0, 30, g);
  auto ssim1 = [&](int64_t a, int64_t b) {
    return ssim_pairs(imgs, Tensor::from_vector<int64_t>({a}, {1}), Tensor::from_vector<int64_t>({b}, {1}), 1.0)
        .item();
  };
  for (auto& x : t) {
    ASSERT_EQ(labels[x.anchor], labels[x.positive]);
    ASSERT_NE(x.anchor, x.positive);
    ASSERT_NE(labels[x.anchor], labels[x.negative]);
    const double sp = ssim1(x.anchor, x.positive), sn = ssim1(x.anchor, x.negative);
    for (int64_t j : ci.images_of(labels[x.anchor]))
      if (j != x.anchor) {
        EXPECT_LE(sp, ssim1(x.anchor, j) + 1e-7);  // least similar positive
      }
    for (int64_t j : ci.images_of(labels[x.negative])) EXPECT_GE(sn, ssim1(x.anchor, j) - 1e-7);
  }
}
