// A folder of a user's own images, one subfolder per class:
//
//   ROOT/<class>/<image>     e.g. birds/sparrow/0001.jpg, birds/wren/img_7.png
//
// Images are PNG, JPEG, BMP (stb_image) or PGM (our parser), grey or colour, any size;
// each is decoded to `channels` (1: grey by ITU-R 601 luma, as stb_image converts;
// 3: RGB, a grey image repeated) and resized once to image_size x image_size with a
// box (area) filter (PIL's BOX: every output pixel is the mean of the input area it
// covers, upscaling included; the aspect ratio is not kept, as torchvision's
// Resize((S, S))). Pixels stay uint8 file levels (data/image_io.h's convention).
//
// Hidden entries (".*") and the system files Thumbs.db and desktop.ini are skipped;
// any other file that is not an image of those formats is refused naming it (a
// training set with a stray file is more likely a mistake than a wish). Classes are
// the subfolders' names in byte order; images within a class in byte order of their
// names, so a folder always loads the same way.
//
// Metric learning is evaluated on classes never trained on: split_classes() cuts the
// classes (not the images) into training, validation and test classes, or the user
// gives three folders.
//
// Cache: with a cache_dir, the decoded and resized images go to
// <cache_dir>/folder_<key>.mnpack, keyed on content (XXH3-64 over every image's
// relative path and the XXH3-64 of its bytes, the channels and the size): a changed,
// added or removed image makes a new key; a pack whose own checksum fails is rebuilt.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/rng.h"
#include "runtime/tensor.h"

namespace mn::data {

struct FolderDataset {
  Tensor images;                         // (N, C, S, S) uint8, CPU
  std::vector<int32_t> labels;           // (N) class index; -1 for an unlabelled folder
  std::vector<std::string> files;        // (N) path relative to the root
  std::vector<std::string> class_names;  // (C) subfolder names; empty when unlabelled
  std::string root;                      // the folder as given

  int64_t size() const { return static_cast<int64_t>(files.size()); }
  int64_t num_classes() const { return static_cast<int64_t>(class_names.size()); }
  bool labelled() const { return !class_names.empty(); }
};

struct FolderLoadOptions {
  int channels = 1;         // 1 or 3
  int image_size = 28;      // square side after resizing
  std::string cache_dir;    // "" = decode every image on every load
  bool allow_unlabelled = false;  // images directly in ROOT (no class folders): labels -1
  bool verbose = false;     // say whether the cache was used
};

// ROOT/<class>/<image> (or, with allow_unlabelled, ROOT/<image>). Throws mn::Error
// naming the folder or file: missing, no classes, an empty class, a file that is not
// an image, a corrupt image, images both in ROOT and in class folders.
FolderDataset load_image_folder(const std::string& root, const FolderLoadOptions& o);

// The images of `classes` (indices into ds.class_names), relabelled 0..k-1 in that order.
FolderDataset subset_classes(const FolderDataset& ds, const std::vector<int32_t>& classes);

struct ClassSplit {
  std::vector<int32_t> train, val, test;  // class indices, ascending
};
// Shuffles the classes with `g` and gives val_fraction of them (rounded, at least one
// when the fraction is > 0) to validation and test_fraction to test; the rest train.
// Throws when fewer than 2 classes would be left to train on or a split asked for
// gets none.
ClassSplit split_classes(int64_t num_classes, double val_fraction, double test_fraction, Generator& g);

// One image file decoded to `channels` (1 or 3) interleaved uint8 (H, W, C). Accepts
// PNG, JPEG (baseline and progressive), BMP and PGM; refuses anything else naming it.
struct DecodedImage {
  int height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;  // (H, W, C)
};
DecodedImage decode_image(const uint8_t* bytes, size_t n, int channels, const std::string& name);
// Box (area) resampling of an interleaved (H, W, C) image to (C, S, S) planes, rounded
// to nearest; both down- and upscaling.
std::vector<uint8_t> resize_box_planar(const DecodedImage& img, int size);

}  // namespace mn::data
