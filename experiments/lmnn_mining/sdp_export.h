// lmnn_sdp_export (sdp_export.cpp): one non-hierarchical LMNN problem of the
// study, solved by our solver, written as JSON for the interior-point reference
// bench/references/lmnn_sdp_cvxopt.py. Returns the process exit status.
#pragma once

namespace mn::lmnn {

int run_sdp_export(int argc, char** argv);

}  // namespace mn::lmnn
