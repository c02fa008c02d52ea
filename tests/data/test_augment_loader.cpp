// Koch affine augmentation (against a direct bilinear mapping written here,
// identity, integer shift, parameter ranges, CPU/CUDA parity) and the loader
// (gather correctness, prefetch = same batches as no prefetch, GPU parity).
#include <gtest/gtest.h>

#include <cmath>

#include "../common/test_util.h"
#include "data/augment.h"
#include "data/loader.h"
#include "data_test_util.h"

using namespace mn;
using namespace mn::data;

TEST(DataAugment, IdentityAndIntegerShift) {
  Tensor x = test::rand({2, 9, 7}, 0, 1, DType::F32, Device::cpu(), 1);
  std::vector<Affine2D> id(2, identity_affine());
  EXPECT_TRUE(test::all_close(x, affine_warp(x, id, 0.0), 0, 0));  // exact: weights 1 and 0
  // Output (x, y) samples input (x - 1, y): a shift right by one, column 0 = fill.
  Affine2D sh = {{1, 0, -1, 0, 1, 0}};
  Tensor y = affine_warp(x, {sh, sh}, 0.5);
  auto xv = x.to_vector<float>(), yv = y.to_vector<float>();
  for (int n = 0; n < 2; ++n)
    for (int r = 0; r < 9; ++r)
      for (int c = 0; c < 7; ++c)
        EXPECT_EQ(yv[(n * 9 + r) * 7 + c], c == 0 ? 0.5f : xv[(n * 9 + r) * 7 + c - 1]);
}

TEST(DataAugment, WarpMatchesDirectBilinear) {
  const int H = 12, W = 10;
  Tensor x = test::rand({3, H, W}, 0, 1, DType::F64, Device::cpu(), 2);
  Generator g(5);
  KochAugmentOptions o;
  o.probability = 1.0;
  auto P = draw_koch_affines(3, H, W, o, g);
  Tensor y = affine_warp(x, P, 0.0);
  auto xv = x.to_vector<double>();
  std::vector<double> ref;
  for (int n = 0; n < 3; ++n)
    for (int r = 0; r < H; ++r)
      for (int c = 0; c < W; ++c) {
        const float* m = P[n].m;
        double sx = m[0] * c + m[1] * r + m[2], sy = m[3] * c + m[4] * r + m[5];
        int x0 = static_cast<int>(std::floor(sx)), y0 = static_cast<int>(std::floor(sy));
        double ax = sx - x0, ay = sy - y0, v = 0;
        for (int dy = 0; dy < 2; ++dy)
          for (int dx = 0; dx < 2; ++dx) {
            int yy = y0 + dy, xx = x0 + dx;
            double px = (yy >= 0 && yy < H && xx >= 0 && xx < W) ? xv[(n * H + yy) * W + xx] : 0.0;
            v += px * (dx ? ax : 1 - ax) * (dy ? ay : 1 - ay);
          }
        ref.push_back(v);
      }
  // The warp computes coordinates and weights in float32: ~1e-6 relative.
  EXPECT_TRUE(test::all_close(ref, y.to_vector<double>(), 2e-6, 2e-6));
}

TEST(DataAugment, ParameterRangesAndProbability) {
  Generator g(7);
  KochAugmentOptions o;
  o.probability = 0.0;
  for (int i = 0; i < 10; ++i) {
    Affine2D a = draw_koch_affine(105, 105, o, g);
    Affine2D id = identity_affine();
    for (int k = 0; k < 6; ++k) EXPECT_NEAR(a.m[k], id.m[k], 1e-6);
  }
  o.probability = 0.5;
  int identity = 0;
  const int n = 4000;
  for (int i = 0; i < n; ++i) {
    Affine2D a = draw_koch_affine(105, 105, o, g);
    // |det| of the inverse linear part = 1 / (sx sy) within [1/1.44, 1/0.64].
    double det = std::abs(a.m[0] * a.m[4] - a.m[1] * a.m[3]);
    ASSERT_GE(det, 1 / 1.44 - 1e-5);
    ASSERT_LE(det, 1 / 0.64 * (1 + 0.09) + 1e-5);  // shear det 1 - rx ry in [0.91, 1.09]
    bool is_id = std::abs(a.m[0] - 1) < 1e-7 && std::abs(a.m[1]) < 1e-7 && std::abs(a.m[2]) < 1e-7 &&
                 std::abs(a.m[3]) < 1e-7 && std::abs(a.m[4] - 1) < 1e-7 && std::abs(a.m[5]) < 1e-7;
    identity += is_id;
  }
  // All four coins off: p = 1/16; expect 250 +- 4 sigma (sigma = 15.3).
  EXPECT_NEAR(identity, n / 16.0, 62);
}

TEST(DataAugment, CudaMatchesCpuForSameSeed) {
  MN_SKIP_IF_NO_CUDA();
  Tensor x = test::rand({8, 105, 105}, 0, 1, DType::F32, Device::cpu(), 3);
  Generator g1(11), g2(11);
  auto p1 = draw_koch_affines(8, 105, 105, KochAugmentOptions{}, g1);
  auto p2 = draw_koch_affines(8, 105, 105, KochAugmentOptions{}, g2);
  Tensor a = affine_warp(x, p1, 0.0), b = affine_warp(x.cuda(), p2, 0.0).cpu();
  // Same float operations without FMA contraction: equal up to floor() edge
  // cases; 1e-5 absolute covers interpolation rounding.
  EXPECT_TRUE(test::all_close(a, b, 1e-5, 0));
}

namespace {
ImageDataset tiny(int C, int per, int H = 12, int W = 12) {
  ImageDataset ds;
  ds.images = Tensor::empty({C * per, H, W}, DType::U8);
  for (int i = 0; i < C * per * H * W; ++i) ds.images.data<uint8_t>()[i] = static_cast<uint8_t>((i * 31) % 251);
  for (int c = 0; c < C; ++c) {
    ds.class_names.push_back("c" + std::to_string(c));
    for (int k = 0; k < per; ++k) ds.labels.push_back(c);
  }
  return ds;
}
}  // namespace

TEST(DataLoader, GatherMatchesIndices) {
  ImageDataset ds = tiny(3, 4);
  std::vector<int64_t> idx = {5, 0, 11, 5};
  Tensor b = gather_images_float(ds.images, Tensor::from_vector(idx, {4}), FloatMode::Ink01);
  ASSERT_EQ(b.shape(), (Shape{4, 1, 12, 12}));
  auto v = b.to_vector<float>();
  auto px = ds.images.to_vector<uint8_t>();
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 144; ++j) ASSERT_FLOAT_EQ(v[k * 144 + j], 1.0f - px[idx[k] * 144 + j] / 255.0f);
  EXPECT_ANY_THROW(gather_images_float(ds.images, Tensor::from_vector<int64_t>({12}, {1}), FloatMode::Ink01));
}

TEST(DataLoader, PrefetchGivesSameBatchesAsSynchronous) {
  ImageDataset ds = tiny(6, 5);
  for (bool aug : {false, true}) {
    TripletLoaderOptions o;
    o.batch_size = 16;
    o.seed = 3;
    o.augment = aug;
    o.prefetch = true;
    TripletLoader pre(ds, o);
    o.prefetch = false;
    TripletLoader syn(ds, o);
    for (int it = 0; it < 4; ++it) {
      TripletBatch a = pre.next(), b = syn.next();
      ASSERT_EQ(a.triplets.size(), 16u);
      for (size_t i = 0; i < 16; ++i) ASSERT_EQ(a.triplets[i].negative, b.triplets[i].negative);
      EXPECT_TRUE(test::all_close(a.anchor, b.anchor, 0, 0));
      EXPECT_TRUE(test::all_close(a.negative, b.negative, 0, 0));
      if (!aug) {
        Tensor ref = gather_images_float(ds.images, Tensor::from_vector<int64_t>({a.triplets[3].positive}, {1}),
                                         FloatMode::Ink01);
        EXPECT_TRUE(test::all_close(ref, a.positive.narrow(0, 3, 1), 0, 0));
      }
    }
  }
}

// A data-parallel rank's shard: the same draws as the whole batch (the same triplets and
// generator offsets), only triplets [first, first + count) built, equal to those rows of
// the whole batch, augmented or not.
TEST(DataLoader, ShardIsTheWholeBatchsRows) {
  ImageDataset ds = tiny(6, 5);
  for (bool aug : {false, true}) {
    TripletLoaderOptions o;
    o.batch_size = 12;
    o.seed = 7;
    o.augment = aug;
    o.prefetch = false;
    TripletLoader whole(ds, o);
    o.shard_first = 4;
    o.shard_count = 4;
    TripletLoader shard(ds, o);
    for (int it = 0; it < 3; ++it) {
      TripletBatch a = whole.next(), b = shard.next();
      ASSERT_EQ(b.anchor.size(0), 4);
      EXPECT_EQ(a.offset_after, b.offset_after) << "the shard must draw as the whole batch does";
      ASSERT_EQ(b.triplets.size(), 12u);
      for (size_t i = 0; i < 12; ++i) EXPECT_EQ(a.triplets[i].anchor, b.triplets[i].anchor);
      EXPECT_TRUE(test::all_close(a.anchor.narrow(0, 4, 4), b.anchor, 0, 0));
      EXPECT_TRUE(test::all_close(a.positive.narrow(0, 4, 4), b.positive, 0, 0));
      EXPECT_TRUE(test::all_close(a.negative.narrow(0, 4, 4), b.negative, 0, 0));
    }
  }
  TripletLoaderOptions bad;
  bad.batch_size = 4;
  bad.shard_first = 3;
  bad.shard_count = 2;
  bad.prefetch = false;
  TripletLoader over(ds, bad);
  EXPECT_THROW(over.next(), mn::Error);
}

TEST(DataLoader, CudaBatchesMatchCpu) {
  MN_SKIP_IF_NO_CUDA();
  ImageDataset ds = tiny(6, 5, 105, 105);
  TripletLoaderOptions o;
  o.batch_size = 32;
  o.seed = 9;
  o.augment = true;
  o.prefetch = false;
  TripletLoader cpu(ds, o);
  o.device = Device::cuda();
  TripletLoader gpu(ds, o);
  for (int it = 0; it < 3; ++it) {
    TripletBatch a = cpu.next(), b = gpu.next();
    EXPECT_TRUE(b.anchor.is_cuda());
    EXPECT_TRUE(test::all_close(a.anchor, b.anchor.cpu(), 1e-5, 0));  // interpolation rounding
    EXPECT_TRUE(test::all_close(a.negative, b.negative.cpu(), 1e-5, 0));
  }
}
