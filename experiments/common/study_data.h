// The data side of the Omniglot study: training/validation splits, Lake's runs,
// fixed validation triplets/pairs/tasks, training batches (random or
// SSIM-mined, optionally augmented) and the conversion of uint8 images to
// network inputs on the run's device.
//
// Input convention: images are black ink on white (data/image_io.h). Inputs
// are ink-high: raw intensities 255 - v (ink = 255, paper = 0), or with
// --input-norm (1 - v / 255) in [0, 1].
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/lake_runs.h"
#include "data/omniglot.h"
#include "data/tasks.h"
#include "experiments/common/flags.h"
#include "runtime/rng.h"

namespace mn::exp {

struct TripletBatch {
  Tensor anchors, positives, negatives;  // (B, 1, S, S) float32 on the device
};
struct PairBatch {
  Tensor left, right;  // (B, 1, S, S)
  Tensor target;       // (B) float32: 1 = same class
};
struct IndexTriplets {
  std::vector<int64_t> anchors, positives, negatives;
};
struct IndexPairs {
  std::vector<int64_t> left, right;
  std::vector<uint8_t> genuine;
};

class StudyData {
 public:
  StudyData(const Flags& f, Device device);

  // Training batches drawn with `g` (random, or SSIM-mined per --sampling).
  TripletBatch triplet_batch(int64_t B, Generator& g);
  PairBatch pair_batch(int64_t B, Generator& g);

  // uint8 (n, H, W) -> (n, 1, H, W) float32 input on the device.
  Tensor to_input(const Tensor& images_u8) const;
  // Validation images by index, as inputs.
  Tensor val_input(const std::vector<int64_t>& idx) const;

  const data::ImageDataset& train_set() const { return splits_.train; }
  const data::ImageDataset& val_set() const { return splits_.val; }
  const IndexTriplets& val_triplets();
  const IndexPairs& val_pairs();
  const std::vector<data::OneShotTask>& val_tasks();
  const std::vector<data::LakeRun>& lake_runs();
  std::string lake_dir() const { return lake_dir_; }
  std::string cache_dir() const { return cache_dir_; }

 private:
  IndexTriplets sample_triplets(const data::ImageDataset& ds,
                                const std::vector<std::vector<int64_t>>& by_class, int64_t n,
                                Generator& g, bool mined);
  Tensor train_input(const std::vector<int64_t>& idx, Generator& g);

  const Flags& f_;
  Device device_;
  std::string root_, lake_dir_, cache_dir_;
  data::OmniglotSplits splits_;
  std::vector<std::vector<int64_t>> train_by_class_, val_by_class_;
  bool have_val_triplets_ = false, have_val_pairs_ = false, have_tasks_ = false, have_lake_ = false;
  IndexTriplets val_triplets_;
  IndexPairs val_pairs_;
  std::vector<data::OneShotTask> tasks_;
  std::vector<data::LakeRun> lake_;
};

}  // namespace mn::exp
