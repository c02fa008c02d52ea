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
#include "data/loader.h"
#include "data/omniglot.h"
#include "data/samplers.h"
#include "data/tasks.h"
#include "experiments/common/flags.h"
#include "runtime/rng.h"

namespace mn::exp {

struct TripletBatch {
  Tensor anchors, positives, negatives;  // (B, 1, S, S) float32 on the device
};
// P classes x K images for online mining.
struct PKBatch {
  Tensor images;  // (P*K, 1, S, S), or the requested rows of them
  Tensor labels;  // (P*K) int64 on the device
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

// Throws naming `flag` when `ds` (described as `what`) has no alphabet with `n`
// characters for N-way tasks. Returns the alphabets with fewer, which the tasks
// leave out ("Name (k characters)"), after a warning on stderr naming them.
std::vector<std::string> check_way(const data::ImageDataset& ds, const char* flag, int64_t n, const std::string& what);

class StudyData {
 public:
  // `evaluating` (--evaluate): only the paths; the splits are not loaded and
  // the training and validation accessors throw.
  StudyData(const Flags& f, Device device, bool evaluating = false);

  // Training batches from the loader (random or SSIM-mined per --sampling,
  // augmented with --augment; on a GPU gathered from the device-resident set).
  // start_loader must be called first; `offset` resumes the loader's generator. A
  // data-parallel rank passes its shard (triplets [first, first + count) of each batch;
  // count -1: all), the batches' draws staying every rank's.
  void start_loader(int64_t triplets_per_batch, uint64_t seed, uint64_t offset, int64_t first = 0,
                    int64_t count = -1);
  TripletBatch triplet_batch();
  // B pairs from B/2 loader triplets: (a, p) genuine and (a, n) impostor.
  PairBatch pair_batch(int64_t B);
  // The loader generator's state after the last batch handed out.
  uint64_t loader_seed() const { return loader_seed_; }
  uint64_t loader_offset() const { return loader_offset_; }
  // Online mining batch: P classes x K images, drawn with `g`.
  // The whole batch's indices (and augmentations) are drawn from g on every rank; only
  // rows [first, first + count) are gathered and warped (count -1: all), so a
  // data-parallel rank builds only its own rows. labels: the whole batch's (the
  // global miner needs them).
  PKBatch pk_batch(int64_t P, int64_t K, Generator& g, int64_t first = 0, int64_t count = -1);

  // uint8 (n, H, W) -> (n, 1, H, W) float32 input on the device.
  Tensor to_input(const Tensor& images_u8) const;
  // Whether the training and validation splits are loaded (not in --evaluate runs).
  bool has_splits() const { return have_splits_; }
  // Validation images by index, as inputs.
  Tensor val_input(const std::vector<int64_t>& idx) const;
  // Test-time augmentation (--tta): inputs x (n, 1, S, S) under view `view` >= 1
  // of side `side` (0: queries, 1: candidates): one draw of Koch's affine
  // distortions per image (the training augmentation's ranges times
  // --tta-scale, translation scaled to S) from a generator seeded by (view,
  // side), so every run and every evaluation scores the same views.
  Tensor tta_view(const Tensor& x, int64_t view, int side) const;

  const data::ImageDataset& train_set() const { return splits_.train; }
  const data::ImageDataset& val_set() const { return splits_.val; }
  const IndexTriplets& val_triplets();
  const IndexPairs& val_pairs();
  const std::vector<data::OneShotTask>& val_tasks();
  const std::vector<data::LakeRun>& lake_runs();
  std::string lake_dir() const { return lake_dir_; }
  std::string cache_dir() const { return cache_dir_; }

 private:
  IndexTriplets random_triplets(const data::ClassIndex& ci, int64_t n, uint64_t seed) const;
  void need_splits(const char* what) const;

  const Flags& f_;
  Device device_;
  std::string root_, lake_dir_, cache_dir_;
  data::OmniglotSplits splits_;
  std::unique_ptr<data::ClassIndex> train_classes_, val_classes_;
  std::unique_ptr<data::TripletLoader> loader_;
  Tensor train_images_device_;  // for P x K batches (uploaded once)
  uint64_t loader_seed_ = 0, loader_offset_ = 0;
  int64_t image_size_ = 105;  // --image-size: every input is this square side
  bool have_splits_ = false;
  bool have_val_triplets_ = false, have_val_pairs_ = false, have_tasks_ = false, have_lake_ = false;
  IndexTriplets val_triplets_;
  IndexPairs val_pairs_;
  std::vector<data::OneShotTask> tasks_;
  std::vector<data::LakeRun> lake_;
};

}  // namespace mn::exp
