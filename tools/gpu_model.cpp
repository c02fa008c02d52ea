// gpu_model: the predicted time of every kernel of the Koch training step on an H200,
// before a GPU runs it (the model: tools/gpu_model.h). Writes a Markdown report (tables
// per step, assumptions in its header) and a JSON file.
//
//   gpu_model [--ptxas FILE] [--md FILE] [--json FILE] [--triplets 4,16,50]
//             [--precision tf32,bf16] [--sms N] [--mma-frac F] [--clock-ghz G]
//             [--overlap F] [--ca-l1 0|1]
//
// --ptxas: the table tools/gpu_model_ptxas.sh writes (ptxas -v of mma_conv.cu and
// mma_gemm.cu for sm_90, demangled, plus the SASS main-loop counts); without it the
// registers are unknown (the launch bounds' blocks per SM are assumed) and the
// instructions per MMA are the model's count. --sms, --mma-frac, --clock-ghz, --overlap,
// --ca-l1 change the device's assumptions (what-if; the report's title says so). Without --md the report goes to stdout.
//
// The committed run: bench/results/2026-12-02-gpu-model.{md,json} from
//   gpu_model --ptxas bench/results/2026-12-02-ptxas-sm90.txt
//             --md bench/results/2026-12-02-gpu-model.md --json bench/results/2026-12-02-gpu-model.json
// (one command line).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "tools/gpu_model.h"

namespace {
std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}
bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  return bool(f);
}
int usage() {
  std::fprintf(stderr,
               "usage: gpu_model [--ptxas FILE] [--md FILE] [--json FILE] [--triplets 4,16,50] "
               "[--precision tf32,bf16] [--sms N] [--mma-frac F] [--clock-ghz G] [--overlap F] [--ca-l1 0|1]\n");
  return 2;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace mn::gpu_model;
  Device d;
  std::string ptxas, md, json;
  std::vector<int> triplets{4, 16, 50};
  std::vector<bool> precs{false, true};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") return usage(), 0;
    if (i + 1 >= argc) return usage();
    const std::string v = argv[++i];
    if (a == "--ptxas") ptxas = v;
    else if (a == "--md") md = v;
    else if (a == "--json") json = v;
    else if (a == "--triplets") {
      triplets.clear();
      for (const auto& t : split(v)) triplets.push_back(std::atoi(t.c_str()));
    } else if (a == "--precision") {
      precs.clear();
      for (const auto& p : split(v)) {
        if (p != "tf32" && p != "bf16") return usage();
        precs.push_back(p == "bf16");
      }
    } else if (a == "--sms") {
      d.sms = std::atoi(v.c_str());
      d.name += ", what-if: " + v + " SMs";
    } else if (a == "--mma-frac") {
      d.mma_sync_frac = std::atof(v.c_str());
      d.name += ", what-if: mma.sync at " + v + " of peak";
    } else if (a == "--overlap") {
      d.overlap_eff = std::atof(v.c_str());
      d.name += ", what-if: waves at " + v + " of their bound";
    } else if (a == "--ca-l1") {
      d.ca_l1_wavefront = v != "0";
      d.name += std::string(", what-if: cp.async.ca L1 wavefront ") + (d.ca_l1_wavefront ? "on" : "off");
    } else if (a == "--clock-ghz") {
      d.clock_ghz = std::atof(v.c_str());
      d.name += ", what-if: " + v + " GHz";
    } else {
      return usage();
    }
  }
  for (int t : triplets)
    if (t <= 0) return usage();
  if (d.sms <= 0 || d.mma_sync_frac <= 0 || d.clock_ghz <= 0 || d.overlap_eff <= 0) return usage();

  std::map<std::string, PtxasEntry> table;
  if (!ptxas.empty()) {
    std::ifstream f(ptxas);
    if (!f) {
      std::fprintf(stderr, "gpu_model: cannot read %s\n", ptxas.c_str());
      return 1;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    table = parse_ptxas(ss.str());
  }

  std::vector<StepResult> steps;
  for (bool bf16 : precs)
    for (int t : triplets) steps.push_back(model_step(t, bf16, d, table.empty() ? nullptr : &table));
  // 50 triplets first (the targets), then the smaller batches; TF32 before BF16.
  std::stable_sort(steps.begin(), steps.end(), [](const StepResult& a, const StepResult& b) {
    if ((a.triplets == 50) != (b.triplets == 50)) return a.triplets == 50;
    if (a.bf16 != b.bf16) return !a.bf16;
    return a.triplets < b.triplets;
  });
  const auto* tp = table.empty() ? nullptr : &table;
  const std::string report = report_markdown(steps, d, ptxas, tp, sensitivity(d, tp));
  if (md.empty()) std::cout << report;
  else if (!write_file(md, report)) return std::fprintf(stderr, "gpu_model: cannot write %s\n", md.c_str()), 1;
  if (!json.empty() && !write_file(json, report_json(steps, d, ptxas)))
    return std::fprintf(stderr, "gpu_model: cannot write %s\n", json.c_str()), 1;
  // One line per step on stderr when the report went to a file.
  if (!md.empty())
    for (const auto& s : steps) {
      const double tgt = target_ms(s.triplets, s.bf16);
      std::fprintf(stderr, "%2d triplets %s: GPU %.2f ms, eager %.2f ms, graph %.2f ms%s\n", s.triplets,
                   s.bf16 ? "bf16" : "tf32", s.gpu_us / 1e3, s.eager_ms, s.graph_ms,
                   tgt > 0 ? (s.eager_ms <= tgt ? "  (target PASS)" : "  (target MISS)") : "");
    }
  return 0;
}
