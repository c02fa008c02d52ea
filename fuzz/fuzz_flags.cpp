// libFuzzer target: command lines. The input is split at NUL bytes and
// newlines into arguments and parsed into the sampling study's flags (CLI11
// tokenises, our code converts and checks). Any command line must be parsed or
// refused with mn::Error (CLI11's own exceptions must not escape). --config and
// --help are dropped (a file read, a help text), so the target stays in memory.
#include <string>
#include <vector>

#include "experiments/common/flags.h"
#include "experiments/sampling/study.h"
#include "fuzz/fuzz_common.h"

MN_FUZZ_TARGET({
  std::vector<std::string> args{"sampling"};
  std::string cur;
  for (size_t i = 0; i <= size; ++i) {
    if (i == size || data[i] == 0 || data[i] == '\n') {
      if (cur.rfind("--config", 0) != 0 && cur != "--help" && cur != "-h") args.push_back(cur);
      cur.clear();
    } else {
      cur += static_cast<char>(data[i]);
    }
  }
  mn::exp::Flags f("sampling", "fuzz");
  mn::exp::sampling::make_sampling_study()->declare_flags(f);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  if (f.parse(static_cast<int>(argv.size()), argv.data())) {
    f.validate_ranges();
    (void)f.to_json();
  }
})
