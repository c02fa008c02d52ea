// libFuzzer target: config files (`key = value` lines) read into a study's
// flags (the sampling study's: strings with and without choices, integers and
// doubles with ranges, booleans). Any text must be applied or refused with
// mn::Error; and what was applied must survive a round trip through
// to_config() (the config.txt a run writes) with the same values.
#include <string>

#include "experiments/common/flags.h"
#include "experiments/sampling/study.h"
#include "fuzz/fuzz_common.h"

namespace {
mn::exp::Flags sampling_flags() {
  mn::exp::Flags f("sampling", "fuzz");
  mn::exp::sampling::make_sampling_study()->declare_flags(f);
  f.add_string("out-dir", "runs/sampling", "free text, as the harness's");
  return f;
}
}  // namespace

MN_FUZZ_TARGET({
  const std::string text(reinterpret_cast<const char*>(data), size);
  mn::exp::Flags f = sampling_flags();
  f.load_config_text(text, "fuzz.cfg");
  mn::exp::Flags g = sampling_flags();
  g.load_config_text(f.to_config(), "round-trip.cfg");
  if (g.to_json() != f.to_json()) __builtin_trap();  // config.txt does not read back as written
  try {
    f.validate_ranges();
  } catch (const mn::Error&) {
  }
})
