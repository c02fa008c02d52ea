// The three data sets of the LMNN triplet-mining study (§5.1 of Poorheravi et
// al.; protocol in docs/study-protocols.md), split per seed:
//   iris  random 105 / 23 / 22 (train / validation / test), raw features;
//   orl   images 1-6 of every subject train (240); images 7-10 shuffled per
//         subject into 2 validation + 2 test (or, with the fixed split, the
//         authors' code's 7-8 validation and 9-10 test for every seed); pixels / 255 projected on the 15
//         leading eigenfaces fitted on the 240 training images;
//   mnist a stratified subset of the official training set, 40 / 10 / 10 per
//         digit (400 / 100 / 100); pixels / 255, PCA to 30 fitted on the 400.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "experiments/lmnn_mining/linalg.h"

namespace mn::lmnn {

struct StudySplit {
  std::string dataset;
  Mat train, val, test;                  // (n, d) features in the study's input space
  std::vector<int32_t> ytrain, yval, ytest;
  int32_t num_classes = 0;
  // ORL only: the eigenfaces (10304, 15) and the image size, for the ghost faces.
  Mat eigenfaces;
  int image_h = 0, image_w = 0;
};

// The raw data sets, loaded once and shared by every seed.
class StudyData {
 public:
  // `data_dir`: a folder holding iris/, orl_faces/ and mnist/; empty = the
  // project's lookup ($MN_DATA_DIR, ./datasets, ../shared/datasets).
  // `orl_fixed_split`: images 7-8 validation, 9-10 test in every seed (the
  // authors' code) instead of the protocol's per-seed shuffle of 7-10.
  // `mnist_first`: MNIST's first 400 training images for training, training
  // images 501-600 for validation and the first 100 test (t10k) images for the
  // test, in every seed (the authors' main.m) instead of the protocol's
  // stratified 40 / 10 / 10 per digit drawn per seed.
  explicit StudyData(std::string data_dir, bool orl_fixed_split = false, bool mnist_first = false)
      : data_dir_(std::move(data_dir)), orl_fixed_split_(orl_fixed_split), mnist_first_(mnist_first) {}
  // Throws mn::Error naming the data set and the folders tried when it is absent.
  StudySplit split(const std::string& dataset, uint64_t seed);
  // Where a data set is found ("" when absent).
  std::string dir_of(const std::string& dataset) const;

 private:
  struct Raw {
    Mat x;                     // (N, D) float64, pixels / 255 for images
                               // (MNIST with mnist_first: training images 1-600, then test images 1-100)
    std::vector<int32_t> y;    // (N)
    int32_t num_classes = 0;
    int h = 0, w = 0;
  };
  const Raw& raw(const std::string& dataset);
  std::string data_dir_;
  bool orl_fixed_split_ = false;
  bool mnist_first_ = false;
  std::unique_ptr<Raw> iris_, orl_, mnist_;
};

// Pure split rules (tested without data): index lists per seed.
struct SplitIdx {
  std::vector<int64_t> train, val, test;
};
// --mnist-subset first (the authors' main.m): rows of StudyData's MNIST matrix
// in that mode, training images 1-600 then test images 1-100: train 1-400,
// validation 501-600 (their readMNIST offset 500), test the 100 test images.
constexpr int64_t kMnistFirstTrain = 600, kMnistFirstTest = 100;
SplitIdx mnist_first_split();
SplitIdx iris_split(int64_t n, uint64_t seed);                 // 70/15/15 -> floor/floor/rest
// Per-class image order; `fixed`: 7-8 validation and 9-10 test whatever the seed.
SplitIdx orl_split(const std::vector<int32_t>& labels, uint64_t seed, bool fixed = false);
SplitIdx mnist_split(const std::vector<int32_t>& labels, int64_t per_class_train,
                     int64_t per_class_val, int64_t per_class_test, uint64_t seed);

}  // namespace mn::lmnn
