// Shared fixture of the experiments tests: a small synthetic Omniglot-layout
// folder (written once per test binary), temporary folders, and helpers to run
// the Omniglot study binaries' main in-process and read their outputs.
//
// The synthetic data: images_background/ (4 alphabets x 6 characters x 6
// drawers) and images_evaluation/ (2 alphabets x 8 characters x 6 drawers) of
// 105x105 1-bit PNGs. Each character is a distinct glyph (three thick strokes
// whose end points are drawn from a generator seeded by the character), each
// drawer perturbs the end points and shifts the glyph by a few pixels, so the
// classes are learnable and one-shot tasks are non-trivial. No all_runs/
// folder: the study then skips Lake's final test (tested in tests/data).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "experiments/omniglot/omniglot_study.h"

namespace mn_test_exp {

namespace fs = std::filesystem;
using mn::exp::StudyKind;

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string str() const { return path.string(); }
  std::string operator/(const std::string& rel) const { return (path / rel).string(); }
};

constexpr int kSize = 105;

// The synthetic Omniglot tree shared by every test of the binary.
const std::string& omniglot_root();

struct RunResult {
  int rc = -1;
  std::string err;
  double seconds = 0;  // wall time of the run
};
// Runs the study's main in-process with `args` (without the program name).
RunResult run_study(StudyKind kind, std::vector<std::string> args, bool capture_stderr = false);
// Flags every training test shares: the synthetic data, the CPU, a small net.
std::vector<std::string> base_args(const std::string& out_dir, const std::string& cache_dir);
std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b);

std::string read_text(const std::string& path);
std::vector<std::string> read_lines(const std::string& path);
// The number after "key": in a flat JSON line (NaN when absent or null).
double json_field(const std::string& line, const std::string& key);
// The line with the given fields removed (for comparisons that ignore timings).
std::string without_fields(std::string line, const std::vector<std::string>& keys);
// Both runs end with the same weights, optimizer state, RNG states and metrics
// (timings aside).
void expect_same_run(const fs::path& a, const fs::path& b);

}  // namespace mn_test_exp
