// lmnn_mining: LMNN with triplet mining and hierarchical stratified sampling
// (Poorheravi et al.), Table 1 and Fig. 2. `--help` lists every flag.
#include "experiments/lmnn_mining/study.h"

int main(int argc, char** argv) { return mn::exp::run_study(mn::lmnn::make_lmnn_study(), argc, argv); }
