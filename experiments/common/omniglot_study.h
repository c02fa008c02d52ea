// The Omniglot one-shot study ("triplet vs siamese CNNs with Koch-style
// branches") end to end: flags and presets, data, model, training loop with
// per-epoch validation, checkpoints and resume, final evaluation on Lake's 400
// trials and on N-way tasks from any Omniglot-layout folder.
// experiments/omniglot_triplet.cpp and omniglot_siamese.cpp are thin mains.
#pragma once

namespace mn::exp {

enum class StudyKind { Triplet, Siamese };

// Returns the process exit status: 0 success, 1 a failed run (data error, NaN
// loss, ...), 2 a usage error (bad flag or value).
int run_omniglot_study(StudyKind kind, int argc, char** argv);

}  // namespace mn::exp
