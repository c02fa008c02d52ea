// Load-time transforms (data/transforms.h) and the within-alphabet P x K sampler.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "data/samplers.h"
#include "data/transforms.h"
#include "data_test_util.h"

using namespace mn;
using namespace mn::data;

namespace {
Tensor u8_from(const std::vector<int>& v, int64_t n, int64_t h, int64_t w) {
  Tensor t = Tensor::empty({n, h, w}, DType::U8);
  for (size_t i = 0; i < v.size(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(v[i]);
  return t;
}
std::vector<int> values(const Tensor& t) {
  std::vector<int> out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t.data<uint8_t>()[i]);
  return out;
}
}  // namespace

TEST(DataTransforms, ResizeAreaIntegerFactorIsTheBlockMean) {
  // 4x4 -> 2x2: every output is the mean of its 2x2 block (rounded to nearest).
  Tensor in = u8_from({0, 10, 100, 200, 20, 30, 50, 51, 255, 255, 1, 2, 255, 254, 3, 4}, 1, 4, 4);
  EXPECT_EQ(values(resize_area(in, 2, 2)), (std::vector<int>{15, 100, 255, 3}));  // 60/4, 401/4, 1019/4, 10/4
}

TEST(DataTransforms, ResizeAreaFractionalFactorWeighsBorderPixels) {
  // 3 -> 2 in each direction (factor 1.5): output pixel 0 covers input 0 fully and
  // half of input 1; output 1 the other half of 1 and all of 2. Separable, so a
  // 3x3 image of the outer product r x c averages to (r-weighted) x (c-weighted).
  // Rows 0, 90, 180 (constant along x): out rows (0 + 45) / 1.5 = 30 and (45 + 180) / 1.5 = 150.
  Tensor in = u8_from({0, 0, 0, 90, 90, 90, 180, 180, 180}, 1, 3, 3);
  EXPECT_EQ(values(resize_area(in, 2, 2)), (std::vector<int>{30, 30, 150, 150}));
  // A known Omniglot-size case: a constant image stays constant; the mean ink is kept.
  std::vector<int> v(105 * 105);
  for (int y = 0; y < 105; ++y)
    for (int x = 0; x < 105; ++x) v[static_cast<size_t>(y * 105 + x)] = (x / 15 + y / 21) % 2 ? 255 : 0;
  Tensor big = u8_from(v, 1, 105, 105);
  Tensor small = resize_area(big, 28, 28);
  double mean_in = 0, mean_out = 0;
  for (int x : v) mean_in += x;
  for (int x : values(small)) mean_out += x;
  EXPECT_NEAR(mean_out / (28 * 28), mean_in / (105 * 105), 0.5);
  EXPECT_EQ(values(resize_area(u8_from(std::vector<int>(105 * 105, 77), 1, 105, 105), 28, 28)),
            std::vector<int>(28 * 28, 77));
  EXPECT_MN_ERROR(resize_area(small, 56, 56), "only shrinks", "28x28");
}

TEST(DataTransforms, RotationsAndRotatedClasses) {
  Tensor in = u8_from({1, 2, 3, 4}, 1, 2, 2);  // [[1, 2], [3, 4]]
  EXPECT_EQ(values(rotate90(in, 1)), (std::vector<int>{2, 4, 1, 3}));  // counter-clockwise
  EXPECT_EQ(values(rotate90(in, 2)), (std::vector<int>{4, 3, 2, 1}));
  EXPECT_EQ(values(rotate90(rotate90(in, 3), 1)), values(in));
  ImageDataset ds;
  ds.images = u8_from({1, 2, 3, 4, 5, 6, 7, 8}, 2, 2, 2);
  ds.labels = {0, 1};
  ds.class_names = {"A/c1", "B/c1"};
  ds.class_alphabet = {0, 1};
  ds.alphabet_names = {"A", "B"};
  ImageDataset r = with_rotated_classes(ds);
  EXPECT_EQ(r.num_classes(), 8);
  EXPECT_EQ(r.size(), 8);
  EXPECT_EQ(r.alphabet_names.size(), 8u);
  EXPECT_EQ(r.class_names[2], "A/c1 (rot90)");
  EXPECT_EQ(r.alphabet_names[static_cast<size_t>(r.class_alphabet[2])], "A (rot90)");
  EXPECT_EQ(r.labels[2], 2);
  r.validate("rotated");
}

TEST(DataSamplers, PkBatchWithinOneAlphabet) {
  // 3 groups: group 0 has 6 classes, group 1 has 3, group 2 has 5; 5 images per class.
  std::vector<int32_t> labels;
  for (int c = 0; c < 14; ++c)
    for (int k = 0; k < 5; ++k) labels.push_back(c);
  std::vector<int32_t> group(14);
  for (int c = 0; c < 14; ++c) group[static_cast<size_t>(c)] = c < 6 ? 0 : c < 9 ? 1 : 2;
  ClassIndex ci(labels);
  Generator g(4);
  std::map<int, int> groups_seen;
  for (int rep = 0; rep < 300; ++rep) {
    auto pk = sample_pk_batch_within_group(ci, group, 4, 3, g);
    ASSERT_EQ(pk.size(), 12u);
    std::set<int> classes, groups;
    for (int p = 0; p < 4; ++p) {
      std::set<int64_t> imgs;
      for (int k = 0; k < 3; ++k) {
        ASSERT_EQ(labels[static_cast<size_t>(pk[p * 3 + k])], labels[static_cast<size_t>(pk[p * 3])]);
        imgs.insert(pk[p * 3 + k]);
      }
      ASSERT_EQ(imgs.size(), 3u);
      classes.insert(labels[static_cast<size_t>(pk[p * 3])]);
      groups.insert(group[static_cast<size_t>(labels[static_cast<size_t>(pk[p * 3])])]);
    }
    ASSERT_EQ(classes.size(), 4u);
    ASSERT_EQ(groups.size(), 1u) << "all P classes from one alphabet";
    ++groups_seen[*groups.begin()];
  }
  // Group 1 has only 3 classes (< P = 4): never drawn; groups 0 and 2 in proportion 6 : 5.
  EXPECT_EQ(groups_seen.count(1), 0u);
  EXPECT_NEAR(static_cast<double>(groups_seen[0]) / 300, 6.0 / 11, 0.1);
  EXPECT_MN_ERROR(sample_pk_batch_within_group(ci, group, 7, 3, g), "largest has 6", "P = 7");
  EXPECT_MN_ERROR(sample_pk_batch_within_group(ci, group, 2, 6, g), "no class has K = 6 images", "K <= 5");
}
