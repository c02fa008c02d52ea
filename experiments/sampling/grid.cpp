// The sampling study's grid runner and results.md (see grid.h).
#include "experiments/sampling/grid.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "experiments/common/flags.h"
#include "experiments/common/grid_util.h"
#include "experiments/common/harness.h"
#include "experiments/common/json.h"
#include "experiments/sampling/paper.h"
#include "experiments/sampling/study.h"
#include "runtime/error.h"

#include "experiments/sampling/grid_report.h"

namespace mn::exp::sampling {
namespace fs = std::filesystem;
namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ','))
    if (!x.empty()) out.push_back(x);
  return out;
}
void add_flags(Flags& f) {
  f.add_string("out-dir", "runs/sampling_grid", "the grid's folder: one subfolder per cell, results.md at the top");
  f.add_string("datasets", "kmnist,mnist,fashion-mnist", "comma-separated data sets, run in this order");
  std::string all;
  for (const auto& s : strategies()) all += std::string(all.empty() ? "" : ",") + s.flag;
  f.add_string("strategies", all, "comma-separated strategies");
  f.add_string("seeds", "1", "comma-separated seeds (several: mean ± sd in results.md)");
  f.add_string("data-dir", "", "passed to every cell (see sampling --help)");
  f.add_string("device", "auto", "passed to every cell: auto, cpu, cuda or cuda:N");
  f.add_int("epochs", 0, "epochs per cell (0: the study's 20)", 0, 1000000);
  f.add_int("max-train", 0, "passed to every cell: only the first N training images (0: all; quick runs)", 0,
            100000000);
  f.add_int("per-class", 0, "passed to the online cells: images K per class of a balanced batch (0: the study's "
            "25; small data sets)", 0, 100000);
  f.add_double("time-limit", 0, "stop resumably before this many seconds (0: none); exit status 3, the same "
               "command goes on", 0, 1e9);
  f.add_bool("report-only", false, "only (re)write results.md and the figures from the finished cells");
  f.add_string("later-runs", "", "with --report-only: comma-separated folders of later reruns laid out as the "
               "grid (<dataset>/<strategy>/seed<N>/); a cell finished there replaces the grid's (the last folder "
               "wins), and results.md says which cells came from where");
}

// The grid's cells, data set by strategy by seed, from the flags' lists; throws
// naming the flag on a bad value or an unusable --out-dir / missing data set.
std::vector<Cell> plan_cells(const Flags& f, std::vector<int>& ds) {
  std::vector<int> ss;
  std::vector<int64_t> seeds;
  for (const auto& d : split_list(f.str("datasets"))) {
    int k = -1;
    for (size_t i = 0; i < dataset_names().size(); ++i)
      if (dataset_names()[i] == d) k = static_cast<int>(i);
    MN_CHECK(k >= 0, "--datasets: unknown data set '", d, "'; valid: mnist, kmnist, fashion-mnist");
    ds.push_back(k);
  }
  for (const auto& s : split_list(f.str("strategies"))) ss.push_back(static_cast<int>(strategy_by_flag(s).id));
  for (const auto& s : split_list(f.str("seeds"))) {
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    MN_CHECK(*end == '\0' && v >= 0, "--seeds: '", s, "' is not a seed (an integer >= 0)");
    seeds.push_back(v);
  }
  MN_CHECK(!ds.empty() && !ss.empty() && !seeds.empty(), "--datasets, --strategies and --seeds must each name at "
           "least one value");
  check_dir_usable(f.str("out-dir"), "--out-dir");
  if (!f.flag("report-only"))
    for (int d : ds) dataset_dir(dataset_names()[d], f.str("data-dir"));  // every data set found before any run
  make_dirs(f.str("out-dir"), "--out-dir");
  std::vector<Cell> cells;
  for (int d : ds)
    for (int s : ss)
      for (int64_t seed : seeds) {
        Cell c;
        c.d = d;
        c.s = s;
        c.seed = seed;
        c.dir = f.str("out-dir") + "/" + dataset_names()[d] + "/" + strategies()[s].flag + "/seed" +
                std::to_string(seed);
        cells.push_back(c);
      }
  return cells;
}

// --later-runs: a cell finished in a later folder replaces the grid's (the last folder wins).
void use_later_runs(const Flags& f, std::vector<Cell>& cells) {
  for (const auto& later : split_list(f.str("later-runs")))
    for (auto& c : cells) {
      const std::string rel =
          "/" + dataset_names()[c.d] + "/" + strategies()[c.s].flag + "/seed" + std::to_string(c.seed);
      if (fs::exists(later + rel + "/summary.json")) c.dir = later + rel;
    }
}

std::vector<std::string> cell_args(const Flags& f, const Cell& c) {
  std::vector<std::string> args{"sampling", "--dataset", dataset_names()[c.d], "--strategy", strategies()[c.s].flag,
                                "--seed", std::to_string(c.seed), "--out-dir", c.dir, "--device", f.str("device")};
  if (!f.str("data-dir").empty()) args.insert(args.end(), {"--data-dir", f.str("data-dir")});
  if (f.i64("epochs") > 0) args.insert(args.end(), {"--epochs", std::to_string(f.i64("epochs"))});
  if (f.i64("per-class") > 0 && strategies()[c.s].online)
    args.insert(args.end(), {"--per-class", std::to_string(f.i64("per-class"))});
  if (f.i64("max-train") > 0) args.insert(args.end(), {"--max-train", std::to_string(f.i64("max-train"))});
  return args;
}

// Runs the unfinished cells in order; kExitOk when all are done, else the status to exit with.
int run_cells(const Flags& f, std::vector<Cell>& cells, const std::vector<int>& ds, const std::string& command) {
  const auto start = std::chrono::steady_clock::now();
  size_t k = 0;
  for (auto& c : cells) {
    ++k;
    if (fs::exists(c.dir + "/summary.json")) {
      std::printf("[grid %zu/%zu] %s: done, skipped\n", k, cells.size(), c.dir.c_str());
      continue;
    }
    const int rc = run_grid_cell([](int ac, char** av) { return run_study(make_sampling_study(), ac, av); },
                                 cell_args(f, c), c.dir, f.f64("time-limit"), start, k, cells.size());
    if (rc == kExitResumable) {
      std::printf("[grid] stopped in %s; run the same command again to go on\n", c.dir.c_str());
      write_report(f.str("out-dir"), cells, ds, command);
      return kExitResumable;
    }
    if (rc != kExitOk) {
      std::fprintf(stderr, "sampling_grid: the cell %s failed (exit status %d; its error is above); fix it and "
                   "run the same command again (finished cells are kept)\n", c.dir.c_str(), rc);
      return rc;
    }
  }
  return kExitOk;
}

}  // namespace

int run_grid(int argc, char** argv) {
  try {
    Flags f("sampling_grid", "The sampling study's 21-cell grid (3 data sets x 7 strategies) and its results.md.");
    add_flags(f);
    std::vector<int> ds;
    std::vector<Cell> cells;
    try {
      if (!f.parse(argc, argv)) return kExitOk;
      f.validate_ranges();
      cells = plan_cells(f, ds);
    } catch (const Error& e) {
      std::fprintf(stderr, "sampling_grid: %s\n", user_message(e).c_str());
      return kExitUsage;
    }
    if (f.flag("report-only")) use_later_runs(f, cells);  // later reruns of a cell replace the grid's
    std::string command = "sampling_grid";
    for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
    if (!f.flag("report-only"))
      if (const int rc = run_cells(f, cells, ds, command); rc != kExitOk) return rc;
    write_report(f.str("out-dir"), cells, ds, command);
    std::printf("[grid] wrote %s/results.md\n", f.str("out-dir").c_str());
    return kExitOk;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sampling_grid: error: %s\n", user_message(e).c_str());
    return kExitFailed;
  }
}

}  // namespace mn::exp::sampling
