// Multi-Similarity loss (kernels/multi_similarity.h, loss name "multi-similarity"):
// values and gradients written out by hand from the paper's formula on a tiny
// batch, float64 gradcheck through the cosine similarity, identical embeddings,
// and CPU/GPU parity (skipped without a GPU).
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/gradcheck.h"
#include "kernels/multi_similarity.h"
#include "nn/losses/loss.h"
#include "nn/miners/miner.h"
#include "tests/common/test_util.h"

using namespace mn;

namespace {

// Four unit vectors at 0, 60, 90 and 120 degrees, labels {0, 0, 1, 1}:
//   S01 = 1/2, S02 = 0, S03 = -1/2, S12 = r3 = sqrt(3)/2, S13 = 1/2, S23 = r3.
const double r3 = std::sqrt(3.0) / 2.0;
Tensor four_embeddings() {
  const double pi = std::acos(-1.0);
  std::vector<double> v;
  for (double deg : {0.0, 60.0, 90.0, 120.0}) {
    v.push_back(std::cos(deg * pi / 180));
    v.push_back(std::sin(deg * pi / 180));
  }
  return Tensor::from_vector(v, {4, 2});
}
Tensor four_sim() {
  return Tensor::from_vector(std::vector<double>{1, 0.5, 0, -0.5,  //
                                                 0.5, 1, r3, 0.5,  //
                                                 0, r3, 1, r3,     //
                                                 -0.5, 0.5, r3, 1},
                             {4, 4});
}
Tensor four_labels() { return Tensor::from_vector(std::vector<int64_t>{0, 0, 1, 1}, {4}); }

// With the miner (epsilon 0.1), alpha 2, beta 50, base 0.5, worked by hand:
//   row 0: min pos 0.5, max neg 0: no negative has S + 0.1 > 0.5, and the
//          positive fails 0.5 - 0.1 < 0 -> nothing kept, L0 = 0.
//   row 1: min pos 0.5, max neg r3: keeps p = 0 and n = 2 (r3), n = 3 (0.5)
//          L1 = 1/2 log(1 + e^0) + 1/50 log(1 + e^{50 (r3 - 0.5)} + e^0)
//   row 2: min pos r3, max neg r3: keeps p = 3 (r3 - 0.1 < r3) and n = 1 (r3 + 0.1 > r3), not n = 0
//          L2 = 1/2 log(1 + e^{-2 (r3 - 0.5)}) + 1/50 log(1 + e^{50 (r3 - 0.5)})
//   row 3: min pos r3, max neg 0.5: nothing kept, L3 = 0.
const double kE = std::exp(50 * (r3 - 0.5));
const double kL1 = 0.5 * std::log(2.0) + std::log(2.0 + kE) / 50;
const double kL2 = 0.5 * std::log(1.0 + std::exp(-2 * (r3 - 0.5))) + std::log(1.0 + kE) / 50;

}  // namespace

TEST(MultiSimilarity, HandValuesOnSimilarityMatrix) {
  kernels::MultiSimilarityParams P;  // alpha 2, beta 50, base 0.5, epsilon 0.1
  auto r = kernels::multi_similarity_terms(P, four_sim(), four_labels(), kernels::Reduction::Mean);
  auto st = r.stats.to_double_vector();
  // Tolerances: a few float64 roundings of exp/log of values below e^20.
  EXPECT_NEAR(st[0], (kL1 + kL2) / 4, 1e-13);
  EXPECT_EQ(st[1], 5);                                // kept: row 1 three, row 2 two
  EXPECT_NEAR(st[2], (0.5 + r3) / 2, 1e-15);          // kept positives 0.5 (1,0) and r3 (2,3)
  EXPECT_NEAR(st[3], (r3 + 0.5 + r3) / 3, 1e-15);     // kept negatives (1,2), (1,3), (2,1)
  EXPECT_NEAR(st[4], 0.25, 0);
  // dL_i/dS_ij before the 1/B of the mean: softmax weights of the kept pairs.
  auto g = r.grad.to_double_vector();
  auto G = [&](int i, int j) { return g[i * 4 + j]; };
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(G(0, j), 0.0);
    EXPECT_EQ(G(3, j), 0.0);
  }
  EXPECT_NEAR(G(1, 0), -1.0 / 2.0, 1e-14);            // -e^0 / (1 + e^0)
  EXPECT_NEAR(G(1, 2), kE / (2.0 + kE), 1e-14);
  EXPECT_NEAR(G(1, 3), 1.0 / (2.0 + kE), 1e-14);
  const double ep = std::exp(-2 * (r3 - 0.5));
  EXPECT_NEAR(G(2, 3), -ep / (1.0 + ep), 1e-14);
  EXPECT_NEAR(G(2, 1), kE / (1.0 + kE), 1e-14);
  EXPECT_EQ(G(2, 0), 0.0);                            // negative dropped by the miner
  // Reductions: Sum and MeanNonZero (two rows have kept pairs).
  auto rs = kernels::multi_similarity_terms(P, four_sim(), four_labels(), kernels::Reduction::Sum);
  EXPECT_NEAR(rs.stats.to_double_vector()[0], kL1 + kL2, 1e-13);
  auto rn = kernels::multi_similarity_terms(P, four_sim(), four_labels(), kernels::Reduction::MeanNonZero);
  EXPECT_NEAR(rn.stats.to_double_vector()[0], (kL1 + kL2) / 2, 1e-13);
}

TEST(MultiSimilarity, HandValuesWithoutMiner) {
  kernels::MultiSimilarityParams P;
  P.mine = false;  // every pair: pml's MultiSimilarityLoss without a miner
  auto r = kernels::multi_similarity_terms(P, four_sim(), four_labels(), kernels::Reduction::Mean);
  const double b = 0.5;
  auto pos = [&](double s) { return std::exp(-2 * (s - b)); };
  auto neg = [&](double s) { return std::exp(50 * (s - b)); };
  const double L0 = std::log(1 + pos(0.5)) / 2 + std::log(1 + neg(0) + neg(-0.5)) / 50;
  const double L1 = std::log(1 + pos(0.5)) / 2 + std::log(1 + neg(r3) + neg(0.5)) / 50;
  const double L2 = std::log(1 + pos(r3)) / 2 + std::log(1 + neg(0) + neg(r3)) / 50;
  const double L3 = std::log(1 + pos(r3)) / 2 + std::log(1 + neg(-0.5) + neg(0.5)) / 50;
  auto st = r.stats.to_double_vector();
  EXPECT_NEAR(st[0], (L0 + L1 + L2 + L3) / 4, 1e-13);
  EXPECT_EQ(st[1], 12);  // every off-diagonal entry
}

TEST(MultiSimilarity, RegistryLossFromEmbeddings) {
  // Through the registry and the cosine similarity of the embeddings: same value.
  auto loss = nn::make_loss("multi-similarity");
  EXPECT_EQ(loss->tuples(), nn::TupleKind::None);
  ag::Variable e(four_embeddings(), true);
  nn::LossOutput out = loss->compute(e, four_labels(), nn::Mined{});
  // The cosines of the unit vectors are exact up to a few ulps (S feeds exp(50 S)).
  EXPECT_NEAR(out.loss.data().item(), (kL1 + kL2) / 4, 1e-12);
  out.loss.backward();
  for (double v : e.grad().to_double_vector()) EXPECT_TRUE(std::isfinite(v));
}

TEST(MultiSimilarity, MinerAloneHandPairs) {
  // The kept pairs worked out above, row-major: row 1 keeps (1,0)+, (1,2)-, (1,3)-;
  // row 2 keeps (2,1)-, (2,3)+; rows 0 and 3 keep nothing.
  auto want_pairs = std::vector<int64_t>{1, 0, 1, 2, 1, 3, 2, 1, 2, 3};
  auto want_pos = std::vector<int64_t>{1, 0, 0, 0, 1};
  auto k = kernels::multi_similarity_mine(four_sim(), four_labels(), 0.1);
  EXPECT_EQ(k.pairs.shape(), (Shape{5, 2}));
  EXPECT_EQ(k.pairs.to_vector<int64_t>(), want_pairs);
  EXPECT_EQ(k.is_pos.to_vector<int64_t>(), want_pos);
  // The miner module takes the cosine distance 1 - S (what the Objective passes it).
  auto m = nn::make_miner("multi-similarity");
  ASSERT_TRUE(m->distance().has_value());
  EXPECT_EQ(*m->distance(), kernels::Pairwise::Cosine);
  Tensor dist = kernels::pairwise_distance_forward(kernels::Pairwise::Cosine, four_embeddings(),
                                                   four_embeddings()).out;
  nn::Mined got = m->mine(dist, four_labels());
  EXPECT_EQ(got.kind, nn::TupleKind::Pairs);
  EXPECT_EQ(got.pairs.to_vector<int64_t>(), want_pairs);
  EXPECT_EQ(got.is_pos.to_vector<int64_t>(), want_pos);
  // A large epsilon keeps every off-diagonal pair.
  EXPECT_EQ(kernels::multi_similarity_mine(four_sim(), four_labels(), 10.0).pairs.size(0), 12);
}

TEST(MultiSimilarity, Gradcheck) {
  const int64_t B = 8, D = 4;
  Tensor labels = Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0, 3}, {B});
  for (double beta : {50.0, 10.0})   // pml's default, and a softer one
  for (double eps : {0.1, -1.0}) {  // with and without the miner
    for (auto red : {nn::Reduction::Mean, nn::Reduction::MeanNonZero, nn::Reduction::Sum}) {
      SCOPED_TRACE("beta " + std::to_string(beta) + " epsilon " + std::to_string(eps) + " reduction " +
                   std::to_string(static_cast<int>(red)));
      nn::LossConfig c;
      c.ms_epsilon = eps;
      c.reduction = red;
      c.ms_beta = beta;
      auto loss = nn::make_loss("multi-similarity", c);
      auto r = ag::gradcheck(
          [&](const std::vector<ag::Variable>& v) { return loss->compute(v[0], labels, {}).loss; },
          {test::randn({B, D}, DType::F64, Device::cpu(), 21)});
      EXPECT_TRUE(r.ok) << r.message;
    }
  }
}

TEST(MultiSimilarity, IdenticalEmbeddingsFinite) {
  Tensor e = Tensor::full({6, 3}, 0.7, DType::F64);
  Tensor labels = Tensor::from_vector(std::vector<int64_t>{0, 0, 1, 1, 2, 2}, {6});
  for (double eps : {0.1, -1.0}) {
    nn::LossConfig c;
    c.ms_epsilon = eps;
    ag::Variable v(e, true);
    auto out = nn::make_loss("multi-similarity", c)->compute(v, labels, {});
    EXPECT_TRUE(std::isfinite(out.loss.data().item()));
    out.loss.backward();
    for (double g : v.grad().to_double_vector()) EXPECT_TRUE(std::isfinite(g));
  }
}

TEST(MultiSimilarity, RejectsBadInputs) {
  kernels::MultiSimilarityParams P;
  EXPECT_THROW(kernels::multi_similarity_terms(P, Tensor::zeros({3, 4}, DType::F64), four_labels(),
                                               kernels::Reduction::Mean),
               Error);
  EXPECT_THROW(kernels::multi_similarity_terms(P, four_sim(), Tensor::zeros({3}, DType::I64),
                                               kernels::Reduction::Mean),
               Error);
}

TEST(MultiSimilarity, CpuGpuParity) {
  MN_SKIP_IF_NO_CUDA();
  const int64_t B = 48, D = 24;
  std::vector<int64_t> lv;
  for (int64_t i = 0; i < B; ++i) lv.push_back(i % 7);
  Tensor labels = Tensor::from_vector(lv, {B});
  for (DType dt : {DType::F32, DType::F64}) {
    for (double eps : {0.1, -1.0}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " epsilon " + std::to_string(eps));
      nn::LossConfig c;
      c.ms_epsilon = eps;
      auto loss = nn::make_loss("multi-similarity", c);
      Tensor x = test::randn({B, D}, dt, Device::cpu(), 33);
      ag::Variable vc(x, true), vg(x.cuda(), true);
      auto oc = loss->compute(vc, labels, {});
      auto og = loss->compute(vg, labels.cuda(), {});
      oc.loss.backward();
      og.loss.backward();
      // float32: exp(50 s) amplifies the ~1e-7 rounding of s; float64: summation order only.
      const double tol = dt == DType::F32 ? 2e-4 : 1e-10;
      EXPECT_TRUE(test::all_close(oc.stats, og.stats.cpu(), tol, tol));
      EXPECT_TRUE(test::all_close(vc.grad(), vg.grad().cpu(), tol, tol));
    }
    // The miner alone: the same pairs (float64 similarities far from the thresholds).
    if (dt == DType::F64) {
      Tensor x = test::randn({B, D}, dt, Device::cpu(), 34);
      Tensor S = kernels::pairwise_distance_forward(kernels::Pairwise::Cosine, x, x).out;
      auto mc = kernels::multi_similarity_mine(S, labels, 0.1);
      auto mg = kernels::multi_similarity_mine(S.cuda(), labels.cuda(), 0.1);
      EXPECT_EQ(mc.pairs.to_vector<int64_t>(), mg.pairs.cpu().to_vector<int64_t>());
      EXPECT_EQ(mc.is_pos.to_vector<int64_t>(), mg.is_pos.cpu().to_vector<int64_t>());
      EXPECT_GT(mc.pairs.size(0), 0);
    }
  }
}
