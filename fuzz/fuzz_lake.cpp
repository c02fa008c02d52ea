// libFuzzer target: a Lake run's class_labels.txt (paths, pairing, answers).
#include <string>

#include "data/lake_runs.h"
#include "fuzz/fuzz_common.h"

MN_FUZZ_TARGET({
  const std::string text(reinterpret_cast<const char*>(data), size);
  mn::data::LakeRun r = mn::data::parse_lake_run_labels(text, "run01/class_labels.txt", "run01");
  if (r.answer.size() != r.query_files.size()) __builtin_trap();
  for (int32_t a : r.answer)
    if (a < 0 || static_cast<size_t>(a) >= r.candidate_files.size()) __builtin_trap();
})
