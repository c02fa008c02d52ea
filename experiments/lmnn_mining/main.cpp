// lmnn_mining: the large-margin metric-learning study with triplet mining and
// hierarchical stratified sampling (Poorheravi et al.), Table 1 and Fig. 2.
// The embedded defaults are the study's protocol; one command,
//   build/experiments/lmnn_mining --out-dir DIR
// runs all 3 data sets x 7 minings x {non-hierarchical, hierarchical} with 10
// seeds and writes DIR/results.md, DIR/results.json, DIR/cells.jsonl (one line
// per cell as it finishes) and DIR/ghost_faces.png. `--help` lists every flag.
//
// Written on the existing experiments/common pieces (flags, metrics lines,
// duration formatting): the shared study harness was not on main when this was
// written. The solver runs its own loop; there are no epochs or checkpoints.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "experiments/common/flags.h"
#include "experiments/common/metrics.h"
#include "experiments/common/progress.h"
#include "experiments/lmnn_mining/datasets.h"
#include "experiments/lmnn_mining/experiment.h"
#include "experiments/lmnn_mining/report.h"
#include "runtime/error.h"
#include "runtime/parallel.h"

namespace {

using namespace mn;
using namespace mn::lmnn;

void declare(exp::Flags& f) {
  f.add_string("dataset", "all", "data set", {"iris", "orl", "mnist", "all"});
  f.add_string("mining", "all", "k-BA, k-BH, k-BSH, k-HPEN, k-EPEN, k-EPHN, k-NS, a comma list, or all");
  f.add_string("approach", "both", "non-hierarchical, hierarchical or both",
               {"flat", "hierarchical", "both"});
  f.add_bool("hierarchical", false, "shortcut: --hierarchical = --approach hierarchical, "
             "--no-hierarchical = --approach flat");
  f.add_int("seeds", 10, "seeds per cell (each re-draws the split, k-NS samples and spheres)");
  f.add_int("first-seed", 0, "the first seed (the single-run number is this seed's)");
  f.add_string("k-grid", "1,3,5,7,10", "neighbour counts k tried on validation (mining and k-NN)");
  f.add_string("c-grid", "0.1,0.5,1,5,10", "hinge weights c tried on validation");
  f.add_double("lambda", 1.4, "k-NS cap of 1/q(D) (Eq. 11)");
  f.add_int("max-iter", 1000, "solver: most projected sub-gradient steps per solve");
  f.add_double("tol", 1e-5, "solver: stop when the full objective changes by less than this "
               "(relative) between two full checks");
  f.add_int("full-every", 10, "solver: check every triplet (not only the active set) this often");
  f.add_double("step0", 0.1, "solver: first step as a fraction of |M|_F / |G|_F");
  f.add_double("diag-boost", 0.05, "hierarchical: per level, M rescaled to trace d, then M += diag-boost * I "
               "(the paper's diagonal strengthening against rank collapse)");
  f.add_string("centres", "box", "hierarchical: sphere centres uniform in the data's bounding box "
               "(the protocol's reading) or on random training points", {"box", "point"});
  f.add_int("max-levels", 0, "hierarchical: most levels (0 = until p reaches 0.2)");
  f.add_int("threads", 0, "worker threads (0 = MN_NUM_THREADS or all cores)");
  f.add_string("data-dir", "", "folder holding iris/, orl_faces/, mnist/ (default: project lookup)");
  f.add_string("out-dir", "lmnn_results", "output folder");
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

template <typename T>
std::vector<T> parse_grid(const std::string& key, const std::string& s) {
  std::vector<T> out;
  for (const std::string& x : split_list(s)) {
    try {
      size_t used = 0;
      const double v = std::stod(x, &used);
      MN_CHECK(used == x.size() && v > 0, "--", key, ": '", x, "' is not a positive number");
      out.push_back(static_cast<T>(v));
    } catch (const std::logic_error&) {
      MN_THROW("--", key, ": '", x, "' is not a number");
    }
  }
  MN_CHECK(!out.empty(), "--", key, " is empty");
  return out;
}

std::string shell(const char* cmd) {
  std::string out;
  if (FILE* p = popen(cmd, "r")) {
    char buf[512];
    while (fgets(buf, sizeof buf, p)) out += buf;
    pclose(p);
  }
  return out;
}

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&t));
  return buf;
}

int run(exp::Flags& f, const std::string& command) {
  if (f.i64("threads") > 0) set_num_threads(static_cast<int>(f.i64("threads")));
  const std::vector<std::string> datasets =
      f.str("dataset") == "all" ? std::vector<std::string>{"iris", "orl", "mnist"}
                                : std::vector<std::string>{f.str("dataset")};
  std::vector<Mining> minings;
  if (f.str("mining") == "all") minings = all_minings();
  else
    for (const std::string& m : split_list(f.str("mining"))) minings.push_back(parse_mining(m));
  std::string approach = f.str("approach");
  if (f.user_set("hierarchical")) approach = f.flag("hierarchical") ? "hierarchical" : "flat";
  std::vector<bool> approaches;
  if (approach != "hierarchical") approaches.push_back(false);
  if (approach != "flat") approaches.push_back(true);
  const auto ks = parse_grid<int64_t>("k-grid", f.str("k-grid"));
  const auto cs = parse_grid<double>("c-grid", f.str("c-grid"));
  MN_CHECK(f.i64("seeds") >= 1, "--seeds must be >= 1, got ", f.i64("seeds"));

  TrainSettings base;
  base.lambda = f.f64("lambda");
  base.solver.max_iter = f.i64("max-iter");
  base.solver.tol = f.f64("tol");
  base.solver.full_every = f.i64("full-every");
  base.solver.step0 = f.f64("step0");
  base.hier.diag_boost = f.f64("diag-boost");
  base.hier.max_levels = f.i64("max-levels");
  base.hier.centre_on_points = f.str("centres") == "point";

  const std::string out = f.str("out-dir");
  std::filesystem::create_directories(out);
  exp::write_file_atomic(out + "/config.txt", f.to_config());
  exp::MetricsLog log(out + "/cells.jsonl");
  RunInfo info;
  info.command = command;
  info.started = now_utc();
  info.machine = shell("lscpu | head -20");
  info.load = shell("cat /proc/loadavg");
  if (!info.load.empty() && info.load.back() == '\n') info.load.pop_back();
  info.config_json = f.to_json();

  StudyData data(f.str("data-dir"));
  std::vector<CellResult> cells;
  const int64_t total = static_cast<int64_t>(datasets.size() * minings.size() * approaches.size());
  const auto t0 = std::chrono::steady_clock::now();
  Mat eigenfaces;
  int img_h = 0, img_w = 0;
  for (const std::string& ds : datasets) {
    // One split per seed, shared by every cell of the data set.
    std::vector<StudySplit> splits;
    for (int64_t s = 0; s < f.i64("seeds"); ++s)
      splits.push_back(data.split(ds, static_cast<uint64_t>(f.i64("first-seed") + s)));
    if (ds == "orl") {
      eigenfaces = splits[0].eigenfaces;
      img_h = splits[0].image_h;
      img_w = splits[0].image_w;
    }
    for (bool hier : approaches)
      for (Mining m : minings) {
        CellResult cell;
        cell.dataset = ds;
        cell.mining = m;
        cell.hierarchical = hier;
        TrainSettings st = base;
        st.mining = m;
        st.hierarchical = hier;
        for (size_t s = 0; s < splits.size(); ++s) {
          const uint64_t seed = static_cast<uint64_t>(f.i64("first-seed")) + s;
          cell.seeds.push_back(seed);
          cell.runs.push_back(run_cell(splits[s], st, ks, cs, seed));
        }
        const Summary sm = summarise(cell);
        const PaperCell pc = paper_cell(ds, hier, m);
        cells.push_back(cell);
        const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const int64_t done = static_cast<int64_t>(cells.size());
        std::printf("[%ld/%ld] %-5s %-16s %-6s acc %6.2f (mean %6.2f ± %5.2f, paper %6.2f)  "
                    "train %.3f s (paper %.2f)  grid %.2f s  k=%ld c=%g  elapsed %s ETA %s\n",
                    static_cast<long>(done), static_cast<long>(total), ds.c_str(),
                    hier ? "hierarchical" : "non-hierarchical", mining_name(m).c_str(), sm.acc_first,
                    sm.acc_mean, sm.acc_sd, pc.accuracy, sm.train_mean, pc.seconds, sm.select_mean,
                    static_cast<long>(cell.runs[0].k), cell.runs[0].c,
                    exp::format_duration(el).c_str(),
                    exp::format_duration(el / done * (total - done)).c_str());
        std::fflush(stdout);
        exp::JsonLine line;
        line.str("dataset", ds).str("mining", mining_name(m)).integer("hierarchical", hier)
            .num("accuracy_first", sm.acc_first).num("accuracy_mean", sm.acc_mean)
            .num("accuracy_sd", sm.acc_sd).num("train_seconds_mean", sm.train_mean)
            .num("grid_seconds_mean", sm.select_mean).num("paper_accuracy", pc.accuracy)
            .num("paper_seconds", pc.seconds);
        log.write(line);
      }
  }
  info.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  exp::write_file_atomic(out + "/results.md", results_markdown(cells, info));
  exp::write_file_atomic(out + "/results.json", results_json(cells, info));
  std::vector<CellResult> orl_flat;
  for (const CellResult& c : cells)
    if (c.dataset == "orl" && !c.hierarchical) orl_flat.push_back(c);
  if (orl_flat.empty())  // no non-hierarchical ORL runs: draw the hierarchical ones
    for (const CellResult& c : cells)
      if (c.dataset == "orl") orl_flat.push_back(c);
  if (write_ghost_faces(out + "/ghost_faces.png", orl_flat, eigenfaces, img_h, img_w))
    std::printf("ghost faces: %s/ghost_faces.png\n", out.c_str());
  std::printf("results: %s/results.md (%s)\n", out.c_str(), exp::format_duration(info.wall_seconds).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  exp::Flags f("lmnn_mining",
               "LMNN with triplet mining and hierarchical stratified sampling (Poorheravi et al.): "
               "Table 1 and the ghost-faces figure");
  declare(f);
  std::string command = argv[0];
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
  try {
    if (!f.parse(argc, argv)) return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lmnn_mining: %s\n", e.what());
    return 2;
  }
  try {
    return run(f, command);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lmnn_mining: %s\n", e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "lmnn_mining: unknown error\n");
    return 1;
  }
}
