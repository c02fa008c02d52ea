// Miner modules (nn/miners/miner.h) against the kernels they wrap, and the
// Objective (nn/objective.h) against the hand-composed distance -> miner -> loss.
#include <gtest/gtest.h>

#include "autograd/ops.h"
#include "autograd/ops_matmul.h"
#include "nn/objective.h"
#include "runtime/graph.h"
#include "tests/common/test_util.h"

using namespace mn;
using namespace mn::nn;

namespace {
Tensor pk_labels(int64_t P, int64_t K) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < P * K; ++i) v.push_back(i % P);
  return Tensor::from_vector(v, {P * K});
}
void expect_same_index(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.defined(), b.defined());
  if (!a.defined()) return;
  EXPECT_EQ(a.shape(), b.shape());
  EXPECT_EQ(a.to_vector<int64_t>(), b.to_vector<int64_t>());
}
}  // namespace

TEST(Miners, ModulesMatchKernels) {
  Tensor e = test::randn({12, 5}, DType::F64, Device::cpu(), 3);
  Tensor labels = pk_labels(4, 3);
  Tensor dist = kernels::pairwise_distance_matrix(e, true);
  MinerConfig cfg;
  cfg.margin = 0.5;
  cfg.k = 2;
  using K = kernels::MinerKind;
  struct Case {
    const char* name;
    K kind;
    bool violating;
    kernels::SemiHardFallback fb;
    kernels::KMiner km;
  };
  const Case cases[] = {
      {"all-triplets", K::AllTriplets, false, kernels::SemiHardFallback::Drop, kernels::KMiner::BH},
      {"violating-triplets", K::AllTriplets, true, kernels::SemiHardFallback::Drop, kernels::KMiner::BH},
      {"batch-hard", K::BatchHard, false, kernels::SemiHardFallback::Drop, kernels::KMiner::BH},
      {"semi-hard", K::SemiHard, false, kernels::SemiHardFallback::Drop, kernels::KMiner::BH},
      {"semi-hard-or-hardest", K::SemiHard, false, kernels::SemiHardFallback::Hardest, kernels::KMiner::BH},
      {"random-violating", K::RandomViolating, false, kernels::SemiHardFallback::Drop, kernels::KMiner::BH},
      {"random-semi-hard", K::RandomSemiHard, false, kernels::SemiHardFallback::Drop, kernels::KMiner::BH},
      {"k-bsh", K::KTriplets, false, kernels::SemiHardFallback::Drop, kernels::KMiner::BSH},
      {"k-ns", K::KTriplets, false, kernels::SemiHardFallback::Drop, kernels::KMiner::NS},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    kernels::MinerParams p;
    p.kind = c.kind;
    p.margin = 0.5;
    p.only_violating = c.violating;
    p.fallback = c.fb;
    p.kminer = c.km;
    p.k = 2;
    Generator g1(5), g2(5);
    kernels::MinedTriplets want = kernels::mine_triplets(dist, labels, p, &g1);
    auto m = make_miner(c.name, cfg);
    EXPECT_EQ(m->output(), TupleKind::Triplets);
    Mined got = m->mine(dist, labels, &g2);
    EXPECT_EQ(got.kind, TupleKind::Triplets);
    expect_same_index(want.triplets, got.triplets);
    expect_same_index(want.pairs, got.pairs);
    EXPECT_EQ(got.count(), want.triplets.size(0));
    EXPECT_EQ(g1.offset(), g2.offset());
  }
  for (auto [name, neg] : {std::pair{"pairs-random", kernels::PairNegatives::Random},
                           std::pair{"pairs-hard-negative", kernels::PairNegatives::Hardest}}) {
    SCOPED_TRACE(name);
    Generator g1(6), g2(6);
    kernels::MinedPairs want = kernels::mine_pairs(dist, labels, neg, &g1);
    Mined got = make_miner(name)->mine(dist, labels, &g2);
    EXPECT_EQ(got.kind, TupleKind::Pairs);
    expect_same_index(want.pairs, got.pairs);
    expect_same_index(want.is_pos, got.is_pos);
  }
}

TEST(Miners, AllPairs) {
  Tensor labels = Tensor::from_vector(std::vector<int64_t>{3, 1, 3, 2, 1}, {5});
  Mined m = make_miner("all-pairs")->mine(Tensor::zeros({5, 5}, DType::F32), labels);
  ASSERT_EQ(m.count(), 10);
  auto p = m.pairs.to_vector<int64_t>();
  auto pos = m.is_pos.to_vector<int64_t>();
  auto lv = labels.to_vector<int64_t>();
  int64_t k = 0;
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = i + 1; j < 5; ++j, ++k) {
      EXPECT_EQ(p[2 * k], i);
      EXPECT_EQ(p[2 * k + 1], j);
      EXPECT_EQ(pos[k], lv[i] == lv[j] ? 1 : 0) << i << "," << j;
    }
}

TEST(Objective, MatchesHandComposition) {
  Tensor x = test::randn({12, 5}, DType::F64, Device::cpu(), 8);
  Tensor labels = pk_labels(4, 3);
  // By hand: squared distances -> batch-hard -> Schroff (mean).
  Variable e1(x, true);
  kernels::MinerParams mp;
  mp.kind = kernels::MinerKind::BatchHard;
  auto mined = kernels::mine_triplets(kernels::pairwise_distance_matrix(x, true), labels, mp);
  TripletLossOptions o;
  o.margin = 0.3;
  LossOutput want = triplet_loss(e1, mined.triplets, o);
  want.loss.backward();
  // Through the objective.
  LossConfig lc;
  lc.margin = 0.3;
  Objective obj = Objective::from_names("schroff", "batch-hard", lc);
  Variable e2(x, true);
  ObjectiveOutput got = obj(e2, labels);
  got.loss.backward();
  EXPECT_EQ(got.loss.data().item(), want.loss.data().item());
  EXPECT_TRUE(test::all_close(e1.grad(), e2.grad(), 0, 0));
  EXPECT_EQ(got.tuples, 12);
  auto st = got.named_stats();
  ASSERT_EQ(st.size(), 6u);
  auto h = want.host_stats();
  EXPECT_EQ(st[0].first, "loss");
  EXPECT_EQ(st[0].second, h.loss);
  EXPECT_EQ(st[1].second, h.active);
  EXPECT_EQ(st[3].second, h.active / 12.0);
  EXPECT_EQ(st[4].second, h.mean_pos);
  EXPECT_EQ(st[5].second, h.mean_neg);
}

TEST(Objective, PairLossesAndMultiSimilarity) {
  Tensor x = test::randn({9, 4}, DType::F64, Device::cpu(), 9);
  Tensor labels = pk_labels(3, 3);
  // Contrastive (Hadsell) over all pairs equals the pair-list loss with Y = 1 - is_pos.
  Objective obj = Objective::from_names("contrastive-hadsell", "all-pairs");
  Variable e(x, true);
  auto out = obj(e, labels);
  Mined m = obj.miner().mine(obj.mining_distance(e), labels);
  std::vector<int64_t> y;
  for (int64_t v : m.is_pos.to_vector<int64_t>()) y.push_back(1 - v);
  Variable e2(x, true);
  auto want = contrastive_loss(e2, m.pairs, Tensor::from_vector(y, {m.count()}), ContrastiveOptions{});
  EXPECT_NEAR(out.loss.data().item(), want.loss.data().item(), 1e-15);
  EXPECT_EQ(out.tuples, 36);
  // Multi-similarity uses the whole batch with the "none" miner.
  Objective ms = Objective::from_names("multi-similarity", "none");
  Variable e3(x, true);
  auto mo = ms(e3, labels);
  mo.loss.backward();
  EXPECT_EQ(mo.tuples, 72);  // ordered pairs of the batch
  EXPECT_TRUE(std::isfinite(mo.loss.data().item()));
  EXPECT_TRUE(e3.has_grad());
  // The MS miner feeding another pair loss (pml: MultiSimilarityMiner + ContrastiveLoss).
  Objective msc = Objective::from_names("contrastive-sampling", "multi-similarity");
  Variable e4(x, true);
  auto co = msc(e4, labels);
  co.loss.backward();
  EXPECT_GT(co.tuples, 0);
  EXPECT_TRUE(e4.has_grad());
  Mined mm = msc.miner().mine(msc.mining_distance(e4), labels);
  EXPECT_EQ(mm.count(), co.tuples);
}

TEST(Objective, LmnnMinesInTransformedSpace) {
  Tensor x = test::randn({12, 4}, DType::F64, Device::cpu(), 12);
  Tensor labels = pk_labels(4, 3);
  Variable L(test::randn({4, 2}, DType::F64, Device::cpu(), 13), true);
  LossConfig lc;
  lc.lmnn_metric = L;
  lc.lmnn_c = 0.5;
  MinerConfig mc;
  mc.k = 2;
  Objective obj = Objective::from_names("lmnn", "k-bh", lc, mc);
  Variable e(x, true);
  auto out = obj(e, labels);
  out.loss.backward();
  // By hand: mine on Z = X L, then the LMNN loss.
  Tensor z = ag::matmul(Variable(x), Variable(L.data())).data();
  kernels::MinerParams mp;
  mp.kind = kernels::MinerKind::KTriplets;
  mp.kminer = kernels::KMiner::BH;
  mp.k = 2;
  mp.margin = 0.2;
  auto mined = kernels::mine_triplets(kernels::pairwise_distance_matrix(z, true), labels, mp);
  auto want = lmnn_loss(Variable(x), Variable(L.data()), mined.pairs, mined.triplets, 0.5);
  EXPECT_EQ(out.tuples, mined.triplets.size(0));
  EXPECT_NEAR(out.loss.data().item(), want.loss.data().item(), 1e-12);
  EXPECT_TRUE(L.has_grad());
  // The k-miner at a fixed size (padded lists, counts on the device): the same loss and gradients.
  mc.fixed_size = true;
  Variable Lf(L.data().clone(), true);
  lc.lmnn_metric = Lf;
  Objective fixed = Objective::from_names("lmnn", "k-bh", lc, mc);
  Variable ef(x, true);
  auto fo = fixed(ef, labels);
  fo.loss.backward();
  EXPECT_EQ(fo.tuples, -1);
  EXPECT_TRUE(test::all_close(out.stats, fo.stats, 1e-14, 1e-12));
  EXPECT_TRUE(test::all_close(e.grad(), ef.grad(), 1e-14, 1e-12));
  EXPECT_TRUE(test::all_close(L.grad(), Lf.grad(), 1e-14, 1e-12));
}

TEST(Objective, MismatchAndEmptyBatch) {
  // A triplet loss needs a triplet miner.
  EXPECT_THROW(Objective::from_names("schroff", "all-pairs"), Error);
  EXPECT_THROW(Objective::from_names("multi-similarity", "batch-hard"), Error);
  EXPECT_THROW(Objective::from_names("multi-similarity", "multi-similarity"), Error);
  EXPECT_THROW(Objective::from_names("no-such-loss", "batch-hard"), Error);
  // Every label distinct: no positive, nothing mined -> zero loss, zero gradient.
  Objective obj = Objective::from_names("schroff", "batch-hard");
  Variable e(test::randn({4, 3}, DType::F64, Device::cpu(), 10), true);
  auto out = obj(e, Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 3}, {4}));
  EXPECT_EQ(out.tuples, 0);
  EXPECT_EQ(out.loss.data().item(), 0.0);
  out.loss.backward();
  for (double g : e.grad().to_double_vector()) EXPECT_EQ(g, 0.0);
  EXPECT_EQ(out.named_stats()[1].second, 0.0);
}

// MinerConfig::fixed_size: the same loss, gradient and stats as the exact lists
// for every triplet miner with a per-term loss and for the pair miners with the
// contrastive loss; the count stays on the device (named_stats reads it); the
// step audits clean where the miner draws nothing at random; the k-miners and
// the batch-mean losses refuse it.
TEST(Objective, FixedSizeMinersGiveTheExactListsResults) {
  Tensor x = test::randn({12, 5}, DType::F64, Device::cpu(), 21);
  Tensor labels = pk_labels(4, 3);
  MinerConfig fixed;
  fixed.fixed_size = true;
  fixed.margin = 0.4;
  MinerConfig exact;
  exact.margin = 0.4;
  struct Case {
    const char *loss, *miner;
    bool deterministic;
  };
  for (const Case& c : {Case{"schroff", "batch-hard", true}, Case{"margin-l2", "semi-hard", true},
                        Case{"schroff", "violating-triplets", true}, Case{"soft-margin", "random-violating", false},
                        Case{"contrastive-sampling", "pairs-random", false},
                        Case{"contrastive-hadsell", "pairs-hard-negative", true},
                        Case{"contrastive-sampling", "multi-similarity", true}}) {
    SCOPED_TRACE(std::string(c.loss) + " + " + c.miner);
    Objective a = Objective::from_names(c.loss, c.miner, {}, exact), b = Objective::from_names(c.loss, c.miner, {}, fixed);
    Variable ea(x, true), eb(x, true);
    Generator ga(3), gb(3);
    ObjectiveOutput oa = a(ea, labels, &ga);
    ObjectiveOutput ob;
    {
      StepAudit audit;
      ob = b(eb, labels, &gb);
      if (c.deterministic) {
        EXPECT_EQ(audit.reason(), "");
      }
    }
    oa.loss.backward();
    ob.loss.backward();
    EXPECT_EQ(ob.tuples, -1);
    EXPECT_TRUE(test::all_close(oa.stats, ob.stats, 1e-14, 1e-12));
    EXPECT_TRUE(test::all_close(ea.grad(), eb.grad(), 1e-14, 1e-12));
    const auto sa = oa.named_stats(), sb = ob.named_stats();
    EXPECT_EQ(sa[2].second, sb[2].second);  // tuples: the exact count, read from the device
    EXPECT_NEAR(sa[3].second, sb[3].second, 1e-15);
  }
  EXPECT_THROW(Objective::from_names("global", "batch-hard", {}, fixed)(Variable(x, true), labels), Error);
}
