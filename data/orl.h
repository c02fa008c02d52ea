// ORL / AT&T faces: 40 subjects s1..s40, ten 92x112 8-bit PGMs each (K.pgm).
// Loads into an ImageDataset (N, 112, 92) with class "sNN" per subject, in
// numeric subject and image order. Use stratified_split() for train/val/test.
#pragma once
#include <string>

#include "data/dataset.h"

namespace mn::data {

// Throws naming the path for a missing folder, a subject folder without PGMs,
// an undecodable file, or images of differing sizes.
ImageDataset load_orl_faces(const std::string& dir);

}  // namespace mn::data
