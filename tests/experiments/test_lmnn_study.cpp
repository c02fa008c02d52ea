// The lmnn_mining binary's study (experiments/lmnn_mining/study.cpp) run
// in-process through the harness: a bad flag is a usage error before any data
// is read; a small Iris run (skipped when the data set is absent) writes
// results.md, results.json with one cell and a run per seed, and metrics.jsonl;
// the hierarchical flags' defaults (T per data set, --select each, sigma held).
#include <gtest/gtest.h>

#include "tests/common/test_util.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "experiments/common/json.h"
#include "experiments/lmnn_mining/study.h"

namespace mn::lmnn {
namespace {

int run_main(std::vector<std::string> args) {
  args.insert(args.begin(), "lmnn_mining");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return exp::run_study(make_lmnn_study(), static_cast<int>(argv.size()), argv.data());
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(LmnnStudy, BadFlagsAreUsageErrors) {
  const std::string out = testing::TempDir() + "/lmnn_bad";
  EXPECT_EQ(run_main({"--mining", "k-XYZ", "--out-dir", out}), exp::kExitUsage);
  EXPECT_EQ(run_main({"--k-grid", "1,x", "--out-dir", out}), exp::kExitUsage);
  EXPECT_EQ(run_main({"--dataset", "cifar", "--out-dir", out}), exp::kExitUsage);
  EXPECT_EQ(run_main({"--levels", "-1", "--out-dir", out}), exp::kExitUsage);
  EXPECT_EQ(run_main({"--level-scale", "trace", "--out-dir", out}), exp::kExitUsage);
  EXPECT_EQ(run_main({"--select", "last", "--out-dir", out}), exp::kExitUsage);
  EXPECT_EQ(run_main({"--mnist-subset", "last", "--out-dir", out}), exp::kExitUsage);
  EXPECT_EQ(run_main({"--max-levels", "17", "--out-dir", out}), exp::kExitUsage)
      << "the p-floor cap is gone: --levels replaces it";
}

// A tiny hierarchical Iris run with the defaults of the new flags: T = 10 (the
// authors' Iris runs), --select each (k and c chosen per seed), sigma held, and
// the per-level record in results.json and metrics.jsonl; --levels overrides T.
TEST(LmnnStudy, HierarchicalDefaultsAreTheAuthorsRuns) {
  const std::string data = std::string(MN_SOURCE_DIR) + "/../shared/datasets";
  if (!std::filesystem::exists(data + "/iris/iris.csv"))
    GTEST_SKIP() << "Iris not found under " << data << ": skipped";
  for (const char* levels : {"", "3"}) {
    const std::string out = testing::TempDir() + "/lmnn_hier_defaults" + levels;
    std::filesystem::remove_all(out);
    std::vector<std::string> args = {"--device", "cpu", "--dataset", "iris", "--mining", "k-EPHN",
                                     "--approach", "hierarchical", "--seeds", "2", "--k-grid", "1,3",
                                     "--c-grid", "1", "--data-dir", data, "--out-dir", out};
    if (*levels) args.insert(args.end(), {"--levels", levels});
    ASSERT_EQ(run_main(args), exp::kExitOk);
    const exp::Json js = exp::Json::parse(slurp(out + "/results.json"));
    EXPECT_EQ(js["config"]["select"], "each");
    EXPECT_EQ(js["config"]["level-scale"], "sigma");
    EXPECT_EQ(js["config"]["diag-boost"], 1.0);
    ASSERT_EQ(js["cells"].size(), 1u);
    const int64_t T = *levels ? 3 : 10;
    for (const auto& r : js["cells"][0]["runs"]) {
      EXPECT_EQ(r["levels"].get<int64_t>(), T);
      if (T == 10) {  // 3 levels reach r = 0.7 sigma only: they may hold one class
        EXPECT_GT(r["levels_with_triplets"].get<int64_t>(), 0);
        EXPECT_TRUE(r["metric_changed"].get<bool>());
      }
    }
    const auto& lv = js["cells"][0]["levels_first_seed"];
    ASSERT_EQ(lv["sigma"].size(), static_cast<size_t>(T));
    for (const auto& s : lv["sigma"])
      EXPECT_NEAR(s.get<double>(), lv["sigma"][0].get<double>(), 1e-8 * lv["sigma"][0].get<double>());
    const std::string metrics = slurp(out + "/metrics.jsonl");
    EXPECT_NE(metrics.find("\"levels_first_seed\""), std::string::npos);
    EXPECT_NE(metrics.find("\"verdict\""), std::string::npos);
  }
}

TEST(LmnnStudy, SmallIrisRunWritesTheResults) {
  const std::string data = std::string(MN_SOURCE_DIR) + "/../shared/datasets";
  if (!std::filesystem::exists(data + "/iris/iris.csv"))
    GTEST_SKIP() << "Iris not found under " << data << ": study smoke test skipped";
  const std::string out = testing::TempDir() + "/lmnn_iris";
  std::filesystem::remove_all(out);
  ASSERT_EQ(run_main({"--device", "cpu", "--dataset", "iris", "--mining", "k-BH,k-NS", "--approach",
                      "flat", "--seeds", "3", "--k-grid", "1,3", "--c-grid", "1", "--select", "first",
                      "--data-dir", data, "--out-dir", out}),
            exp::kExitOk);
  const exp::Json js = exp::Json::parse(slurp(out + "/results.json"));
  ASSERT_EQ(js["cells"].size(), 2u);
  for (const auto& cell : js["cells"]) {
    EXPECT_EQ(cell["runs"].size(), 3u);
    for (const auto& r : cell["runs"]) {
      EXPECT_GE(r["test_accuracy"].get<double>(), 0.0);
      EXPECT_LE(r["test_accuracy"].get<double>(), 100.0);
      EXPECT_GT(r["triplets"].get<int64_t>(), 0);
    }
    // With --select first every seed reuses the first seed's k.
    EXPECT_EQ(cell["runs"][1]["k"], cell["runs"][0]["k"]);
  }
  const std::string md = slurp(out + "/results.md");
  EXPECT_NE(md.find("| k-BH | 100.00 |"), std::string::npos) << "paper column beside ours";
  EXPECT_NE(md.find("k-NS"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(out + "/ghost_faces.png")) << "no ORL cell: no figure";
}

// Poisoned allocations (MN_POISON, runtime/allocator.h) change no result: the
// miners, the solver and the k-NN read only memory they wrote.
TEST(LmnnStudy, PoisonedAllocationsChangeNothing) {
  const std::string data = std::string(MN_SOURCE_DIR) + "/../shared/datasets";
  if (!std::filesystem::exists(data + "/iris/iris.csv"))
    GTEST_SKIP() << "Iris not found under " << data << ": skipped";
  std::vector<exp::Json> results;
  for (bool poison : {false, true}) {
    const std::string out = testing::TempDir() + (poison ? "/lmnn_poison_on" : "/lmnn_poison_off");
    std::filesystem::remove_all(out);
    int rc = -1;
    {
      test::PoisonScope scope(poison);
      rc = run_main({"--device", "cpu", "--dataset", "iris", "--mining", "all", "--approach", "both",
                     "--seeds", "1", "--k-grid", "1,3", "--c-grid", "1", "--data-dir", data, "--out-dir", out});
    }
    ASSERT_EQ(rc, exp::kExitOk);
    results.push_back(exp::Json::parse(slurp(out + "/results.json")));
  }
  ASSERT_EQ(results[0]["cells"].size(), results[1]["cells"].size());
  ASSERT_GT(results[0]["cells"].size(), 0u);
  for (size_t i = 0; i < results[0]["cells"].size(); ++i) {
    const auto &ra = results[0]["cells"][i]["runs"], &rb = results[1]["cells"][i]["runs"];
    ASSERT_EQ(ra.size(), rb.size());
    for (size_t j = 0; j < ra.size(); ++j)
      for (const char* key : {"test_accuracy", "k", "c", "triplets"})
        EXPECT_EQ(ra[j][key], rb[j][key]) << "cell " << i << " run " << j << " " << key;
  }
}

}  // namespace
}  // namespace mn::lmnn
