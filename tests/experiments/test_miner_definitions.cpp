// The distance-weighted miners sample from the distributions their sources
// define (kernels/miners.h), checked by chi-square tests of the drawn
// frequencies (fixed seed) against probabilities computed here by hand:
//   * distance-weighted (Wu et al. 2017, pml DistanceWeightedMiner): weight
//     1/q(max(D, 0.5)) normalised per anchor, 0 at D >= 1.4;
//   * k-ns (the LMNN paper's Eqs. 10-11): weight min(lambda, 1/q(D)), no
//     cutoff, and the LMNN study's own weight function (experiments/lmnn_mining/
//     miners.h, ns_weight) gives the same distribution.
// (Lives with the experiments tests because it compares against the LMNN study.)
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "experiments/lmnn_mining/miners.h"
#include "nn/miners/miner.h"

namespace {

constexpr int64_t kB = 8;
constexpr int kDim = 8;
// Row 0 of the distance matrix: the positive 1, then the negatives 2..7.
const double kRow0[kB] = {0.0, 0.2, 0.3, 0.8, 1.0, 1.2, 1.39, 1.6};

mn::Tensor distances(const double* row0) {
  std::vector<double> d(kB * kB, 1.0);
  for (int64_t i = 0; i < kB; ++i) d[i * kB + i] = 0.0;
  for (int64_t j = 1; j < kB; ++j) d[j] = d[j * kB] = row0[j];
  return mn::Tensor::from_vector(d, {kB, kB});
}

// -log q(D) for d = kDim, written out: q(D) = D^(d-2) (1 - D^2/4)^((d-3)/2).
double neg_log_q(double D) { return -((kDim - 2) * std::log(D) + 0.5 * (kDim - 3) * std::log(1.0 - 0.25 * D * D)); }

// How often each negative of (a=0, p=1) is drawn over `draws` minings.
std::map<int64_t, int64_t> draw(const std::string& miner, const mn::nn::MinerConfig& cfg, const double* row0,
                                int draws) {
  auto m = mn::nn::make_miner(miner, cfg);
  mn::Tensor dist = distances(row0);
  mn::Tensor labels = mn::Tensor::from_vector(std::vector<int64_t>{0, 0, 1, 1, 1, 1, 1, 1}, {kB});
  mn::Generator g(12345);
  std::map<int64_t, int64_t> counts;
  for (int t = 0; t < draws; ++t) {
    mn::nn::Mined r = m->mine(dist, labels, &g);
    std::vector<int64_t> tr = r.triplets.to_vector<int64_t>();
    int found = 0;
    for (size_t i = 0; i + 2 < tr.size(); i += 3)
      if (tr[i] == 0 && tr[i + 1] == 1) {
        ++counts[tr[i + 2]];
        ++found;
      }
    EXPECT_LE(found, 1) << miner << ": one negative per (a, p) with k = 1";
  }
  return counts;
}

// Pearson's chi-square of `counts` against probabilities p (over negatives 2..7).
double chi_square(const std::map<int64_t, int64_t>& counts, const std::vector<double>& w, int draws) {
  double total_w = 0;
  for (double x : w) total_w += x;
  double chi2 = 0;
  for (int64_t n = 2; n < kB; ++n) {
    const double p = w[n - 2] / total_w;
    const auto it = counts.find(n);
    const double c = it == counts.end() ? 0.0 : static_cast<double>(it->second);
    if (p == 0) {
      EXPECT_EQ(c, 0) << "negative " << n << " has weight 0 but was drawn";
      continue;
    }
    const double e = p * draws;
    chi2 += (c - e) * (c - e) / e;
  }
  return chi2;
}

TEST(MinerDefinitions, DistanceWeightedFollowsWu) {
  const int draws = 20000;
  mn::nn::MinerConfig cfg;
  cfg.dw_dim = kDim;
  auto counts = draw("distance-weighted", cfg, kRow0, draws);
  std::vector<double> w;
  for (int64_t n = 2; n < kB; ++n)
    w.push_back(kRow0[n] >= 1.4 ? 0.0 : std::exp(neg_log_q(std::max(kRow0[n], 0.5))));
  // 5 cells with weight: 4 degrees of freedom, 0.1 % critical value 18.47.
  EXPECT_LT(chi_square(counts, w, draws), 18.47);
  // The nearest negative dominates (p ~ 0.89 here); a near-uniform draw would not.
  EXPECT_GT(counts[2], draws * 0.85);
}

TEST(MinerDefinitions, DistanceWeightedWithNoNegativeInsideTheCutoffGivesNoTriplet) {
  const double far[kB] = {0.0, 0.2, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9};
  mn::nn::MinerConfig cfg;
  cfg.dw_dim = kDim;
  EXPECT_TRUE(draw("distance-weighted", cfg, far, 50).empty());
}

TEST(MinerDefinitions, KnsFollowsTheLmnnPaperAndTheLmnnStudy) {
  const int draws = 20000;
  mn::nn::MinerConfig cfg;
  cfg.dw_dim = kDim;
  cfg.dw_lambda = 3.0;
  cfg.k = 1;
  auto counts = draw("k-ns", cfg, kRow0, draws);
  std::vector<double> by_hand, by_study;
  for (int64_t n = 2; n < kB; ++n) {
    by_hand.push_back(std::min(3.0, std::exp(neg_log_q(std::max(kRow0[n], 0.5)))));
    by_study.push_back(mn::lmnn::ns_weight(kRow0[n], kDim, 3.0));
    EXPECT_NEAR(by_hand.back(), by_study.back(), 1e-12 * by_hand.back()) << "negative " << n;
  }
  // 6 cells: 5 degrees of freedom, 0.1 % critical value 20.52.
  EXPECT_LT(chi_square(counts, by_hand, draws), 20.52);
  // No cutoff: the negative at 1.6 is drawn too.
  EXPECT_GT(counts[7], 0);
}

}  // namespace
