// JSON for the experiment outputs (metrics.jsonl, summary.json, evaluation.json,
// configs in checkpoints): nlohmann-json (Debian nlohmann-json3-dev), with keys
// kept in insertion order so a metrics line reads epoch, training stats,
// validation metrics, timings.
#pragma once
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace mn::exp {

using Json = nlohmann::ordered_json;

// A metric value: 10 significant digits (the precision metrics.jsonl always had,
// so files stay comparable with earlier runs), NaN and infinities as null.
inline Json metric_number(double v) {
  if (!std::isfinite(v)) return nullptr;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return std::strtod(buf, nullptr);
}

}  // namespace mn::exp
