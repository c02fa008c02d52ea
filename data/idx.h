// MNIST-family IDX files (MNIST, Fashion-MNIST, KMNIST): plain or gzip (zlib),
// magic 2049 (labels, idx1 uint8) / 2051 (images, idx3 uint8), every size checked
// against the file's length. Plus the held-out-class splits of the sampling
// study and stratified data-budget subsets (data/dataset.h).
//
// KMNIST here has only a partial training-image file whose header count (7,011)
// is smaller than the label file's (60,000): load_idx_pair() accepts an image
// count smaller than the label count when allow_label_prefix is set, uses the
// matching prefix of the labels, and says so in ImageDataset::note (and on stderr
// when verbose).
#pragma once
#include <string>
#include <vector>

#include "data/dataset.h"

namespace mn::data {

struct IdxArray {
  uint32_t magic = 0;               // 2049 or 2051
  std::vector<int64_t> dims;        // e.g. (N) or (N, 28, 28)
  std::vector<uint8_t> data;        // row-major
};

// Reads one IDX file (gzip detected by its 1f 8b header). Throws mn::Error naming
// the file for a wrong magic number, truncated data or trailing garbage.
IdxArray read_idx(const std::string& path);
// The (de)compressed bytes of a file: gunzip when gzip, else as is.
std::vector<uint8_t> read_maybe_gz(const std::string& path);
// From memory (for the fuzz targets; read_idx = parse_idx(gunzip_if_gzip(file))).
// `path` is used in error messages only.
std::vector<uint8_t> gunzip_if_gzip(std::vector<uint8_t> raw, const std::string& path);
IdxArray parse_idx(const std::vector<uint8_t>& bytes, const std::string& path);

// Images (N, H, W) + labels (N); class names "0".."9".
ImageDataset load_idx_pair(const std::string& images_path, const std::string& labels_path,
                           bool allow_label_prefix = false, bool verbose = false);

struct MnistFamily {
  ImageDataset train, test;
};
// `dir` holds {train,t10k}-{images-idx3,labels-idx1}-ubyte(.gz). When the
// training-image file is missing and partial/train-images-first*-idx3-ubyte.gz
// exists (KMNIST here), that file is used with the label prefix (noted).
MnistFamily load_mnist_family(const std::string& dir, bool verbose = false);

// The sampling study: train on classes other than `held_out` (e.g. {0}), test
// on all ten ("Test10") and on the known nine ("Test9").
struct HeldOutSplit {
  std::vector<int64_t> train;   // indices into the training set, labels not held out
  std::vector<int64_t> test10;  // all test indices
  std::vector<int64_t> test9;   // test indices whose label is not held out
};
HeldOutSplit held_out_class_split(const ImageDataset& train, const ImageDataset& test,
                                  const std::vector<int32_t>& held_out = {0});

// Writes an IDX file (uint8, raw, not compressed) — for tests and tools.
void write_idx(const std::string& path, uint32_t magic, const std::vector<int64_t>& dims,
               const std::vector<uint8_t>& data);

}  // namespace mn::data
