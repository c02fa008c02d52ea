// Triplet CNN on Omniglot one-shot: the framework's main job. `--help` lists every flag.
#include "experiments/common/omniglot_study.h"

int main(int argc, char** argv) { return mn::exp::run_omniglot_study(mn::exp::StudyKind::Triplet, argc, argv); }
