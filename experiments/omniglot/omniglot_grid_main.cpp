// omniglot_grid: the Omniglot study's tables and ablations as one grid of runs (grid.h).
#include "experiments/omniglot/grid.h"

int main(int argc, char** argv) { return mn::exp::omniglot_grid::run_grid(argc, argv); }
