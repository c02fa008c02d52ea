// What the studies' grid drivers share (sampling_grid, omniglot_grid): the sample
// statistics of a cell group, reading a run's JSON outputs, and running one cell
// in-process with the grid's time budget and resume rule.
#pragma once
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "experiments/common/json.h"

namespace mn::exp {

// Mean, sample sd (n - 1; NaN for n < 2), minimum and count of the finite values.
struct SampleStats {
  double mean = NAN, sd = NAN, min = NAN;
  int n = 0;
};
SampleStats sample_stats(const std::vector<double>& values);

// A JSON file (summary.json), or null when missing or not JSON.
Json read_json_file(const std::string& path);

// What a run's summary.json says produced it (its "provenance" block, harness.cpp):
// the commit (10 characters, "+dirty" when built from a changed tree), the machine
// (CPU model, threads, GPU) and the command. Runs from before the block existed say
// "not recorded".
struct ProvenanceRow {
  std::string commit, machine, command;
};
ProvenanceRow provenance_row(const Json& summary);
// "" when every row has one commit; else a markdown line naming the commits.
std::string mixed_commits_note(const std::vector<ProvenanceRow>& rows);

// Runs one cell: `main_fn(argc, argv)` with `args` (program name first), adding
// --time-limit (what `time_limit` seconds since `start` leave; none when 0) and --resume
// when `dir` holds last.safetensors. Returns the run's exit status, or kExitResumable
// without running when under 30 s are left. Prints "[grid k/n] running|resuming <dir>".
int run_grid_cell(const std::function<int(int, char**)>& main_fn, std::vector<std::string> args,
                  const std::string& dir, double time_limit, std::chrono::steady_clock::time_point start,
                  size_t k, size_t n);

}  // namespace mn::exp
