// omniglot_grid's runner (grid.h): the plan, the dry run, the runs, the top-up seeds.
#include "experiments/omniglot/grid.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "experiments/common/flags.h"
#include "experiments/common/grid_util.h"
#include "experiments/common/harness.h"
#include "data/dataset.h"
#include "experiments/omniglot/omniglot_study.h"
#include "runtime/error.h"

namespace mn::exp::omniglot_grid {
namespace fs = std::filesystem;
namespace {

struct Options {
  const Scale* scale = nullptr;
  std::string out, device, data_dir, cache_dir, rows_re, compare;
  std::vector<std::string> cell_extra;  // --cell-args, split on spaces
  int seeds = 3, ablation_seeds = 1;
  double close_points = 2.0, time_limit = 0;
  bool dry_run = false, report_only = false;
};

void declare(Flags& f) {
  f.add_string("scale", "cpu", "cpu: the paper's procedure at a 2-core scale (conv4 on 28x28, 10 x 120 x 50, minutes a "
               "row); paper-length: the same model at the paper's length and validation (50 x 500 x 50, 10,000 "
               "validation triplets; about an hour a row on 2 cores); full: the paper's protocol (Koch's net, "
               "105x105, 50 x 500 x 50; a GPU)", {"cpu", "paper-length", "full"});
  f.add_string("out-dir", "runs/omniglot_grid", "the grid's folder: <row>/seed<N>/ per cell, results.md at the top");
  f.add_string("rows", "", "regular expression over the row names (empty: every row; see --dry-run for the names)");
  f.add_int("seeds", 3, "seeds of the rows of Tables 1 and 2 (seeds 1..N)", 1, 100);
  f.add_int("ablation-seeds", 1, "seeds of the text's ablations (more where --close-points says)", 1, 100);
  f.add_double("close-points", 2.0, "an ablation row whose mean is within this many points of another row of its "
               "group gets --seeds seeds once its first seeds are done (0: never)", 0, 100);
  f.add_string("device", "auto", "passed to every cell: auto, cpu, cuda or cuda:N");
  f.add_string("data-dir", "", "passed to every cell (see omniglot_triplet --help)");
  f.add_string("cache-dir", "", "passed to every cell");
  f.add_string("cell-args", "", "more flags for every cell, space-separated, after the row's (they win): e.g. "
               "\"--precision bf16\" on a GPU, or a tiny run's sizes in tests");
  f.add_double("time-limit", 0, "stop resumably before this many seconds (0: none); exit status 3, the same command "
               "goes on", 0, 1e9);
  f.add_bool("dry-run", false, "print the plan (every cell's command) and its estimated time, run nothing");
  f.add_string("compare-with", "", "another grid's folder (e.g. experiments/results/omniglot/2026-11-27-cpu-grid): "
               "results.md puts its claims and Kendall's taus beside this grid's");
  f.add_bool("report-only", false, "only (re)write results.md and the figures from the finished cells");
}

// The rows the regular expression selects, plus the rows their aliases run.
std::vector<const GridRow*> selected_run_rows(const std::string& re) {
  std::regex rx;
  try {
    rx = std::regex(re.empty() ? ".*" : re);
  } catch (const std::regex_error& e) {
    MN_THROW("--rows ", re, ": not a regular expression (", e.what(), ")");
  }
  std::vector<const GridRow*> out;
  std::set<std::string> seen;
  for (const GridRow& r : grid_rows()) {
    if (!std::regex_search(r.id, rx)) continue;
    const GridRow& rr = run_row(r);
    if (seen.insert(rr.id).second) out.push_back(&rr);
  }
  MN_CHECK(!out.empty(), "--rows ", re, ": matches no row (names: --dry-run)");
  return out;
}

Cell make_cell(const GridRow* r, int seed, const Options& o) {
  Cell c;
  c.row = r;
  c.seed = seed;
  c.dir = o.out + "/" + r->id + "/seed" + std::to_string(seed);
  return c;
}

// Seed by seed: every row's seed 1 first, so a grid stopped early covers every row.
std::vector<Cell> base_plan(const std::vector<const GridRow*>& rows, const Options& o) {
  std::vector<Cell> cells;
  const int most = std::max(o.seeds, o.ablation_seeds);
  for (int s = 1; s <= most; ++s)
    for (const GridRow* r : rows) {
      bool table = r->table_row;
      for (const GridRow& a : grid_rows())  // a row standing in for a table row (t2-triplet -> t1-global)
        if (!a.alias.empty() && a.alias == r->id && a.table_row) table = true;
      if (s <= (table ? o.seeds : o.ablation_seeds)) cells.push_back(make_cell(r, s, o));
    }
  return cells;
}

double best_val(const std::string& dir) {
  const Json s = read_json_file(dir + "/summary.json");
  return s.is_object() && s.contains("best_val_one_shot_percent") && s["best_val_one_shot_percent"].is_number()
             ? s["best_val_one_shot_percent"].get<double>()
             : NAN;
}

// The second pass: ablation rows within --close-points of another row of a group they
// are reported in (means over `done`, the first pass's cells) get the table's seed count.
std::vector<Cell> top_ups(const std::vector<const GridRow*>& rows, const std::vector<Cell>& done, const Options& o) {
  if (o.close_points <= 0 || o.seeds <= o.ablation_seeds) return {};
  std::map<std::string, double> mean;  // run row -> mean best validation
  std::map<std::string, int> n;
  for (const Cell& c : done) {
    const double v = best_val(c.dir);
    if (!std::isfinite(v)) continue;
    mean[c.row->id] += v;
    ++n[c.row->id];
  }
  for (auto& [k, v] : mean) v /= n[k];
  std::vector<Cell> out;
  for (const GridRow* r : rows) {
    if (r->table_row || !mean.count(r->id)) continue;
    // Every group r's runs are reported in (its own, and those of the rows that alias it,
    // e.g. drop-0.1 as "ReLU, dropout 0.1" among the activations), against the other
    // rows of that group, through their aliases.
    std::set<std::string> groups;
    for (const GridRow& g : grid_rows())
      if (run_row(g).id == r->id) groups.insert(g.group);
    bool close = false;
    for (const GridRow& other : grid_rows()) {
      if (!groups.count(other.group) || run_row(other).id == r->id || !mean.count(run_row(other).id)) continue;
      close = close || std::abs(mean[run_row(other).id] - mean[r->id]) < o.close_points;
    }
    if (!close) continue;
    for (int s = n[r->id] + 1; s <= o.seeds; ++s) out.push_back(make_cell(r, s, o));
  }
  return out;
}

std::vector<std::string> cell_args(const Cell& c, const Options& o) {
  std::vector<std::string> a{c.row->siamese ? "omniglot_siamese" : "omniglot_triplet"};
  const std::vector<std::string> ra = row_args(*c.row, *o.scale);
  a.insert(a.end(), ra.begin(), ra.end());
  a.insert(a.end(), o.cell_extra.begin(), o.cell_extra.end());
  a.insert(a.end(), {"--seed", std::to_string(c.seed), "--out-dir", c.dir, "--device", o.device});
  if (!o.data_dir.empty()) a.insert(a.end(), {"--data-dir", o.data_dir});
  if (!o.cache_dir.empty()) a.insert(a.end(), {"--cache-dir", o.cache_dir});
  return a;
}

// What a cell's metrics.jsonl says so far: the epochs done, and the median training
// speed (images/s) and validation seconds of those epochs.
struct CellProgress {
  int epochs_done = 0;
  double train_ips = NAN, val_seconds = NAN;
};

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

CellProgress cell_progress(const std::string& dir) {
  CellProgress p;
  std::ifstream in(dir + "/metrics.jsonl");
  std::vector<double> ips, val;
  for (std::string line; std::getline(in, line);) {
    Json j;
    try {
      j = Json::parse(line);
    } catch (const std::exception&) {
      continue;  // a line cut by a stop
    }
    if (!j.is_object() || !j.contains("epoch")) continue;
    if (j["epoch"].is_number_integer()) p.epochs_done = std::max(p.epochs_done, j["epoch"].get<int>());
    if (j.contains("images_per_second") && j["images_per_second"].is_number())
      ips.push_back(j["images_per_second"].get<double>());
    if (j.contains("val_seconds") && j["val_seconds"].is_number()) val.push_back(j["val_seconds"].get<double>());
  }
  p.train_ips = median(ips), p.val_seconds = median(val);
  return p;
}

bool ssim_row(const GridRow& r) {
  return std::any_of(r.flags.begin(), r.flags.end(), [](const std::string& f) {
    return f == "hard-positive" || f == "semi-hard-negative" || f == "ssim-both";
  });
}

// The measured speeds a plan estimates from: the median over this grid's cells (finished
// or not) of each cell's median epoch, per binary (siamese or triplet) and per kind of
// sampling (SSIM mining or not).
struct MeasuredSpeeds {
  std::map<std::pair<bool, bool>, double> train_ips, val_seconds;  // key: {siamese, ssim}
};

MeasuredSpeeds measured_speeds(const std::vector<Cell>& cells) {
  std::map<std::pair<bool, bool>, std::vector<double>> ips, val;
  for (const Cell& c : cells) {
    const CellProgress p = cell_progress(c.dir);
    const std::pair<bool, bool> key{c.row->siamese, ssim_row(*c.row)};
    if (std::isfinite(p.train_ips)) ips[key].push_back(p.train_ips);
    if (std::isfinite(p.val_seconds)) val[key].push_back(p.val_seconds);
  }
  MeasuredSpeeds m;
  for (auto& [k, v] : ips) m.train_ips[k] = median(v);
  for (auto& [k, v] : val) m.val_seconds[k] = median(v);
  return m;
}

// Estimated seconds left of a cell: its remaining epochs at the speeds measured by this
// grid's cells of the same binary and sampling; without such a cell, the other sampling's
// speed (SSIM mining 1.7x slower, the 2026-11-21 demos), else 940 training images/s (one
// of two one-thread lanes on the 2-core AMD EPYC VM, the paper-length grid's first epochs,
// 2026-12-02), validation at 3x the training speed per image, plus Lake's 400 trials. Full scale on a GPU: 4 ms a
// 50-triplet step (issue 31's TF32 target; 37.6 ms measured with the older kernels on an
// H200, 2026-11-26) and about 3 s a validation.
double estimate_seconds(const Cell& c, const Options& o, const MeasuredSpeeds& m) {
  const int epochs = row_epochs(*c.row, *o.scale);
  const int left = std::max(0, epochs - cell_progress(c.dir).epochs_done);
  const double steps = double(left) * o.scale->iters;
  const bool ssim = ssim_row(*c.row);
  if (o.scale->name == "full") return steps * 0.004 * (ssim ? 1.7 : 1.0) + left * 3.0;
  const double per_step_images = c.row->siamese ? 100 : 150;
  const double val_images = double(o.scale->val_triplets) * (c.row->siamese ? 2 : 3) + 320 * 21;
  const std::pair<bool, bool> key{c.row->siamese, ssim}, other{c.row->siamese, !ssim};
  double ips = 940;
  if (m.train_ips.count(key))
    ips = m.train_ips.at(key);
  else if (m.train_ips.count(other))
    ips = m.train_ips.at(other) * (ssim ? 1 / 1.7 : 1.7);
  else if (ssim)
    ips /= 1.7;
  const double val_s = m.val_seconds.count(key) ? m.val_seconds.at(key) : val_images / (3 * ips);
  return steps * per_step_images / ips + left * val_s + (left > 0 ? 400 * 21 / (3 * ips) : 0);
}

// `with_top_ups`: the second pass's cells are in `cells` (the first pass is finished).
void print_plan(const std::vector<Cell>& cells, const Options& o, bool with_top_ups) {
  const MeasuredSpeeds ips = measured_speeds(cells);
  double total = 0;
  std::printf("omniglot_grid plan, scale %s: %s\n\n", o.scale->name.c_str(), o.scale->description.c_str());
  for (const Cell& c : cells) {
    const bool done = fs::exists(c.dir + "/summary.json");
    const double s = done ? 0 : estimate_seconds(c, o, ips);
    total += s;
    const int epochs_done = done ? 0 : cell_progress(c.dir).epochs_done;
    std::string state = done ? "done" : "~" + std::to_string(int(s / 60 + 0.5)) + " min";
    if (epochs_done > 0) state += " (" + std::to_string(epochs_done) + " ep done)";
    std::printf("%-22s seed %d  %-22s %s\n", c.row->id.c_str(), c.seed, state.c_str(),
                [&] {
                  std::string cmd;
                  for (const auto& a : cell_args(c, o)) cmd += (cmd.empty() ? "" : " ") + a;
                  return cmd;
                }().c_str());
  }
  std::printf("\nrows reported through another row's runs:");
  for (const GridRow& r : grid_rows())
    if (!r.alias.empty()) std::printf(" %s=%s", r.id.c_str(), r.alias.c_str());
  std::printf("\n%zu cells, estimated %.1f hours left on this %s (%s); ablation rows within %.1f points of another "
              "row of their group get %d seeds after their first pass (%s)\n",
              cells.size(), total / 3600, o.scale->name == "full" ? "GPU" : "machine",
              o.scale->name == "full" ? "4 ms a step, issue 31's TF32 target; x9.4 at 37.6 ms, the 2026-11-26 "
                                        "kernels"
                                      : "the epochs measured by this grid's cells, else 940 img/s",
              o.close_points, o.seeds,
              with_top_ups ? "the first pass is finished: those cells are listed and counted above"
                           : "not counted above: they are known once the first pass is finished");
}

// Runs the cells not yet finished; kExitOk, kExitResumable (stopped) or the failed cell's status.
int run_cells(std::vector<Cell>& cells, const Options& o, const std::chrono::steady_clock::time_point start,
              std::vector<Cell>& all, const std::string& command) {
  size_t k = 0;
  for (Cell& c : cells) {
    ++k;
    if (fs::exists(c.dir + "/summary.json")) continue;
    const StudyKind kind = c.row->siamese ? StudyKind::Siamese : StudyKind::Triplet;
    const int rc = run_grid_cell([kind](int ac, char** av) { return run_omniglot_study(kind, ac, av); },
                                 cell_args(c, o), c.dir, o.time_limit, start, k, cells.size());
    if (rc == kExitResumable) {
      std::printf("[grid] stopped in %s; run the same command again to go on\n", c.dir.c_str());
      return rc;
    }
    if (rc != kExitOk) {
      std::fprintf(stderr, "omniglot_grid: the cell %s failed (exit status %d; its error is above); fix it and run "
                   "the same command again (finished cells are kept)\n", c.dir.c_str(), rc);
      return rc;
    }
    write_report(o.out, *o.scale, all, command, o.compare);  // the report grows cell by cell
  }
  return kExitOk;
}

int parse(int argc, char** argv, Options& o) {
  Flags f("omniglot_grid", "The Omniglot study's every table row and ablation as one grid of runs, with results.md "
          "and Figures 3-7 beside the paper.");
  declare(f);
  if (!f.parse(argc, argv)) return -1;
  f.validate_ranges();
  o.scale = &scale_by_name(f.str("scale"));
  o.out = f.str("out-dir"), o.device = f.str("device"), o.data_dir = f.str("data-dir");
  o.cache_dir = f.str("cache-dir"), o.rows_re = f.str("rows");
  o.seeds = int(f.i64("seeds")), o.ablation_seeds = int(f.i64("ablation-seeds"));
  o.close_points = f.f64("close-points"), o.time_limit = f.f64("time-limit");
  std::stringstream ss(f.str("cell-args"));
  for (std::string w; ss >> w;) o.cell_extra.push_back(w);
  o.dry_run = f.flag("dry-run"), o.report_only = f.flag("report-only");
  o.compare = f.str("compare-with");
  return 0;
}

}  // namespace

int run_grid(int argc, char** argv) {
  Options o;
  std::vector<const GridRow*> rows;
  try {
    if (parse(argc, argv, o) < 0) return kExitOk;
    rows = selected_run_rows(o.rows_re);
    check_dir_usable(o.out, "--out-dir");
    MN_CHECK(o.compare.empty() || fs::is_regular_file(o.compare + "/results.json"), "--compare-with ", o.compare,
             ": no results.json there; give the folder of another omniglot_grid run (its results.md's folder)");
    if (!o.dry_run && !o.report_only) {  // the data found before any cell runs
      if (!o.data_dir.empty())
        MN_CHECK(is_directory(o.data_dir), "--data-dir: '", o.data_dir, "' is not a folder; give the folder holding "
                 "images_background/, images_evaluation/ and all_runs/, or leave it out");
      else
        (void)data::find_dataset_dir("omniglot");
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "omniglot_grid: %s\n", user_message(e).c_str());
    return kExitUsage;
  }
  try {
    std::string command = "omniglot_grid";
    for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
    std::vector<Cell> cells = base_plan(rows, o);
    if (o.dry_run) {
      const bool first_pass_done = std::all_of(cells.begin(), cells.end(), [](const Cell& c) {
        return fs::exists(c.dir + "/summary.json");
      });
      if (first_pass_done) {
        std::vector<Cell> more = top_ups(rows, cells, o);
        cells.insert(cells.end(), more.begin(), more.end());
      }
      print_plan(cells, o, first_pass_done);
      return kExitOk;
    }
    make_dirs(o.out, "--out-dir");
    const auto start = std::chrono::steady_clock::now();
    if (!o.report_only) {
      int rc = run_cells(cells, o, start, cells, command);
      if (rc == kExitOk) {  // second pass: seeds for ablation rows too close to call
        std::vector<Cell> more = top_ups(rows, cells, o);
        cells.insert(cells.end(), more.begin(), more.end());
        if (!more.empty()) rc = run_cells(cells, o, start, cells, command);
      }
      if (rc != kExitOk) {
        write_report(o.out, *o.scale, cells, command, o.compare);
        return rc;
      }
    } else {
      const bool any = std::any_of(cells.begin(), cells.end(), [](const Cell& c) {
        return fs::exists(c.dir + "/summary.json");
      });
      MN_CHECK(any, "--report-only: '", o.out, "' holds no finished cell of these rows (no <row>/seed<N>/summary.json); "
               "run the grid first, or give the --out-dir of a grid that ran");
      std::vector<Cell> more = top_ups(rows, cells, o);
      cells.insert(cells.end(), more.begin(), more.end());
    }
    write_report(o.out, *o.scale, cells, command, o.compare);
    std::printf("[grid] wrote %s/results.md\n", o.out.c_str());
    return kExitOk;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "omniglot_grid: error: %s\n", user_message(e).c_str());
    return kExitFailed;
  }
}

}  // namespace mn::exp::omniglot_grid
