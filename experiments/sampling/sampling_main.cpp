// sampling: one cell of the sampling study (one data set, one strategy).
#include "experiments/sampling/study.h"

int main(int argc, char** argv) { return mn::exp::run_study(mn::exp::sampling::make_sampling_study(), argc, argv); }
