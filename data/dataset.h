// ImageDataset: a labelled set of same-sized gray images held as one (N, H, W)
// uint8 CPU tensor (pixel convention in data/image_io.h), with per-image class
// labels and drawers and per-class names and alphabets. Omniglot, ORL and the
// MNIST family all load into it; splits are index lists turned into subsets.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/rng.h"
#include "runtime/tensor.h"

namespace mn::data {

struct ImageDataset {
  Tensor images;                         // (N, H, W) uint8, CPU
  std::vector<int32_t> labels;           // (N) class index in [0, C)
  std::vector<int32_t> drawer;           // (N) Omniglot drawer 1..20; empty otherwise
  std::vector<std::string> files;        // (N) source file (relative); may be empty
  std::vector<std::string> class_names;  // (C) e.g. "Armenian/character07"
  std::vector<int32_t> class_alphabet;   // (C) index into alphabet_names; empty if n/a
  std::vector<std::string> alphabet_names;
  std::string note;                      // provenance remarks (e.g. KMNIST prefix)

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  int64_t height() const { return images.defined() ? images.size(1) : 0; }
  int64_t width() const { return images.defined() ? images.size(2) : 0; }
  int64_t num_classes() const { return static_cast<int64_t>(class_names.size()); }
  // Image indices of every class: (C) lists, in dataset order.
  std::vector<std::vector<int64_t>> indices_by_class() const;
  // Checks the invariants (sizes agree, labels in range); throws naming `what`.
  void validate(const std::string& what) const;
};

// The images at `idx` (in that order). With relabel, classes that occur are
// renumbered 0..C'-1 in order of first class index and names/alphabets follow;
// otherwise labels and class tables are kept as they are.
ImageDataset subset(const ImageDataset& ds, const std::vector<int64_t>& idx, bool relabel = true);
// Concatenates two datasets of equal image size; b's classes and alphabets are
// appended after a's.
ImageDataset concat(const ImageDataset& a, const ImageDataset& b);

// ---- index splits ----------------------------------------------------------
struct IndexSplit {
  std::vector<int64_t> train, val, test;
};
// Stratified: within every class the indices are shuffled and cut in the given
// proportions (rounded per class so each split gets floor share; the remainder
// goes to train). Fractions must be >= 0 and sum to <= 1 (the rest is dropped).
IndexSplit stratified_split(const std::vector<int32_t>& labels, double train_frac, double val_frac,
                            double test_frac, Generator& g);
// A stratified subset holding `fraction` of every class (at least one per class
// when min_one_per_class), shuffled within class; returned in ascending order.
std::vector<int64_t> stratified_subset(const std::vector<int32_t>& labels, double fraction,
                                       Generator& g, bool min_one_per_class = true);
// Indices whose label is (or is not) in `classes`.
std::vector<int64_t> indices_with_labels(const std::vector<int32_t>& labels,
                                         const std::vector<int32_t>& classes, bool keep = true);

}  // namespace mn::data

namespace mn::data {
// Where a data set lives: the first of $MN_DATA_DIR/<name>, $DATA_DIR/<name>,
// ./datasets/<name>, ../shared/datasets/<name> that is a directory; "" if none.
std::string find_dataset_dir(const std::string& name);
// Cache folder for packed data: $MN_CACHE_DIR, else $XDG_CACHE_HOME/metricnet,
// else $HOME/.cache/metricnet, else ./.mn_cache.
std::string default_cache_dir();
}  // namespace mn::data
