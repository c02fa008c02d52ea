// The seven miners of the LMNN study (experiments/lmnn_mining/miners.h) on a
// hand-built 1-D toy set whose pull pairs and triplets are enumerated by hand
// below, plus k-NS: its weight formula (Eq. 11, in log space), sampling without
// replacement, and its draw frequencies against the normalised weights.
//
// Toy set (no distance ties):   index  0    1    2    3    4    5
//                               x      0    1    4.2  2.5  7    11
//                               class  A    A    A    B    B    B
// Sorted by distance from each anchor:
//   0: positives 1 (1), 2 (4.2)      negatives 3 (2.5), 4 (7), 5 (11)
//   1: positives 0 (1), 2 (3.2)      negatives 3 (1.5), 4 (6), 5 (10)
//   2: positives 1 (3.2), 0 (4.2)    negatives 3 (1.7), 4 (2.8), 5 (6.8)
//   3: positives 4 (4.5), 5 (8.5)    negatives 1 (1.5), 2 (1.7), 0 (2.5)
//   4: positives 5 (4), 3 (4.5)      negatives 2 (2.8), 1 (6), 0 (7)
//   5: positives 4 (4), 3 (8.5)      negatives 2 (6.8), 1 (10), 0 (11)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "experiments/lmnn_mining/miners.h"

namespace mn::lmnn {
namespace {

using Trip = std::array<int32_t, 3>;
using Pair = std::array<int32_t, 2>;

Mat toy_x() {
  Mat X(6, 1);
  const double v[] = {0, 1, 4.2, 2.5, 7, 11};
  for (int i = 0; i < 6; ++i) X(i, 0) = v[i];
  return X;
}
const std::vector<int32_t> kToyY = {0, 0, 0, 1, 1, 1};

Mined run(Mining m, int64_t k) {
  Generator g(1);
  return mine(toy_x(), kToyY, {m, k, 1.4}, g);
}
std::set<Trip> trips(const Mined& m) { return {m.triplets.begin(), m.triplets.end()}; }
std::set<Pair> pulls(const Mined& m) { return {m.pull.begin(), m.pull.end()}; }

const std::set<Pair> kNearestPos = {{0, 1}, {1, 0}, {2, 1}, {3, 4}, {4, 5}, {5, 4}};
const std::set<Pair> kFarthestPos = {{0, 2}, {1, 2}, {2, 0}, {3, 5}, {4, 3}, {5, 3}};

TEST(LmnnMiners, BatchAllTakesEveryNegative) {
  const Mined m = run(Mining::BA, 1);
  EXPECT_EQ(pulls(m), kNearestPos);
  std::set<Trip> expect;
  for (const auto& p : kNearestPos)
    for (int32_t l = 0; l < 6; ++l)
      if (kToyY[l] != kToyY[p[0]]) expect.insert({p[0], p[1], l});
  EXPECT_EQ(expect.size(), 18u);
  EXPECT_EQ(trips(m), expect);
  EXPECT_EQ(m.triplets.size(), 18u) << "no duplicates";
}

TEST(LmnnMiners, BatchHardFarthestPositiveNearestNegative) {
  const Mined m = run(Mining::BH, 1);
  EXPECT_EQ(pulls(m), kFarthestPos);
  EXPECT_EQ(trips(m), (std::set<Trip>{{0, 2, 3}, {1, 2, 3}, {2, 0, 3}, {3, 5, 1}, {4, 3, 2}, {5, 3, 2}}));
}

TEST(LmnnMiners, HardPositiveEasyNegative) {
  const Mined m = run(Mining::HPEN, 1);
  EXPECT_EQ(pulls(m), kFarthestPos);
  EXPECT_EQ(trips(m), (std::set<Trip>{{0, 2, 5}, {1, 2, 5}, {2, 0, 5}, {3, 5, 0}, {4, 3, 0}, {5, 3, 0}}));
}

TEST(LmnnMiners, EasyPositiveEasyNegative) {
  const Mined m = run(Mining::EPEN, 1);
  EXPECT_EQ(pulls(m), kNearestPos);
  EXPECT_EQ(trips(m), (std::set<Trip>{{0, 1, 5}, {1, 0, 5}, {2, 1, 5}, {3, 4, 0}, {4, 5, 0}, {5, 4, 0}}));
}

TEST(LmnnMiners, EasyPositiveHardNegative) {
  const Mined m = run(Mining::EPHN, 1);
  EXPECT_EQ(pulls(m), kNearestPos);
  EXPECT_EQ(trips(m), (std::set<Trip>{{0, 1, 3}, {1, 0, 3}, {2, 1, 3}, {3, 4, 1}, {4, 5, 2}, {5, 4, 2}}));
}

TEST(LmnnMiners, BatchSemiHardNearestNegativeFartherThanThePositive) {
  const Mined m = run(Mining::BSH, 1);
  EXPECT_EQ(pulls(m), kNearestPos);
  // Anchor 3: every negative (1.5, 1.7, 2.5) is nearer than its positive (4.5): none.
  EXPECT_EQ(trips(m), (std::set<Trip>{{0, 1, 3}, {1, 0, 3}, {2, 1, 5}, {4, 5, 1}, {5, 4, 2}}));
  // k = 2, anchor 0: positive 1 (d 1) -> 3, 4; positive 2 (d 4.2) -> 4, 5.
  std::set<Trip> a0;
  for (const auto& t : run(Mining::BSH, 2).triplets)
    if (t[0] == 0) a0.insert(t);
  EXPECT_EQ(a0, (std::set<Trip>{{0, 1, 3}, {0, 1, 4}, {0, 2, 4}, {0, 2, 5}}));
}

TEST(LmnnMiners, KLargerThanTheCandidatesUsesAllOfThem) {
  const Mined m = run(Mining::EPHN, 10);
  EXPECT_EQ(m.pull.size(), 12u);          // 2 positives per anchor
  EXPECT_EQ(m.triplets.size(), 36u);      // x 3 negatives
  const Mined ns = run(Mining::NS, 10);   // sampling without replacement: each once
  EXPECT_EQ(trips(ns), trips(m));
  EXPECT_EQ(ns.triplets.size(), 36u);
}

TEST(LmnnMiners, NamesRoundTripAndBadNamesThrow) {
  for (Mining m : all_minings()) EXPECT_EQ(parse_mining(mining_name(m)), m);
  EXPECT_EQ(parse_mining("bsh"), Mining::BSH);
  EXPECT_THROW(parse_mining("k-XYZ"), Error);
  Generator g(0);
  EXPECT_THROW(mine(toy_x(), {0, 1}, {Mining::BA, 1, 1.4}, g), Error);
}

TEST(LmnnMiners, NegativeSamplingWeightIsCappedInverseDensity) {
  for (int64_t d : {4, 15, 30}) {
    for (double D : {0.6, 1.0, 1.3, 1.6, 1.9}) {
      const double q = std::pow(D, d - 2) * std::pow(1 - 0.25 * D * D, 0.5 * (d - 3));
      EXPECT_NEAR(ns_weight(D, d, 1.4), std::min(1.4, 1 / q), 1e-12 * std::min(1.4, 1 / q))
          << "d " << d << " D " << D;
    }
    // Outside [0.5, 1.99] the distance is clipped (the density needs D < 2).
    EXPECT_EQ(ns_weight(0.1, d, 1.4), ns_weight(0.5, d, 1.4));
    EXPECT_EQ(ns_weight(2.5, d, 1.4), ns_weight(1.99, d, 1.4));
  }
}

TEST(LmnnMiners, NegativeSamplingFollowsTheWeights) {
  // d = 2: 1/q(D) = sqrt(1 - D^2/4) < lambda, so the weights are uncapped.
  // Anchor 0 at angle 0, its positive 1 close by, negatives at 60, 120, 180 deg.
  Mat X(5, 2);
  const double ang[] = {0, 0.05, M_PI / 3, 2 * M_PI / 3, M_PI};
  for (int i = 0; i < 5; ++i) X(i, 0) = std::cos(ang[i]), X(i, 1) = std::sin(ang[i]);
  const std::vector<int32_t> y = {0, 0, 1, 1, 1};
  std::vector<double> w;
  for (int l = 2; l < 5; ++l) w.push_back(ns_weight(2 * std::sin(ang[l] / 2), 2, 1.4));
  const double total = w[0] + w[1] + w[2];
  std::map<int32_t, int64_t> count;
  const int64_t draws = 6000;
  Generator g(7);
  for (int64_t r = 0; r < draws; ++r)
    for (const auto& t : mine(X, y, {Mining::NS, 1, 1.4}, g).triplets)
      if (t[0] == 0) ++count[t[2]];
  for (int l = 2; l < 5; ++l) {
    const double p = w[l - 2] / total;
    const double sd = std::sqrt(draws * p * (1 - p));
    // 4.5 sigma: a false alarm once in ~150,000 runs of this test.
    EXPECT_NEAR(static_cast<double>(count[l]), draws * p, 4.5 * sd) << "negative " << l;
  }
}

}  // namespace
}  // namespace mn::lmnn
