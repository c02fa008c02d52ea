// Export of the pair-selection study's folds and traces; see export.h.
#include "experiments/pair_selection/export.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "experiments/common/flags.h"
#include "runtime/error.h"

namespace mn::pairsel {

namespace fs = std::filesystem;

namespace {
void write_pairs(std::ostream& os, const std::vector<Pair>& pairs, const char* sep) {
  for (size_t i = 0; i < pairs.size(); ++i)
    os << (i ? sep : "") << pairs[i].a << ' ' << pairs[i].b << ' ' << int(pairs[i].impostor);
  os << '\n';
}
}  // namespace

void export_folds(const std::string& dir, const std::string& config_json,
                  const std::vector<std::vector<int64_t>>& fold_indices,
                  const std::vector<std::vector<Pair>>& first_pairs) {
  MN_CHECK(fold_indices.size() == first_pairs.size(), "pair_selection: --export-dir",
           fold_indices.size(), " folds but ", first_pairs.size(), " pair sets");
  std::error_code ec;
  fs::create_directories(dir, ec);
  MN_CHECK(!ec, "pair_selection: --export-dir", "cannot create ", dir, ": ", ec.message());
  exp::write_file_atomic((fs::path(dir) / "export.json").string(), config_json + "\n");
  std::ostringstream folds;
  for (const auto& idx : fold_indices) {
    for (size_t i = 0; i < idx.size(); ++i) folds << (i ? " " : "") << idx[i];
    folds << '\n';
  }
  exp::write_file_atomic((fs::path(dir) / "folds.txt").string(), folds.str());
  for (size_t k = 0; k < first_pairs.size(); ++k) {
    std::ostringstream os;
    for (const Pair& p : first_pairs[k]) os << p.a << ' ' << p.b << ' ' << int(p.impostor) << '\n';
    exp::write_file_atomic((fs::path(dir) / ("pairs_fold" + std::to_string(k) + ".txt")).string(), os.str());
  }
}

void export_trace(const std::string& dir, Method method, int fold, const RunTrace& trace,
                  bool with_init) {
  const std::string k = std::to_string(fold);
  if (with_init) {
    const std::string path = (fs::path(dir) / ("init_fold" + k + ".bin")).string();
    std::ofstream os(path, std::ios::binary);
    MN_CHECK(bool(os), "pair_selection: --export-trace", "cannot write ", path);
    for (size_t l = 0; l < trace.weights.size(); ++l) {
      os.write(reinterpret_cast<const char*>(trace.weights[l].data()),
               static_cast<std::streamsize>(trace.weights[l].size() * sizeof(float)));
      os.write(reinterpret_cast<const char*>(trace.biases[l].data()),
               static_cast<std::streamsize>(trace.biases[l].size() * sizeof(float)));
    }
    MN_CHECK(bool(os), "pair_selection: --export-trace", "write failed: ", path);
  }
  std::ostringstream os;
  for (const auto& ep : trace.epoch_pairs) write_pairs(os, ep, " ");
  exp::write_file_atomic(
      (fs::path(dir) / ("trace_" + std::string(method_flag(method)) + "_fold" + k + ".txt")).string(),
      os.str());
}

std::vector<std::vector<Pair>> read_trace(const std::string& path) {
  std::ifstream is(path);
  MN_CHECK(bool(is), "pair_selection: trace", "cannot read ", path);
  std::vector<std::vector<Pair>> out;
  for (std::string line; std::getline(is, line);) {
    std::istringstream ls(line);
    std::vector<Pair> ep;
    for (int a, b, imp; ls >> a >> b >> imp;) ep.push_back({a, b, static_cast<uint8_t>(imp)});
    out.push_back(std::move(ep));
  }
  return out;
}

}  // namespace mn::pairsel
