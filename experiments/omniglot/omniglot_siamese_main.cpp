// Koch et al.'s siamese CNN on Omniglot one-shot (the study's baseline). `--help` lists every flag.
#include "experiments/omniglot/omniglot_study.h"

int main(int argc, char** argv) { return mn::exp::run_omniglot_study(mn::exp::StudyKind::Siamese, argc, argv); }
