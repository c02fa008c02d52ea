// lmnn_sdp_export: one LMNN problem of the study as JSON for an interior-point
// reference (sdp_export.h). `--help` lists the flags.
#include "experiments/lmnn_mining/sdp_export.h"

int main(int argc, char** argv) { return mn::lmnn::run_sdp_export(argc, argv); }
