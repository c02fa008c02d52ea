// Samplers over a labelled set (class -> image indices), all driven by a
// seeded mn::Generator so a seed reproduces the same stream:
//   * random triplets (the Omniglot study): anchor class uniform over classes
//     with >= 2 images, anchor image uniform in it, positive uniform among the
//     class's other images, negative class uniform among the other classes and
//     negative image uniform in it;
//   * random pairs with a chosen share of genuine (same-class) pairs;
//   * P x K class-balanced batches (P distinct classes, K distinct images each)
//     for online mining;
//   * offline SSIM mining: hard positive = the image of the anchor's class least
//     similar (lowest SSIM) to the anchor; semi-hard negative = the image most
//     similar to the anchor within ONE randomly chosen other class. SSIM comes
//     from data/ssim.h and runs where the image stack lives (CPU or CUDA).
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "data/dataset.h"

namespace mn::data {

struct Triplet {
  int64_t anchor, positive, negative;
};
struct Pair {
  int64_t a, b;
  int32_t same;  // 1 genuine, 0 impostor
};

// Class -> image indices, built once from labels (classes with no image kept empty).
class ClassIndex {
 public:
  explicit ClassIndex(const std::vector<int32_t>& labels);
  int64_t num_classes() const { return static_cast<int64_t>(by_class_.size()); }
  const std::vector<int64_t>& images_of(int32_t c) const { return by_class_[c]; }
  int32_t label_of(int64_t i) const { return labels_[i]; }
  // Classes with at least k images (memoised; safe to call from several threads).
  const std::vector<int32_t>& classes_with_at_least(int k) const;

 private:
  std::vector<int32_t> labels_;
  std::vector<std::vector<int64_t>> by_class_;
  mutable std::mutex mu_;
  mutable std::map<int, std::vector<int32_t>> at_least_;  // k -> classes; node-stable references
};

std::vector<Triplet> sample_random_triplets(const ClassIndex& ci, int64_t count, Generator& g);
// Exactly round(count * genuine_share) genuine pairs (share in [0, 1]), the rest
// impostors, in shuffled order.
std::vector<Pair> sample_random_pairs(const ClassIndex& ci, int64_t count, double genuine_share,
                                      Generator& g);
// (P * K) indices grouped by class: [c0 x K, c1 x K, ...].
std::vector<int64_t> sample_pk_batch(const ClassIndex& ci, int P, int K, Generator& g);
// A P x K batch whose P classes all come from one group (an Omniglot alphabet:
// Lake's one-shot trials are within-alphabet, so the hardest negatives a model
// must learn to separate are there). group_of_class (C) maps classes to groups.
// The group is drawn with probability proportional to its number of classes
// with >= K images, among the groups that have at least P of them.
std::vector<int64_t> sample_pk_batch_within_group(const ClassIndex& ci, const std::vector<int32_t>& group_of_class,
                                                  int P, int K, Generator& g);

// Offline SSIM mining. `images` (N, H, W) float on CPU or CUDA (values in
// [0, data_range]) indexed like the labels. Anchors are drawn as in the random
// sampler; all SSIMs of one call are computed in one batched ssim_pairs call.
// mine_positive / mine_negative choose which of the two is mined (the study compares
// hard-positive mining and semi-hard-negative mining separately); the other is
// drawn as in the random sampler. The draws are the same whichever is mined.
std::vector<Triplet> sample_ssim_triplets(const ClassIndex& ci, const Tensor& images,
                                          double data_range, int64_t count, Generator& g,
                                          bool mine_positive = true, bool mine_negative = true);

// Flattens triplets into three index lists (anchor, positive, negative).
void split_triplets(const std::vector<Triplet>& t, std::vector<int64_t>& a, std::vector<int64_t>& p,
                    std::vector<int64_t>& n);

}  // namespace mn::data
