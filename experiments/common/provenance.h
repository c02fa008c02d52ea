// What produced a run, written by the harness into summary.json ("provenance") and
// report.md: the exact command line, the commit the binary was built from and whether
// the tree was dirty (experiments/common/build_info.h), the build type and compiler,
// the machine (CPU model, cores, the threads used, the CPU instruction-set path, the
// GPU and its driver when the run used one), the start time and the wall time.
// Tables that aggregate runs (the grids' results.md) read it back from each run.
#pragma once
#include <string>

#include "experiments/common/json.h"
#include "runtime/device.h"

namespace mn::exp {

// argv quoted for a POSIX shell (each argument in single quotes where it needs any).
std::string shell_command(int argc, char* const* argv);
// The block above, without wall_seconds (Context adds it when the outputs are written).
Json provenance_json(int argc, char* const* argv, const Device& device);
// "model name" of /proc/cpuinfo ("unknown" elsewhere).
std::string cpu_model_name();
// Report lines (markdown list) for a provenance block.
std::string provenance_markdown(const Json& p);

}  // namespace mn::exp
