// Omniglot: index and load images_background/ and images_evaluation/
// (<Alphabet>/characterNN/<id>_<drawer>.png, 105x105 1-bit PNG, black ink on
// white; see data/image_io.h for the pixel convention), the training and
// validation splits, and a packed cache.
//
// Splits (the final test is Lake's 20 runs, data/lake_runs.h, never these):
//   train = the 30 background alphabets; option train_max_drawer = 12 keeps only
//           drawers 1..12 as Koch et al. did.
//   val   = Validation::EvaluationAlphabets: the evaluation alphabets present
//           (10 here; optionally restricted to drawers val_drawer_lo..hi), or
//           Validation::HeldOutDrawers: the background alphabets' drawers
//           val_drawer_lo..val_drawer_hi (must not overlap the training drawers).
//
// Cache: load_omniglot_set() with a cache_dir writes
// <cache_dir>/omniglot_<set>_<path hash>.mnpack (one pack per resolved absolute
// folder path) holding every image (1 bit per pixel when the set is binary,
// else 8) plus the index, keyed on content: XXH3-64 over every file's relative
// path and the XXH3-64 of its bytes. A changed, added or removed file changes
// the key (whatever its size and mtime) and the pack is rebuilt; a pack whose
// checksum (XXH3-64 of all its bytes) fails is rebuilt too (never half-used).
// Entries named *.png that are not regular files are skipped with a warning.
#pragma once
#include <string>

#include "data/dataset.h"

namespace mn::data {

struct OmniglotLoadOptions {
  std::string cache_dir;    // "" = no cache: decode every PNG
  int expected_size = 105;  // every image must be this square size (<= 0: no check)
  bool verbose = false;     // print whether the cache was used or rebuilt
};

// Loads one set folder (e.g. ".../omniglot/images_background"). Classes are the
// character folders in sorted (alphabet, character) order; images in sorted file
// order; drawer parsed from the file name. Throws mn::Error naming the path for a
// missing folder, an alphabet without characters, a character without PNGs, a
// malformed file name, an undecodable PNG or an image of the wrong size.
ImageDataset load_omniglot_set(const std::string& set_dir, const OmniglotLoadOptions& opt = {});

// What the cache did on the last load_omniglot_set call in this thread (for tests
// and benchmarks): 0 = no cache, 1 = loaded from the pack, 2 = (re)built it.
int omniglot_last_cache_action();

// The content key of a set folder (see above; reads every file).
uint64_t omniglot_listing_hash(const std::string& set_dir);

enum class OmniglotValidation { EvaluationAlphabets, HeldOutDrawers };

struct OmniglotSplitOptions {
  std::string root;  // folder holding images_background/ (and images_evaluation/)
  std::string cache_dir;
  int train_max_drawer = 20;  // 12 = Koch et al.'s 12 drawers
  OmniglotValidation validation = OmniglotValidation::EvaluationAlphabets;
  int val_drawer_lo = 1;   // drawers used for validation (inclusive range)
  int val_drawer_hi = 20;
};

struct OmniglotSplits {
  ImageDataset train;
  ImageDataset val;
  std::string description;  // one line: alphabets, classes, images, drawers
};

OmniglotSplits load_omniglot_splits(const OmniglotSplitOptions& opt);

// Images of `ds` whose drawer lies in [lo, hi].
std::vector<int64_t> indices_with_drawers(const ImageDataset& ds, int lo, int hi);

}  // namespace mn::data
