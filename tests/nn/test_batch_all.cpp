// Batch-all triplet loss (kernels/batch_all.h, nn "batch-all"): the sorted
// CPU kernel against a brute-force loop over every triplet written here from
// the definition (loss, active count, the dL/dD counts, stats; ordered and
// unordered positives; the three reductions; tied distances), the same loss as
// the all-triplets miner with the margin-l2 triplet loss, a float64 gradcheck
// through the embeddings, the thread count not changing the result, and CPU/GPU
// parity when a GPU is present.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "autograd/gradcheck.h"
#include "kernels/batch_all.h"
#include "kernels/miners.h"
#include "nn/losses/loss.h"
#include "nn/losses/losses.h"
#include "runtime/parallel.h"
#include "tests/common/test_util.h"

using namespace mn;

namespace {

struct Brute {
  double loss_sum = 0, active = 0, triplets = 0;
  std::vector<double> grad;  // (B, B) counts
};

Brute brute(const std::vector<double>& D, const std::vector<int64_t>& y, double m, bool unordered) {
  const int64_t B = static_cast<int64_t>(y.size());
  Brute r;
  r.grad.assign(B * B, 0.0);
  for (int64_t a = 0; a < B; ++a)
    for (int64_t p = 0; p < B; ++p) {
      if (p == a || y[p] != y[a] || (unordered && p < a)) continue;
      for (int64_t n = 0; n < B; ++n) {
        if (y[n] == y[a]) continue;
        r.triplets += 1;
        const double t = D[a * B + p] + m;  // the kernel's form: t first
        if (D[a * B + n] < t) {
          r.loss_sum += t - D[a * B + n];
          r.active += 1;
          r.grad[a * B + p] += 1;
          r.grad[a * B + n] -= 1;
        }
      }
    }
  return r;
}

// Distances rounded to 1/4 so ties with t = D + m occur often.
std::vector<double> tied_distances(int64_t B, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<double> D(B * B, 0.0);
  for (int64_t i = 0; i < B; ++i)
    for (int64_t j = i + 1; j < B; ++j) D[i * B + j] = D[j * B + i] = std::round((g() % 1000) / 250.0 * 4) / 4;
  return D;
}

}  // namespace

TEST(BatchAll, MatchesBruteForceEveryReductionAndOrder) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    const int64_t B = 23;
    std::mt19937_64 g(seed);
    std::vector<int64_t> y;
    for (int64_t i = 0; i < B; ++i) y.push_back(static_cast<int64_t>(g() % 4));
    const auto D = tied_distances(B, seed);
    for (bool unordered : {false, true})
      for (auto red : {kernels::Reduction::Mean, kernels::Reduction::MeanNonZero, kernels::Reduction::Sum}) {
        SCOPED_TRACE(testing::Message() << "seed " << seed << " unordered " << unordered << " red " << int(red));
        const double m = 0.5;
        Brute b = brute(D, y, m, unordered);
        kernels::BatchAllParams P;
        P.margin = m;
        P.unordered_positives = unordered;
        P.reduction = red;
        auto r = kernels::batch_all_terms(P, Tensor::from_vector(D, {B, B}), Tensor::from_vector(y, {B}));
        const auto st = r.stats.to_double_vector();
        const double norm = red == kernels::Reduction::Sum ? 1.0
                            : red == kernels::Reduction::Mean ? 1.0 / b.triplets
                                                               : 1.0 / std::max(b.active, 1.0);
        EXPECT_NEAR(st[0], b.loss_sum * norm, 1e-12 * std::max(1.0, b.loss_sum));
        EXPECT_EQ(st[1], b.active);
        EXPECT_DOUBLE_EQ(st[4], norm);
        EXPECT_EQ(r.grad.to_double_vector(), b.grad) << "the dL/dD counts";
        const auto gd = kernels::batch_all_grad(r, Tensor::scalar(2.0, DType::F64)).to_double_vector();
        for (int64_t k = 0; k < B * B; ++k) ASSERT_DOUBLE_EQ(gd[k], b.grad[k] * 2.0 * norm);
      }
  }
}

TEST(BatchAll, SameLossAsAllTripletsMinerWithMarginL2) {
  const int64_t B = 30;
  Tensor e = test::randn({B, 3}, DType::F64, Device::cpu(), 7);
  std::vector<int64_t> y;
  for (int64_t i = 0; i < B; ++i) y.push_back(i % 5);
  Tensor lab = Tensor::from_vector(y, {B});
  for (bool unordered : {false, true}) {
    nn::LossConfig lc;
    lc.margin = 0.8;
    lc.unordered_positives = unordered;
    auto loss = nn::make_loss("batch-all", lc);
    nn::LossOutput fused = loss->compute(ag::Variable(e), lab, nn::Mined{});
    kernels::MinerParams mp;
    mp.kind = kernels::MinerKind::AllTriplets;
    mp.unordered_positives = unordered;
    auto mined = kernels::mine_triplets(kernels::pairwise_distance_matrix(e, false), lab, mp);
    EXPECT_EQ(mined.triplets.size(0), unordered ? 30 * 5 / 2 * 24 / 1 : 30 * 5 * 24) << "B * (K - 1) * (B - K)";
    nn::TripletLossOptions to;
    to.kind = nn::TripletKind::MarginL2;
    to.margin = 0.8;
    nn::LossOutput listed = nn::triplet_loss(ag::Variable(e), mined.triplets, to);
    EXPECT_NEAR(fused.host_stats().loss, listed.host_stats().loss, 1e-9);
    EXPECT_EQ(fused.host_stats().active, listed.host_stats().active);
  }
}

TEST(BatchAll, Float64GradcheckThroughTheEmbeddings) {
  const int64_t B = 12;
  std::vector<int64_t> y;
  for (int64_t i = 0; i < B; ++i) y.push_back(i % 3);
  Tensor lab = Tensor::from_vector(y, {B});
  for (int sq : {0, 1}) {
    nn::LossConfig lc;
    lc.margin = 1.5;  // many active, none at the kink for these inputs
    lc.squared = sq;
    auto loss = nn::make_loss("batch-all", lc);
    auto r = ag::gradcheck([&](const std::vector<ag::Variable>& v) { return loss->compute(v[0], lab, nn::Mined{}).loss; },
                           {test::randn({B, 4}, DType::F64, Device::cpu(), 11)});
    EXPECT_TRUE(r.ok) << "squared " << sq << ": " << r.message;
  }
}

TEST(BatchAll, ThreadCountDoesNotChangeTheResult) {
  const int64_t B = 200;
  Tensor e = test::randn({B, 16}, DType::F32, Device::cpu(), 3);
  std::vector<int64_t> y;
  for (int64_t i = 0; i < B; ++i) y.push_back(i % 10);
  Tensor D = kernels::pairwise_distance_matrix(e, false);
  kernels::BatchAllParams P;
  P.margin = 0.3;
  const int before = num_threads();
  set_num_threads(1);
  auto r1 = kernels::batch_all_terms(P, D, Tensor::from_vector(y, {B}));
  set_num_threads(std::max(2, before));
  auto r2 = kernels::batch_all_terms(P, D, Tensor::from_vector(y, {B}));
  set_num_threads(before);
  EXPECT_EQ(r1.stats.to_double_vector(), r2.stats.to_double_vector());
  EXPECT_EQ(r1.grad.to_double_vector(), r2.grad.to_double_vector());
}

TEST(BatchAll, RefusesBadInputsNamingTheOp) {
  kernels::BatchAllParams P;
  EXPECT_THROW(kernels::batch_all_terms(P, Tensor::zeros({3, 4}), Tensor::zeros({3}, DType::I64)), Error);
  EXPECT_THROW(kernels::batch_all_terms(P, Tensor::zeros({3, 3}), Tensor::zeros({4}, DType::I64)), Error);
  P.margin = -1;
  try {
    kernels::batch_all_terms(P, Tensor::zeros({3, 3}), Tensor::zeros({3}, DType::I64));
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch_all_triplet_loss"), std::string::npos) << e.what();
  }
}

TEST(BatchAll, CudaMatchesCpu) {
  MN_SKIP_IF_NO_CUDA();
  const int64_t B = 70;
  const auto D = tied_distances(B, 9);
  std::vector<int64_t> y;
  for (int64_t i = 0; i < B; ++i) y.push_back(i % 6);
  for (bool unordered : {false, true}) {
    kernels::BatchAllParams P;
    P.margin = 0.5;
    P.unordered_positives = unordered;
    auto c = kernels::batch_all_terms(P, Tensor::from_vector(D, {B, B}), Tensor::from_vector(y, {B}));
    auto g = kernels::batch_all_terms(P, Tensor::from_vector(D, {B, B}).to(Device::cuda(0)),
                                      Tensor::from_vector(y, {B}).to(Device::cuda(0)));
    EXPECT_EQ(c.grad.to_double_vector(), g.grad.to(Device::cpu()).to_double_vector());
    auto sc = c.stats.to_double_vector(), sg = g.stats.to(Device::cpu()).to_double_vector();
    for (int k = 0; k < 5; ++k) EXPECT_NEAR(sc[k], sg[k], 1e-9 * std::max(1.0, std::fabs(sc[k]))) << k;
  }
}
