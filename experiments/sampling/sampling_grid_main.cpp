// sampling_grid: the sampling study's whole grid and its results.md (grid.h).
#include "experiments/sampling/grid.h"

int main(int argc, char** argv) { return mn::exp::sampling::run_grid(argc, argv); }
