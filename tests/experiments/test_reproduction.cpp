// Results a reader can trust (issue 36): the two-sided reproduction count on hand-made
// cells, the degenerate-cell flag, the provenance block every run writes into
// summary.json (present, parseable, the commit and whether the tree was dirty), and the
// per-cell provenance rows the grid reports print.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include "experiments/common/build_info.h"
#include "experiments/common/grid_util.h"
#include "experiments/common/provenance.h"
#include "experiments/common/reproduction.h"

namespace {
using namespace mn::exp;

SampleStats cell(std::vector<double> v) { return sample_stats(v); }

TEST(Reproduction, CountedBothWaysOnHandMadeCells) {
  // Two seeds: mean 75, sd ~1.41: the paper's 74 is within, 77 above us (we are below), 72 below us.
  const SampleStats two = cell({74, 76});
  EXPECT_EQ(compare_with_paper(74.0, two, 1.0), Repro::Within);
  EXPECT_EQ(compare_with_paper(77.0, two, 1.0), Repro::Below);
  EXPECT_EQ(compare_with_paper(72.0, two, 1.0), Repro::Above);
  // One seed: the stated tolerance decides.
  const SampleStats one = cell({80});
  EXPECT_EQ(compare_with_paper(79.5, one, 1.0), Repro::Within);
  EXPECT_EQ(compare_with_paper(78.5, one, 1.0), Repro::Above);
  // Far above the paper is not a match.
  EXPECT_EQ(compare_with_paper(50.0, cell({90, 91, 92}), 1.0), Repro::Above);
  // No number, no run, a degenerate metric.
  EXPECT_EQ(compare_with_paper(-1, one, 1.0), Repro::NoPaper);
  EXPECT_EQ(compare_with_paper(70.0, cell({}), 1.0), Repro::NotRun);
  EXPECT_EQ(compare_with_paper(100.0, cell({100, 100}), 1.0, /*degenerate=*/true), Repro::Degenerate);
  ReproCount c;
  for (Repro r : {Repro::Within, Repro::Within, Repro::Above, Repro::Below, Repro::Below, Repro::Below,
                  Repro::Degenerate, Repro::NoPaper})
    c.add(r);
  EXPECT_EQ(c.compared(), 6);
  EXPECT_EQ(c.line(), "2 within, 1 above, 3 below of 6 compared; 1 degenerate (not counted); 1 without a paper number");
}

TEST(Reproduction, ProvenanceBlockIsCompleteAndParseable) {
  char prog[] = "omniglot_triplet", a1[] = "--out-dir", a2[] = "runs/with space", a3[] = "--seed", a4[] = "1";
  char* argv[] = {prog, a1, a2, a3, a4};
  const Json p = provenance_json(5, argv, mn::Device::cpu());
  EXPECT_EQ(p.at("command"), "omniglot_triplet --out-dir 'runs/with space' --seed 1");
  const std::string commit = p.at("commit");
  EXPECT_TRUE(commit == "unknown" || std::regex_match(commit, std::regex("[0-9a-f]{40}"))) << commit;
  EXPECT_TRUE(p.at("dirty").is_boolean());
  EXPECT_EQ(p.at("dirty").get<bool>(), build_info().dirty);
  EXPECT_FALSE(p.at("compiler").get<std::string>().empty());
  EXPECT_GE(p.at("machine").at("threads").get<int64_t>(), 1);
  EXPECT_FALSE(p.at("machine").at("cpu").get<std::string>().empty());
  EXPECT_FALSE(p.contains("gpu"));
  EXPECT_TRUE(std::regex_match(p.at("start_utc").get<std::string>(),
                               std::regex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")));
  // Round trip through text, as summary.json stores it.
  const Json back = Json::parse(p.dump(2));
  EXPECT_EQ(back, p);
  // The grids' rows: 10 characters of the commit, "+dirty" when the tree was changed.
  Json summary;
  summary["provenance"] = p;
  summary["provenance"]["commit"] = "0123456789abcdef0123456789abcdef01234567";
  summary["provenance"]["dirty"] = true;
  const ProvenanceRow r = provenance_row(summary);
  EXPECT_EQ(r.commit, "0123456789+dirty");
  EXPECT_NE(r.machine.find("threads"), std::string::npos);
  EXPECT_EQ(provenance_row(Json::object()).commit, "not recorded");
  EXPECT_EQ(mixed_commits_note({r, r}), "");
  ProvenanceRow other = r;
  other.commit = "aaaaaaaaaa";
  EXPECT_NE(mixed_commits_note({r, other}).find("2 builds"), std::string::npos);
  EXPECT_NE(provenance_markdown(p).find("built from commit"), std::string::npos);
}

}  // namespace
