// omniglot_grid (experiments/omniglot/grid.h): the row table (every row's flags parse
// at both scales and change, against the paper's default model, exactly the keys the
// paper's row changes; aliases point at rows that run), Kendall's tau on hand-made
// rankings, and a tiny grid on the synthetic data: interrupted, resumed, skipped when
// finished, with results.md generated from its cells.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "experiments/common/harness.h"
#include "experiments/omniglot/grid.h"
#include "experiments/omniglot/omniglot_study.h"
#include "tests/experiments/omniglot_fixture.h"

namespace {
using namespace mn::exp;
using namespace mn::exp::omniglot_grid;
using mn_test_exp::omniglot_root;
using mn_test_exp::read_lines;
using mn_test_exp::read_text;
using mn_test_exp::TempDir;

std::map<std::string, std::string> config_of(const GridRow& r, const Scale& s) {
  auto study = r.siamese ? make_omniglot_siamese_study() : make_omniglot_triplet_study();
  std::vector<std::string> args = row_args(r, s);
  args.insert(args.end(), {"--seed", "1", "--out-dir", "unused", "--device", "cpu"});
  return study_config(*study, args, mn::Device::cpu());
}

std::set<std::string> differing_keys(const std::map<std::string, std::string>& a,
                                     const std::map<std::string, std::string>& b) {
  std::set<std::string> out;
  for (const auto& [k, v] : a)
    if (!b.count(k) || b.at(k) != v) out.insert(k);
  return out;
}

TEST(OmniglotGrid, EveryRowsFlagsParseAndDifferOnlyWhereThePapersRowDiffers) {
  for (const char* scale : {"cpu", "paper-length", "full"}) {
    const Scale& s = scale_by_name(scale);
    const auto triplet_default = config_of(row_by_id("t1-kumar"), s);
    std::set<std::string> ids;
    for (const GridRow& r : grid_rows()) {
      SCOPED_TRACE(std::string(scale) + " " + r.id);
      EXPECT_TRUE(ids.insert(r.id).second) << "duplicate row name";
      if (!r.alias.empty()) {
        EXPECT_TRUE(r.flags.empty()) << "an alias has no flags of its own";
        EXPECT_TRUE(run_row(r).alias.empty()) << "an alias points at a row that runs";
        continue;
      }
      const auto cfg = config_of(r, s);
      std::set<std::string> want(r.differs.begin(), r.differs.end());
      if (r.siamese) {
        // Against the siamese binary's own defaults at this scale.
        auto study = make_omniglot_siamese_study();
        std::vector<std::string> base = s.siamese_base;
        base.insert(base.end(), {"--epochs", std::to_string(row_epochs(r, s)), "--seed", "1", "--out-dir", "unused",
                                 "--device", "cpu"});
        EXPECT_EQ(differing_keys(cfg, study_config(*study, base, mn::Device::cpu())), want);
      } else {
        EXPECT_EQ(differing_keys(cfg, triplet_default), want);
      }
      EXPECT_EQ(cfg.at("epochs"), std::to_string(row_epochs(r, s)));
      if (std::string(scale) == "cpu") {
        EXPECT_EQ(cfg.at("trunk"), "conv4");
        EXPECT_EQ(cfg.at("iters"), "120");
      }
      if (std::string(scale) == "paper-length") {  // the cpu scale's model, the paper's length
        EXPECT_EQ(cfg.at("trunk"), "conv4");
        EXPECT_EQ(cfg.at("image-size"), "28");
        EXPECT_EQ(cfg.at("iters"), "500");
        EXPECT_EQ(cfg.at("batch"), "50");
        EXPECT_EQ(cfg.at("val-triplets"), "10000");
        EXPECT_EQ(cfg.at("val-tasks"), "320");
        EXPECT_EQ(cfg.at("epochs"), r.paper_epochs == 15 ? "15" : "50");
      }
      if (std::string(scale) == "full") {
        EXPECT_EQ(cfg.at("trunk"), "koch");
        EXPECT_EQ(cfg.at("image-size"), "105");
        EXPECT_EQ(cfg.at("iters"), "500");
      }
    }
  }
  EXPECT_THROW(scale_by_name("medium"), mn::Error);
}

// One line per set of runs in each figure, named by the figure's own row (the alias).
TEST(OmniglotGrid, FigureLinesAreOnePerRunNamedByTheFigure) {
  auto ids = [](int n) {
    std::vector<std::string> v;
    for (const GridRow* r : figure_lines(n)) v.push_back(r->id);
    return v;
  };
  EXPECT_EQ(ids(3), (std::vector<std::string>{"share-full", "share-disjoint"}));
  EXPECT_EQ(ids(5), (std::vector<std::string>{"samp-hard-positive", "samp-random", "samp-hard-negative"}));
  EXPECT_EQ(ids(7).front(), "norm-default");
  for (int n = 3; n <= 7; ++n) {
    std::set<std::string> runs;
    for (const GridRow* r : figure_lines(n)) {
      if (r->id == "share-joint-15") continue;  // Figure 4's full-share line up to its 15-epoch mark
      EXPECT_TRUE(runs.insert(run_row(*r).id).second) << "Figure " << n << " draws " << run_row(*r).id << " twice";
    }
  }
}

TEST(OmniglotGrid, KendallTauOnHandMadeRankings) {
  EXPECT_DOUBLE_EQ(kendall_tau({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(kendall_tau({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  // One discordant pair of six: (5 - 1) / 6.
  EXPECT_NEAR(kendall_tau({1, 2, 3, 4}, {1, 3, 2, 4}), 4.0 / 6.0, 1e-12);
  // A tie in one ranking: tau-b = (C - D) / sqrt((C + D + T_a)(C + D + T_b)).
  EXPECT_NEAR(kendall_tau({1, 2, 3}, {1, 1, 2}), 2.0 / std::sqrt(3.0 * 2.0), 1e-12);
  EXPECT_TRUE(std::isnan(kendall_tau({1}, {1})));
}

// A claim's ordering counts only outside the spread: the larger sd of the two rows, at
// least 2 points (the Table 1 case that motivated it: 51.56 +- 0.88 vs 51.41 +- 0.22).
TEST(OmniglotGrid, ClearOrderNeedsTheSpread) {
  auto s = [](double mean, double sd, int n) {
    SampleStats r;
    r.mean = mean, r.sd = sd, r.n = n;
    return r;
  };
  EXPECT_EQ(clear_order(s(51.56, 0.88, 2), s(51.41, 0.22, 2)), 0);
  EXPECT_EQ(clear_order(s(55.0, 0.5, 3), s(52.0, 0.5, 3)), 1);   // 3 points > 2
  EXPECT_EQ(clear_order(s(52.0, 0.5, 3), s(55.0, 0.5, 3)), -1);
  EXPECT_EQ(clear_order(s(55.0, 4.0, 3), s(52.0, 0.5, 3)), 0);   // 3 points < sd 4
  EXPECT_EQ(clear_order(s(57.0, 4.0, 3), s(52.0, 0.5, 3)), 1);   // 5 points > sd 4
  EXPECT_EQ(clear_order(s(54.5, NAN, 1), s(52.0, NAN, 1)), 1);   // one seed each: 2 points
  EXPECT_EQ(clear_order(s(53.5, NAN, 1), s(52.0, NAN, 1)), 0);
  EXPECT_EQ(clear_order(s(60.0, 1.0, 2), SampleStats{}), 0);      // a row that did not run
}

int run_grid_args(std::vector<std::string> args) {
  args.insert(args.begin(), "omniglot_grid");
  std::vector<char*> av;
  for (auto& a : args) av.push_back(a.data());
  return run_grid(static_cast<int>(av.size()), av.data());
}

TEST(OmniglotGrid, TinyGridStopsResumesSkipsAndReports) {
  TempDir out("grid"), cache("cache");
  const std::string tiny = "--channels 8 --embedding 16 --val-way 5 --eval-batch 64 --iters 2 --batch 4 "
                           "--val-triplets 12 --val-tasks 4";
  std::vector<std::string> args{"--out-dir", out.str(), "--rows", "^t1-(kumar|schroff)$", "--seeds", "1",
                                "--device", "cpu", "--data-dir", omniglot_root(), "--cache-dir", cache.str()};
  auto with = [&](const std::string& extra) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--cell-args", tiny + " --epochs 2" + extra});
    return a;
  };
  // Interrupted: the first cell stops after one step (exit 3), nothing else runs.
  EXPECT_EQ(run_grid_args(with(" --stop-after 1")), kExitResumable);
  EXPECT_TRUE(std::filesystem::exists(out / "t1-kumar/seed1/last.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(out / "t1-kumar/seed1/summary.json"));
  EXPECT_FALSE(std::filesystem::exists(out / "t1-schroff/seed1"));
  // The same command goes on: the stopped cell resumes, the second runs.
  EXPECT_EQ(run_grid_args(with("")), kExitOk);
  for (const char* cell : {"t1-kumar/seed1", "t1-schroff/seed1"}) {
    EXPECT_TRUE(std::filesystem::exists(out / (std::string(cell) + "/summary.json"))) << cell;
    EXPECT_EQ(read_lines(out / (std::string(cell) + "/metrics.jsonl")).size(), 2u) << cell;
  }
  const std::string kumar_summary = read_text(out / "t1-kumar/seed1/summary.json");
  // A third call finds everything done: the cells are not touched.
  const auto before = std::filesystem::last_write_time(out / "t1-kumar/seed1/summary.json");
  EXPECT_EQ(run_grid_args(with("")), kExitOk);
  EXPECT_EQ(std::filesystem::last_write_time(out / "t1-kumar/seed1/summary.json"), before);
  // The report: the rows beside the paper, the claims it cannot test yet, the cells'
  // provenance.
  const std::string md = read_text(out / "results.md");
  EXPECT_NE(md.find("| Kumar loss"), std::string::npos) << md;
  EXPECT_NE(md.find("| 74.38 |"), std::string::npos) << md;
  EXPECT_NE(md.find("Kendall's τ"), std::string::npos);
  EXPECT_NE(md.find("| not run |"), std::string::npos) << "claims needing rows that did not run";
  EXPECT_NE(md.find("t1-schroff/seed1"), std::string::npos);
  EXPECT_NE(md.find("omniglot_triplet --preset full --trunk conv4"), std::string::npos) << "each cell's command";
  EXPECT_NE(kumar_summary.find("\"provenance\""), std::string::npos);
  EXPECT_NE(read_text(out / "results.json").find("\"t1-kumar\""), std::string::npos);
  EXPECT_NE(md.find("counted both ways: "), std::string::npos) << md;
  // share-joint-15 is t1-kumar's runs up to the 15-epoch mark: its best-validation model is
  // not the run's, so it has no Lake score; share-full (the whole run) shows the run's.
  // (The synthetic data have no Lake trials: the cell's summary is given a score here.)
  {
    Json summary = read_json_file(out / "t1-kumar/seed1/summary.json");
    summary["lake"]["accuracy_percent"] = 61.25;
    std::ofstream(out / "t1-kumar/seed1/summary.json") << summary.dump(2);
  }
  // --compare-with another grid (here itself): the claims side by side, none changed.
  std::vector<std::string> cmp = with("");
  cmp.insert(cmp.end(), {"--report-only", "--compare-with", out.str()});
  EXPECT_EQ(run_grid_args(cmp), kExitOk);
  const std::string md2 = read_text(out / "results.md");
  EXPECT_NE(md2.find("## The claims at two lengths"), std::string::npos) << md2;
  EXPECT_EQ(md2.find("| **yes** |"), std::string::npos) << md2;
  int lake_rows = 0;
  for (const std::string& line : read_lines(out / "results.md")) {
    if (line.find("`share-joint-15`") != std::string::npos) {
      const std::string none = " | – |";  // no Lake score: the table's last column is empty
      EXPECT_EQ(line.substr(line.size() - std::min(line.size(), none.size())), none) << line;
    }
    if (line.find("`share-full`") != std::string::npos) {
      EXPECT_NE(line.find("| 61.25 (n=1) |"), std::string::npos) << line;
      ++lake_rows;
    }
  }
  EXPECT_EQ(lake_rows, 1);
  cmp.back() = out.str() + "/no-such-grid";
  EXPECT_EQ(run_grid_args(cmp), kExitUsage);
  // Figures 3-7 each have Kumar's curve: drawn where gnuplot is (a linked PNG of
  // some size; a script error once left empty files behind), else "gnuplot missing".
  const bool gnuplot = std::system("command -v gnuplot >/dev/null 2>&1") == 0;
  for (int n = 3; n <= 7; ++n) {
    const std::string png = "figure" + std::to_string(n) + ".png";
    if (gnuplot) {
      EXPECT_NE(md.find("![Figure " + std::to_string(n) + "](" + png + ")"), std::string::npos) << md;
      ASSERT_TRUE(std::filesystem::exists(out / png)) << png;
      EXPECT_GT(std::filesystem::file_size(out / png), 1000u) << png;
    } else {
      EXPECT_NE(md.find("Figure " + std::to_string(n) + ": gnuplot missing."), std::string::npos) << md;
      EXPECT_FALSE(std::filesystem::exists(out / png)) << png;
    }
  }
  // --dry-run lists the plan without running anything.
  testing::internal::CaptureStdout();
  std::vector<std::string> dry = with("");
  dry.push_back("--dry-run");
  EXPECT_EQ(run_grid_args(dry), kExitOk);
  const std::string plan = testing::internal::GetCapturedStdout();
  EXPECT_NE(plan.find("t1-kumar               seed 1  done"), std::string::npos) << plan;
  EXPECT_EQ(run_grid_args({"--rows", "^nosuchrow$", "--dry-run"}), kExitUsage);
}

// --report-only on a folder without a finished cell is an error naming it (it once wrote
// an empty results.md and exited 0).
TEST(OmniglotGrid, ReportOnlyWithoutFinishedCellsIsAnError) {
  TempDir out("grid_empty");
  testing::internal::CaptureStderr();
  EXPECT_EQ(run_grid_args({"--out-dir", out.str(), "--report-only"}), kExitFailed);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("no finished cell"), std::string::npos) << err;
  EXPECT_NE(err.find(out.str()), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(out / "results.md"));
}

// A two-seed grid of one-epoch tiny cells over the rows `rows_re` (args[7]: --close-points).
std::vector<std::string> tiny_two_seed_grid(const TempDir& out, const TempDir& cache, const std::string& rows_re,
                                            const std::string& close_points) {
  const std::string tiny = "--channels 8 --embedding 16 --val-way 5 --eval-batch 64 --iters 2 --batch 4 "
                           "--val-triplets 12 --val-tasks 4 --epochs 1";
  return {"--out-dir", out.str(), "--rows", rows_re, "--seeds", "2", "--close-points", close_points, "--device", "cpu",
          "--data-dir", omniglot_root(), "--cache-dir", cache.str(), "--cell-args", tiny};
}

// Before the first pass is finished the dry run can only mention the second pass (seeds
// for ablation rows too close to call); after it, it lists those cells.
TEST(OmniglotGrid, DryRunListsTheSecondPassOnceTheFirstIsDone) {
  TempDir out("grid2"), cache("cache2");
  std::vector<std::string> args = tiny_two_seed_grid(out, cache, "^(t1-kumar|norm-input)$", "100");
  auto dry_plan = [&] {
    std::vector<std::string> dry = args;
    dry.push_back("--dry-run");
    testing::internal::CaptureStdout();
    EXPECT_EQ(run_grid_args(dry), kExitOk);
    return testing::internal::GetCapturedStdout();
  };
  std::string plan = dry_plan();
  EXPECT_EQ(plan.find("norm-input             seed 2"), std::string::npos) << plan;
  EXPECT_NE(plan.find("3 cells"), std::string::npos) << plan;
  EXPECT_NE(plan.find("not counted above"), std::string::npos) << plan;
  // The first pass alone (--close-points 0: no second pass), then the dry run again.
  std::vector<std::string> first = args;
  first[std::find(first.begin(), first.end(), "--close-points") - first.begin() + 1] = "0";
  EXPECT_EQ(run_grid_args(first), kExitOk);
  plan = dry_plan();
  EXPECT_NE(plan.find("norm-input             seed 2"), std::string::npos) << plan;
  EXPECT_NE(plan.find("4 cells"), std::string::npos) << plan;
  EXPECT_NE(plan.find("listed and counted above"), std::string::npos) << plan;
}

// drop-0.1 sits in the Dropout group, and also in the Activations group as "ReLU, dropout
// 0.1" beside act-dropout-elu: a second pass for one of the two gives it to both.
TEST(OmniglotGrid, SecondPassSeesRowsThroughTheirAliases) {
  TempDir out("grid3"), cache("cache3");
  std::vector<std::string> args = tiny_two_seed_grid(out, cache, "^(drop-0.1|act-dropout-elu)$", "0");
  EXPECT_EQ(run_grid_args(args), kExitOk);  // the first pass only
  args[7] = "100";                           // --close-points 100: every pair is close
  args.push_back("--dry-run");
  testing::internal::CaptureStdout();
  EXPECT_EQ(run_grid_args(args), kExitOk);
  const std::string plan = testing::internal::GetCapturedStdout();
  EXPECT_NE(plan.find("act-dropout-elu        seed 2"), std::string::npos) << plan;
  EXPECT_NE(plan.find("drop-0.1               seed 2"), std::string::npos) << plan;
}

}  // namespace
