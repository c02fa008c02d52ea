// One-shot results as JSON and report lines (see one_shot_report.h).
#include "experiments/omniglot/one_shot_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

namespace mn::exp {

namespace {
// 95 % Wilson score interval of a proportion (better than the normal
// approximation near 0 or 1 and for few trials), in percent. It treats trials
// as independent; trials of one task share their candidates, so it is an
// optimistic (narrow) interval for task-level variation.
std::pair<double, double> wilson95(double correct, int64_t n) {
  if (n <= 0) return {NAN, NAN};
  const double z = 1.959963984540054, nn = static_cast<double>(n), p = correct / nn;
  const double den = 1 + z * z / nn, mid = (p + z * z / (2 * nn)) / den;
  const double half = z * std::sqrt(p * (1 - p) / nn + z * z / (4 * nn * nn)) / den;
  return {100 * std::max(0.0, mid - half), 100 * std::min(1.0, mid + half)};
}
Json ci_json(double correct, int64_t n) {
  auto [lo, hi] = wilson95(correct, n);
  return Json::array({metric_number(lo), metric_number(hi)});
}
}  // namespace

Json result_json(const data::OneShotResult& r, const std::vector<GroupScore>& groups, const char* group_key) {
  Json per = Json::array();
  for (double g : r.group_error_percent) per.push_back(metric_number(100.0 - g));
  Json j;
  j["accuracy_percent"] = metric_number(100.0 - r.error_percent);
  j["accuracy_ci95_percent"] = ci_json(r.correct, r.trials);
  j["ci_method"] = "wilson score interval, 95 %, trials treated as independent";
  j["trials"] = r.trials;
  j["ties"] = r.ties;
  j["per_group_accuracy_percent"] = per;
  Json g = Json::array();
  for (const auto& s : groups) {
    Json e;
    e["name"] = s.name;
    e["trials"] = s.trials;
    e["accuracy_percent"] = metric_number(s.trials > 0 ? 100.0 * s.correct / static_cast<double>(s.trials) : NAN);
    e["accuracy_ci95_percent"] = ci_json(s.correct, s.trials);
    g.push_back(e);
  }
  j[group_key] = g;
  return j;
}

std::string result_line(const std::string& what, const data::OneShotResult& r, const std::vector<GroupScore>& groups,
                        const char* group_word) {
  auto [lo, hi] = wilson95(r.correct, r.trials);
  char buf[320];
  std::snprintf(buf, sizeof buf, "- %s: %.2f %% one-shot accuracy (95 %% CI %.1f-%.1f %%, Wilson; %lld trials, "
                "%.2f %% error)\n", what.c_str(), 100.0 - r.error_percent, lo, hi,
                static_cast<long long>(r.trials), r.error_percent);
  std::string out = buf;
  if (groups.empty()) return out;
  out += "\n| " + std::string(group_word) + " | trials | accuracy % | 95 % CI |\n|---|---:|---:|---:|\n";
  for (const auto& g : groups) {
    auto [glo, ghi] = wilson95(g.correct, g.trials);
    std::snprintf(buf, sizeof buf, "| %s | %lld | %.1f | %.1f-%.1f |\n", g.name.c_str(),
                  static_cast<long long>(g.trials), g.trials > 0 ? 100.0 * g.correct / g.trials : NAN, glo, ghi);
    out += buf;
  }
  return out + "\n";
}

}  // namespace mn::exp
