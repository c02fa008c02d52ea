// The two-sided counter of the LMNN study's report (experiments/lmnn_mining/report.h)
// on hand-made cells: reproduced within mean ± sd (+ the paper's rounding),
// paper above (ours lower) and paper below (ours higher) apart, a dash not
// counted, a cell that mined no triplet flagged and not scored.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "experiments/lmnn_mining/report.h"

namespace mn::lmnn {
namespace {

TEST(LmnnReport, SpeedRatioKeepsSlowerThanThePaperVisible) {
  EXPECT_EQ(speed_ratio(1.56, 3.026), "0.52x");  // printed "1x" before: a slower cell looked even
  EXPECT_EQ(speed_ratio(1.55, 4.335), "0.36x");  // printed "0x"
  EXPECT_EQ(speed_ratio(3.0, 2.0), "1.5x");
  EXPECT_EQ(speed_ratio(448.4, 1.0), "448x");
  EXPECT_EQ(speed_ratio(std::numeric_limits<double>::quiet_NaN(), 1.0), "–");
}

TEST(LmnnReport, CompareToPaperBothWays) {
  EXPECT_EQ(compare_to_paper(80.0, 78.0, 2.0), Verdict::Reproduced) << "on the upper edge";
  EXPECT_EQ(compare_to_paper(76.0, 78.0, 2.0), Verdict::Reproduced) << "on the lower edge";
  EXPECT_EQ(compare_to_paper(80.004, 78.0, 2.0), Verdict::Reproduced) << "within the paper's rounding";
  EXPECT_EQ(compare_to_paper(80.01, 78.0, 2.0), Verdict::PaperAbove);
  EXPECT_EQ(compare_to_paper(75.99, 78.0, 2.0), Verdict::PaperBelow) << "ours higher is not 'reproduced'";
  EXPECT_EQ(compare_to_paper(100.0, 100.0, 0.0), Verdict::Reproduced);
  // 16/22 printed as 72.73: a mean of exactly 16/22 with sd 0 reproduces it.
  EXPECT_EQ(compare_to_paper(72.73, 1600.0 / 22.0, 0.0), Verdict::Reproduced);
  EXPECT_EQ(compare_to_paper(std::numeric_limits<double>::quiet_NaN(), 78.0, 2.0), Verdict::NoPaper);
  EXPECT_EQ(compare_to_paper(80.0, 78.0, 2.0, 0.0), Verdict::Reproduced);
  EXPECT_EQ(compare_to_paper(80.004, 78.0, 2.0, 0.0), Verdict::PaperAbove) << "no tolerance given";
}

CellResult cell(const std::string& ds, bool hier, Mining m, std::vector<double> acc,
                std::vector<int64_t> triplets) {
  CellResult c;
  c.dataset = ds;
  c.hierarchical = hier;
  c.mining = m;
  for (size_t s = 0; s < acc.size(); ++s) {
    CellRun r;
    r.test_accuracy = acc[s];
    r.stats.triplets = triplets[s];
    r.stats.metric_changed = triplets[s] > 0;
    c.seeds.push_back(s + 1);
    c.runs.push_back(r);
  }
  return c;
}

TEST(LmnnReport, HandMadeCellsAreCountedOnTheirSide) {
  // Paper values (Table 1): mnist hier. k-BA 71, mnist flat k-BH 82, iris flat
  // k-BA 72.73, orl flat k-BA a dash, mnist hier. k-BH 77, mnist hier. k-NS 79.
  const std::vector<CellResult> cells = {
      cell("mnist", true, Mining::BA, {70, 72}, {5, 7}),      // 71 ± 1.41: reproduced
      cell("mnist", false, Mining::BH, {70, 72}, {5, 7}),     // paper 82 above 72.41
      cell("iris", false, Mining::BA, {90, 92}, {5, 7}),      // paper 72.73 below 89.59
      cell("orl", false, Mining::BA, {90, 92}, {5, 7}),       // no paper value
      cell("mnist", true, Mining::BH, {77, 77}, {0, 9}),      // equal, but a seed mined nothing
      cell("mnist", true, Mining::NS, {60, 98}, {1, 1}),      // 79 ± 26.9: reproduced (wide sd)
  };
  EXPECT_EQ(verdict(cells[0]), Verdict::Reproduced);
  EXPECT_EQ(verdict(cells[1]), Verdict::PaperAbove);
  EXPECT_EQ(verdict(cells[2]), Verdict::PaperBelow);
  EXPECT_EQ(verdict(cells[3]), Verdict::NoPaper);
  EXPECT_EQ(verdict(cells[4]), Verdict::NoTriplets);
  EXPECT_EQ(verdict(cells[5]), Verdict::Reproduced);

  const VerdictCounts all = count_verdicts(cells);
  EXPECT_EQ(all.reproduced, 2);
  EXPECT_EQ(all.paper_above, 1);
  EXPECT_EQ(all.paper_below, 1);
  EXPECT_EQ(all.no_paper, 1);
  EXPECT_EQ(all.no_triplets, 1);
  const VerdictCounts mh = count_verdicts(cells, "mnist", 1);
  EXPECT_EQ(mh.reproduced, 2);
  EXPECT_EQ(mh.no_triplets, 1);
  EXPECT_EQ(mh.paper_above + mh.paper_below + mh.no_paper, 0);
  const VerdictCounts mf = count_verdicts(cells, "mnist", 0);
  EXPECT_EQ(mf.paper_above, 1);
  EXPECT_EQ(mf.reproduced, 0);

  const Summary s = summarise(cells[4]);
  EXPECT_EQ(s.seeds_without_triplets, 1);
  EXPECT_EQ(s.seeds_metric_changed, 1);
  EXPECT_DOUBLE_EQ(s.triplets_mean, 4.5);

  // results.md lists the two sides apart and flags the unscored cell.
  RunInfo info;
  info.commit = "abc";
  info.cpu_model = "test CPU";
  const std::string md = results_markdown(cells, info);
  const size_t above = md.find("**paper above** (ours lower): mnist flat k-BH 71.00 ± 1.41 vs 82.00.");
  const size_t below = md.find("**paper below** (ours higher): iris flat k-BA 91.00 ± 1.41 vs 72.73.");
  EXPECT_NE(above, std::string::npos) << md;
  EXPECT_NE(below, std::string::npos) << md;
  EXPECT_NE(md.find("**NOT SCORED: no triplets**: mnist hier. k-BH"), std::string::npos) << md;
  EXPECT_NE(md.find("| mnist | hierarchical | 3 | 2 | 2 | 0 | 0 | 0 | 1 |"), std::string::npos) << md;
  EXPECT_NE(md.find("commit `abc`, machine test CPU"), std::string::npos);
}

TEST(LmnnReport, EuclideanReferenceCountsCellsBelowIt) {
  // MNIST reference 80 ± 2 (k on validation): below it means a mean under 78.
  // Paper: hier. k-BA 71 and k-BH 77 below, k-NS 79 not; flat k-BH 82 not.
  const std::vector<CellResult> cells = {
      cell("mnist", true, Mining::BA, {76, 78}, {5, 7}),   // ours 77: below
      cell("mnist", true, Mining::BH, {80, 82}, {5, 7}),   // ours 81: not
      cell("mnist", true, Mining::NS, {79, 79}, {5, 7}),   // ours 79: not
      cell("mnist", false, Mining::BH, {60, 62}, {5, 7}),  // ours 61: below
  };
  EuclideanBaseline b;
  b.dataset = "mnist";
  b.ks = {1, 3};
  b.chosen_k = {1, 3};
  b.test = {78, 82};  // 80 ± 2.83
  b.test_at = {{78, 70}, {80, 82}};
  RunInfo info;
  const std::string md = results_markdown(cells, info, {b});
  EXPECT_NE(md.find("| mnist | 1 (1), 3 (1) | 80.00 ± 2.83 | 79.00 ± 1.41 | 76.00 ± 8.49 | "
                    "0 of 1 / 2 of 3 | 1 of 1 / 1 of 3 |"),
            std::string::npos)
      << md;
  EXPECT_EQ(results_markdown(cells, info).find("## The reference"), std::string::npos)
      << "no baseline given, no section";
  const std::string js = results_json(cells, info, {b});
  EXPECT_NE(js.find("\"euclidean_baseline\""), std::string::npos);
}

}  // namespace
}  // namespace mn::lmnn
