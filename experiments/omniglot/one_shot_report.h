// One-shot results of the Omniglot studies' final test (Lake's runs, --test-dir
// tasks) for summary.json and report.md: accuracy with a 95 % Wilson interval,
// overall and per group.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/tasks.h"
#include "experiments/common/json.h"

namespace mn::exp {

// One-shot score of a group of trials (an alphabet of --test-dir, a Lake run).
struct GroupScore {
  std::string name;
  double correct = 0;  // expected number correct (fractional on ties)
  int64_t trials = 0;
};

// The result as JSON: accuracy, its interval, trials, ties, per-task accuracy
// and one entry per group under `group_key`.
Json result_json(const data::OneShotResult& r, const std::vector<GroupScore>& groups, const char* group_key);
// "- what: accuracy (interval; trials, error)" and, with groups, a table with one
// row per group headed `group_word`.
std::string result_line(const std::string& what, const data::OneShotResult& r, const std::vector<GroupScore>& groups,
                        const char* group_word);

}  // namespace mn::exp
