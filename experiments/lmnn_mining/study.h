// The LMNN triplet-mining study as a harness Study (custom-shaped: run() loops
// over the cells of Table 1); see study.cpp.
#pragma once
#include <memory>

#include "experiments/common/harness.h"

namespace mn::lmnn {
std::unique_ptr<exp::Study> make_lmnn_study();
}  // namespace mn::lmnn
