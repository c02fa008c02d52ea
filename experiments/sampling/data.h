// The sampling study's data (study-protocols.md, "Sampling study"): an MNIST-
// family set with one class removed from training, inputs normalised with the
// study's constants, and every tuple the study draws:
//   * online strategies: balanced batches of P classes x K images (the study's
//     BalancedBatchSampler: each class's images shuffled, K consecutive ones per
//     chosen class, a class reshuffled when fewer than K remain);
//   * offline strategies: one tuple per training image per epoch (a pair with a
//     random positive or negative partner, p = 0.5; a triplet with a random
//     positive and a random negative), in a shuffled order;
//   * fixed test tuples (the study's RandomState(29) construction): pairs with
//     even indices positive and odd ones negative, stored positives first, and
//     one triplet per test image.
// Every draw is a pure function of (seed, epoch), so a resumed run replays the
// same batches (the plan of an epoch is rebuilt and the done steps skipped).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/rng.h"
#include "runtime/tensor.h"

namespace mn::exp::sampling {

// The study's normalisation (Fashion-MNIST statistics, used for all three sets).
constexpr double kMean = 0.28604059698879553, kStd = 0.35302424451492237;

struct SplitImages {
  std::vector<float> x;      // (N, 28 * 28) normalised
  std::vector<int32_t> y;    // (N) labels 0..9
  int64_t size() const { return static_cast<int64_t>(y.size()); }
};

struct StudyImages {
  std::string dataset;       // mnist | kmnist | fashion-mnist
  std::string dir;           // the IDX folder read
  std::string note;          // provenance (e.g. KMNIST's partial training file)
  int32_t unseen = 0;        // the class removed from training
  int64_t side = 28;
  SplitImages train;         // training images without the unseen class
  SplitImages test10;        // the whole test set
  std::vector<int64_t> test9;  // indices into test10 without the unseen class
  std::vector<std::string> class_names;  // (10)
  int64_t train_total = 0;   // training images in the file, before the removal
};

// Class names of each data set (Fashion-MNIST's words, KMNIST's romanised kana).
std::vector<std::string> class_names_of(const std::string& dataset);
// The IDX folder of `dataset`: `data_dir` (or its subfolder named like the
// set), else the project's data lookup. Throws naming --data-dir.
std::string dataset_dir(const std::string& dataset, const std::string& data_dir);
// Loads and normalises. `max_train` > 0 keeps only the first that many
// training images (a user's quick run; 0: all).
StudyImages load_study_images(const std::string& dataset, const std::string& data_dir, int32_t unseen,
                              int64_t max_train = 0);

// Images at `idx` as one (n, 1, side, side) float tensor on `device`.
Tensor gather_images(const SplitImages& s, const std::vector<int64_t>& idx, int64_t side, Device device);

// ---- tuples -----------------------------------------------------------------
// Balanced P x K batches for one epoch: `batches` lists of P * K indices, grouped
// by class ([c0 x K, c1 x K, ...]); classes chosen without replacement per batch.
std::vector<std::vector<int64_t>> balanced_batches(const std::vector<int32_t>& labels,
                                                   const std::vector<int64_t>& subset, int P, int K,
                                                   int64_t batches, Generator& g);

struct OfflinePlan {
  std::vector<int64_t> order;     // (N) shuffled anchors
  std::vector<int64_t> partner;   // pairs: the partner; triplets: the positive
  std::vector<int64_t> negative;  // triplets only
  std::vector<int32_t> same;      // pairs: 1 positive, 0 negative
};
// One epoch of offline tuples over all training images.
OfflinePlan offline_pairs(const std::vector<int32_t>& labels, Generator& g);
OfflinePlan offline_triplets(const std::vector<int32_t>& labels, Generator& g);

struct FixedPairs {
  std::vector<int64_t> a, b;
  std::vector<int32_t> same;  // positives first, then negatives (the study's order)
};
struct FixedTriplets {
  std::vector<int64_t> a, p, n;
};
// Over the images `subset` (indices into labels): the study's test pairs (even
// positions positive with a random same-class partner, possibly the image
// itself as in the study's code; odd positions negative), positives first.
FixedPairs fixed_test_pairs(const std::vector<int32_t>& labels, const std::vector<int64_t>& subset, uint64_t seed);
// One triplet per image of `subset`; `distinct_positive` excludes the anchor
// itself (the matched-couple metric), else as the study's code (may repeat it).
FixedTriplets fixed_test_triplets(const std::vector<int32_t>& labels, const std::vector<int64_t>& subset,
                                  uint64_t seed, bool distinct_positive);

}  // namespace mn::exp::sampling
