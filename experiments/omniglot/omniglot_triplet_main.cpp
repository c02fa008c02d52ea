// Triplet CNN on Omniglot one-shot: the framework's main job. `--help` lists every flag.
#include "experiments/omniglot/omniglot_study.h"

int main(int argc, char** argv) { return mn::exp::run_omniglot_study(mn::exp::StudyKind::Triplet, argc, argv); }
