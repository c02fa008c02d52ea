// The grid drivers' shared pieces (grid_util.h).
#include "experiments/common/grid_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "experiments/common/harness.h"

namespace mn::exp {

SampleStats sample_stats(const std::vector<double>& values) {
  std::vector<double> v;
  for (double x : values)
    if (std::isfinite(x)) v.push_back(x);
  SampleStats s;
  s.n = static_cast<int>(v.size());
  if (v.empty()) return s;
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / s.n;
  s.min = *std::min_element(v.begin(), v.end());
  if (s.n > 1) {
    double q = 0;
    for (double x : v) q += (x - s.mean) * (x - s.mean);
    s.sd = std::sqrt(q / (s.n - 1));
  }
  return s;
}

Json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Json();
  Json j = Json::parse(in, nullptr, false);
  return j.is_discarded() ? Json() : j;
}

ProvenanceRow provenance_row(const Json& summary) {
  ProvenanceRow r{"not recorded", "not recorded", "not recorded"};
  if (!summary.is_object() || !summary.contains("provenance") || !summary["provenance"].is_object()) return r;
  const Json& p = summary["provenance"];
  std::string c = p.value("commit", std::string("?"));
  if (c.size() > 10) c = c.substr(0, 10);
  r.commit = c + (p.value("dirty", false) ? "+dirty" : "");
  if (p.contains("machine") && p["machine"].is_object()) {
    const Json& m = p["machine"];
    r.machine = m.value("cpu", std::string("?")) + ", " + std::to_string(m.value("threads", int64_t(0))) + " threads";
  }
  if (p.contains("gpu") && p["gpu"].is_object()) r.machine += ", " + p["gpu"].value("name", std::string("?"));
  r.command = p.value("command", std::string("?"));
  return r;
}

std::string mixed_commits_note(const std::vector<ProvenanceRow>& rows) {
  std::vector<std::string> commits;
  for (const auto& r : rows)
    if (std::find(commits.begin(), commits.end(), r.commit) == commits.end()) commits.push_back(r.commit);
  if (commits.size() <= 1) return "";
  std::string s = "**These runs come from " + std::to_string(commits.size()) + " builds:**";
  for (const auto& c : commits) s += " " + c;
  return s + ".\n\n";
}

int run_grid_cell(const std::function<int(int, char**)>& main_fn, std::vector<std::string> args,
                  const std::string& dir, double time_limit, std::chrono::steady_clock::time_point start,
                  size_t k, size_t n) {
  if (time_limit > 0) {
    const double left = time_limit - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (left < 30) {
      std::printf("[grid] --time-limit reached before %s; run the same command again to go on\n", dir.c_str());
      return kExitResumable;
    }
    args.insert(args.end(), {"--time-limit", exact_text(left)});
  }
  const bool resume = std::filesystem::exists(dir + "/last.safetensors");
  if (resume) args.push_back("--resume");
  std::printf("[grid %zu/%zu] %s %s\n", k, n, resume ? "resuming" : "running", dir.c_str());
  std::fflush(stdout);
  std::vector<char*> av;
  for (auto& a : args) av.push_back(a.data());
  return main_fn(static_cast<int>(av.size()), av.data());
}

}  // namespace mn::exp
