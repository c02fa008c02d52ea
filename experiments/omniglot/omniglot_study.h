// The Omniglot one-shot study ("triplet vs siamese CNNs with Koch-style
// branches") as two harness studies (experiments/common/harness.h):
// omniglot_triplet and omniglot_siamese share the data, the flags, the
// optimizer, validation and the final test (OmniglotStudy in omniglot_base.h)
// and differ only in their network, training step and scoring
// (triplet_study.cpp, siamese_study.cpp). The binaries' mains are
// omniglot_triplet_main.cpp and omniglot_siamese_main.cpp.
#pragma once
#include <memory>

#include "experiments/common/harness.h"

namespace mn::exp {

std::unique_ptr<Study> make_omniglot_triplet_study();
std::unique_ptr<Study> make_omniglot_siamese_study();

enum class StudyKind { Triplet, Siamese };

// The binary's whole main: returns the exit status (see harness.h).
int run_omniglot_study(StudyKind kind, int argc, char** argv);

}  // namespace mn::exp
