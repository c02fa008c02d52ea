// Tests of the informed-pair-selection study (experiments/pair_selection/):
// pair generation, the DynEE exploit step and the complexity ordering on
// hand-built toy embeddings, the prototype vote, the paired t-test against
// textbook values, the fused siamese MLP's gradients against the autograd tape
// with nn::contrastive_loss, and small end-to-end runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sys/wait.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <tuple>
#include <sstream>

#include "autograd/ops.h"
#include "autograd/ops_layers.h"
#include "autograd/ops_matmul.h"
#include "experiments/common/flags.h"
#include "experiments/pair_selection/export.h"
#include "experiments/pair_selection/options.h"
#include "experiments/pair_selection/pairs.h"
#include "experiments/pair_selection/report.h"
#include "experiments/pair_selection/siamese_mlp.h"
#include "experiments/pair_selection/stats.h"
#include "experiments/pair_selection/study.h"
#include "experiments/pair_selection/vote.h"
#include "nn/losses/losses.h"

using namespace mn;
using namespace mn::pairsel;

namespace {
std::vector<int32_t> labels_of(int classes, int per_class) {
  std::vector<int32_t> y;
  for (int i = 0; i < classes * per_class; ++i) y.push_back(i % classes);
  return y;
}
}  // namespace

TEST(PairSelection, RandomPairsAreTwoPerExampleBalancedAndNeverSelf) {
  const auto y = labels_of(10, 7);  // 70 examples
  Generator g(42, 0);
  const auto p = random_pairs(y, g);
  ASSERT_EQ(p.size(), 2 * y.size());  // |P| = 2|X|
  std::vector<int> pivot_genuine(y.size(), 0), pivot_impostor(y.size(), 0);
  size_t genuine = 0;
  for (const Pair& q : p) {
    EXPECT_NE(q.a, q.b);
    EXPECT_EQ(q.impostor, y[q.a] != y[q.b] ? 1 : 0);
    (q.impostor ? pivot_impostor : pivot_genuine)[q.a] += 1;
    genuine += q.impostor == 0;
  }
  EXPECT_EQ(genuine, y.size());  // exactly half genuine
  for (size_t i = 0; i < y.size(); ++i) {
    EXPECT_EQ(pivot_genuine[i], 1) << i;
    EXPECT_EQ(pivot_impostor[i], 1) << i;
  }
  // Partners are spread, not always the same one: with 6 possible genuine
  // partners per pivot, 70 draws must hit more than one partner position.
  std::set<int32_t> partners;
  for (const Pair& q : p)
    if (!q.impostor && y[q.a] == 0) partners.insert(q.b);
  EXPECT_GT(partners.size(), 1u);
  // A class of one example cannot have a genuine partner.
  EXPECT_THROW(random_pairs({0, 1, 1}, g), Error);
}

TEST(PairSelection, StratifiedSampleHasExactSizeAndClassShares) {
  std::vector<int32_t> y;
  const int counts[3] = {5923, 6742, 3335};  // shares 0.37, 0.42, 0.21 of 16,000
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < counts[c]; ++i) y.push_back(c);
  Generator g(1, 0);
  const auto s = stratified_sample(y, 160, g);
  ASSERT_EQ(s.size(), 160u);
  int per[3] = {0, 0, 0};
  for (size_t i = 0; i < s.size(); ++i) {
    ++per[y[s[i]]];
    if (i) {
      EXPECT_LT(s[i - 1], s[i]);  // ascending, distinct
    }
  }
  // 160 * shares = 59.23, 67.42, 33.35: floors 59, 67, 33 (159), the largest
  // remainder (class 1, 0.42) takes the last one.
  EXPECT_EQ(per[0], 59);
  EXPECT_EQ(per[1], 68);
  EXPECT_EQ(per[2], 33);
  Generator g2(1, 0);
  EXPECT_EQ(stratified_sample(y, 160, g2), s);  // seeded
}

TEST(PairSelection, NearestNeighboursOnALine) {
  // Points on a line at 0, 1, 3, 7, 7.5 (d = 1).
  const std::vector<float> x = {0.f, 1.f, 3.f, 7.f, 7.5f};
  const auto nn1 = nearest_neighbours(x.data(), 5, 1, 1, false);
  EXPECT_EQ(nn1, (std::vector<int32_t>{1, 0, 1, 4, 3}));
  const auto knn = nearest_neighbours(x.data(), 5, 1, 3, true);
  // Self first, then the two nearest others.
  EXPECT_EQ(knn, (std::vector<int32_t>{0, 1, 2, /**/ 1, 0, 2, /**/ 2, 1, 0, /**/ 3, 4, 2,
                                       /**/ 4, 3, 2}));
}

TEST(PairSelection, ExploitReplacesHighestLossPairsByNeighbourPairs) {
  // Six examples on a line: 0 (class 0) at 0, 1 (class 0) at 1, 2 (class 1) at
  // 5, 3 (class 1) at 6, 4 (class 0) at 10, 5 (class 1) at 10.5.
  const std::vector<int32_t> y = {0, 0, 1, 1, 0, 1};
  const std::vector<float> x = {0.f, 1.f, 5.f, 6.f, 10.f, 10.5f};
  const auto nn = nearest_neighbours(x.data(), 6, 1, 2, false);
  std::vector<int32_t> nn1(6), nn2(6);
  for (int i = 0; i < 6; ++i) {
    nn1[i] = nn[i * 2];
    nn2[i] = nn[i * 2 + 1];
  }
  // By hand: nn1 = 1, 0, 3, 2, 5, 4; nn2 = 2, 2, 1, 4, 3, 3.
  ASSERT_EQ(nn1, (std::vector<int32_t>{1, 0, 3, 2, 5, 4}));
  ASSERT_EQ(nn2, (std::vector<int32_t>{2, 2, 1, 4, 3, 3}));
  const std::vector<Pair> current = {{0, 2, 1}, {1, 0, 0}, {4, 2, 1}, {3, 5, 0}};
  const std::vector<float> loss = {0.1f, 0.9f, 0.2f, 0.9f};
  // b = 2: the two losses of 0.9, the earlier first: pair 1 (1, 0) -> (nn1 1 =
  // 0, nn1 0 = 1) = (0, 1) genuine; pair 3 (3, 5) -> (2, 4) impostor.
  std::vector<Pair> explore = {{0, 1, 0}, {2, 3, 0}, {4, 5, 1}, {5, 0, 1}};
  Generator g(3, 0);
  const auto out = exploit_pairs(current, loss, 2, nn1, nn2, y, explore, g);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].a, 0);
  EXPECT_EQ(out[0].b, 1);
  EXPECT_EQ(out[0].impostor, 0);
  EXPECT_EQ(out[1].a, 2);
  EXPECT_EQ(out[1].b, 4);
  EXPECT_EQ(out[1].impostor, 1);
  // The other two are two distinct members of `explore`, in their order.
  int found = 0, last = -1;
  for (int i = 2; i < 4; ++i)
    for (int e = 0; e < 4; ++e)
      if (out[i].a == explore[e].a && out[i].b == explore[e].b) {
        EXPECT_GT(e, last);
        last = e;
        ++found;
      }
  EXPECT_EQ(found, 2);
  // Both members sharing one nearest neighbour: points at 0, 1, 2.2 (classes
  // 0, 0, 1): nn1(0) = 1 and nn1(2) = 1, so (0, 2) would become the self-pair
  // (1, 1); the second member takes its second neighbour, 0: (1, 0), genuine.
  const std::vector<float> x3 = {0.f, 1.f, 2.2f};
  const auto nn3 = nearest_neighbours(x3.data(), 3, 1, 2, false);
  ASSERT_EQ(nn3, (std::vector<int32_t>{1, 2, /**/ 0, 2, /**/ 1, 0}));
  const auto out2 = exploit_pairs({{0, 2, 1}}, {1.0f}, 1, {1, 0, 1}, {2, 2, 0}, {0, 0, 1},
                                  {{0, 1, 0}}, g);
  ASSERT_EQ(out2.size(), 1u);
  EXPECT_EQ(out2[0].a, 1);
  EXPECT_EQ(out2[0].b, 0);
  EXPECT_EQ(out2[0].impostor, 0);
}

TEST(PairSelection, ComplexityOrderEasiestFirst) {
  // Five examples, classes 0, 0, 1, 1, 2; k = 2 neighbourhoods (self first)
  // given by hand: N(0) = {0, 1}, N(1) = {1, 0}, N(2) = {2, 4}, N(3) = {3, 0},
  // N(4) = {4, 2}.
  const std::vector<int32_t> y = {0, 0, 1, 1, 2};
  const std::vector<int32_t> knn = {0, 1, 1, 0, 2, 4, 3, 0, 4, 2};
  const std::vector<Pair> p = {
      {2, 3, 0},  // classes {1,2} x {1,0}: 1 genuine of 4 agrees -> 2 / 4 = 0.5
      {0, 1, 0},  // {0,0} x {0,0}: 4 agree -> 5
      {0, 2, 1},  // {0,0} x {1,2}: 4 impostor, agree -> 5
      {3, 4, 1},  // {1,0} x {2,1}: 3 impostor agree, 1 genuine -> 4 / 2 = 2
      {1, 3, 1},  // {0,0} x {1,0}: 2 agree, 2 disagree -> 1
  };
  const auto c = pair_complexity(p, knn, 2, y);
  const std::vector<double> want = {0.5, 5.0, 5.0, 2.0, 1.0};
  ASSERT_EQ(c.size(), want.size());
  for (size_t i = 0; i < c.size(); ++i) EXPECT_DOUBLE_EQ(c[i], want[i]) << i;
  const auto o = order_by_complexity(p, c);
  // Descending, ties in the given order: p1, p2, p3, p4, p0.
  const int want_a[] = {0, 0, 3, 1, 2}, want_b[] = {1, 2, 4, 3, 3};
  ASSERT_EQ(o.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(o[i].a, want_a[i]) << i;
    EXPECT_EQ(o[i].b, want_b[i]) << i;
  }
}

TEST(PairSelection, VoteWeightsWithinMarginAndAbstains) {
  const std::vector<int32_t> cls3 = {0, 1, 2};
  const float d1[] = {0.5f, 0.2f, 1.5f};
  EXPECT_EQ(vote_class(d1, cls3, 1.0), 1);
  const float d2[] = {1.2f, 1.0f, 3.0f};  // none strictly within M = 1
  EXPECT_EQ(vote_class(d2, cls3, 1.0), -1);
  const float d3[] = {0.5f, 0.0f, 0.1f};  // D = 0 wins outright
  EXPECT_EQ(vote_class(d3, cls3, 1.0), 1);
  // Two prototypes of class 0 (1/0.4 + 1/0.5 = 4.5) outvote a nearer class-1
  // one (1/0.3 = 3.33): the weighted vote of Eq. 5, not the nearest prototype.
  const float d4[] = {0.4f, 0.5f, 0.3f};
  EXPECT_EQ(vote_class(d4, {0, 0, 1}, 1.0), 0);

  // 1-d embeddings: prototypes at 0 (class 0) and 10 (class 1), M = 1.
  const std::vector<float> proto = {0.f, 10.f};
  const std::vector<float> q = {0.5f, 9.8f, 5.0f, 0.9f};
  const std::vector<int32_t> lab = {0, 1, 0, 1};
  const VoteResult r = vote_accuracy(q.data(), 4, proto.data(), {0, 1}, 1, lab, 1.0);
  EXPECT_DOUBLE_EQ(r.accuracy, 0.5);          // 0.5 and 9.8 right, 5.0 abstains, 0.9 wrong
  EXPECT_DOUBLE_EQ(r.nearest_accuracy, 0.75);  // 5.0 is nearest to class 0: right
  EXPECT_DOUBLE_EQ(r.abstain_share, 0.25);
  // Centroids of the inputs per class.
  const std::vector<float> x = {1.f, 2.f, 3.f, 4.f, 10.f, 20.f};
  EXPECT_EQ(class_centroids(x.data(), 3, 2, {0, 0, 1}, 2), (std::vector<float>{2.f, 3.f, 10.f, 20.f}));
  EXPECT_THROW(class_centroids(x.data(), 3, 2, {0, 0, 0}, 2), Error);  // class 1 empty
}

TEST(PairSelection, PairedTTestMatchesStudentsSleepData) {
  // Student (1908) / Cushny & Peebles sleep data, R's t.test(paired = TRUE):
  // t = 4.0621, df = 9, two-sided p = 0.002833 (so one-sided 0.0014165).
  const std::vector<double> g1 = {0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0};
  const std::vector<double> g2 = {1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4};
  const TTest r = paired_t_test(g2, g1);
  EXPECT_NEAR(r.t, 4.0621, 5e-5);  // R prints 5 significant digits
  EXPECT_DOUBLE_EQ(r.df, 9.0);
  EXPECT_NEAR(r.p_greater, 0.002833 / 2, 1e-6);  // R prints 4 significant digits
  EXPECT_NEAR(r.p_less, 1.0 - 0.002833 / 2, 1e-6);
  const TTest s = paired_t_test(g1, g2);  // the other direction
  EXPECT_NEAR(s.t, -4.0621, 5e-5);
  EXPECT_NEAR(s.p_greater, r.p_less, 1e-12);
  // Constant differences: no spread, the sign decides.
  const TTest c = paired_t_test({2.0, 3.0}, {1.0, 2.0});
  EXPECT_EQ(c.p_greater, 0.0);
  EXPECT_EQ(c.p_less, 1.0);
  EXPECT_THROW(paired_t_test({1.0}, {2.0}), Error);
}

class PairSelectionMlp : public ::testing::TestWithParam<bool> {};

TEST_P(PairSelectionMlp, FusedGradientsMatchAutogradWithContrastiveLoss) {
  // A small net (6 -> 5 -> 4, margin 2 so impostor pairs are inside the
  // margin), dropout off; gradients of every weight and bias against the tape
  // through nn::contrastive_loss (Hadsell form, mean) in float32. With the
  // parameter, 2 of 3 inputs are zero so the first layer takes the sparse path.
  const bool sparse = GetParam();
  MlpConfig cfg;
  cfg.input = 6;
  cfg.hidden = {5, 4};
  cfg.batch = 4;
  cfg.margin = 2.0;
  SiameseMlp net(cfg, 7);
  const int64_t nb = 4, in = 6;
  std::vector<float> left(nb * in), right(nb * in);
  Generator g(11, 0);
  int64_t zeros = 0;
  for (auto* xs : {&left, &right})
    for (size_t i = 0; i < xs->size(); ++i) {
      (*xs)[i] = sparse && i % 3 != 0 ? 0.0f : static_cast<float>(0.1 + g.next_uniform());
      zeros += (*xs)[i] == 0.0f;
    }
  EXPECT_EQ(zeros, sparse ? 32 : 0);
  const uint8_t imp[nb] = {0, 1, 1, 0};
  const double loss = net.forward_backward(left.data(), right.data(), imp, nb, false);

  std::vector<ag::Variable> W, B;
  std::vector<int64_t> dims = {6, 5, 4};
  for (size_t l = 0; l < 2; ++l) {
    W.emplace_back(Tensor::from_vector(net.weight(l), {dims[l], dims[l + 1]}), true);
    B.emplace_back(Tensor::from_vector(net.bias(l), {1, dims[l + 1]}), true);
  }
  const ag::Variable ones(Tensor::ones({nb, 1}));
  auto branch = [&](const std::vector<float>& x) {
    ag::Variable h(Tensor::from_vector(x, {nb, in}));
    for (size_t l = 0; l < 2; ++l)
      h = ag::relu(ag::add(ag::matmul(h, W[l]), ag::matmul(ones, B[l])));
    return h;
  };
  const ag::Variable e1 = branch(left), e2 = branch(right);
  nn::ContrastiveOptions opts;
  opts.margin = 2.0;
  const Tensor label = Tensor::from_vector(std::vector<int64_t>{0, 1, 1, 0}, {nb});
  const auto out = nn::contrastive_loss(e1, e2, label, opts);
  out.loss.backward();
  // The impostor terms must be active for the test to cover the hinge.
  const float* a = e1.data().data<float>();
  const float* b = e2.data().data<float>();
  for (int i : {1, 2}) {
    double s = 0;
    for (int j = 0; j < 4; ++j) s += (a[i * 4 + j] - b[i * 4 + j]) * (a[i * 4 + j] - b[i * 4 + j]);
    ASSERT_LT(std::sqrt(s), 2.0) << "impostor pair " << i << " outside the margin";
  }
  // float32 sums of <= 8 products: 1e-5 absolute + 1e-4 relative covers rounding.
  EXPECT_NEAR(loss, out.loss.data().item(), 1e-5 + 1e-4 * std::abs(loss));
  for (size_t l = 0; l < 2; ++l) {
    const float* gw = W[l].grad().data<float>();
    const float* gb = B[l].grad().data<float>();
    for (size_t i = 0; i < net.weight_grad(l).size(); ++i)
      EXPECT_NEAR(net.weight_grad(l)[i], gw[i], 1e-5 + 1e-4 * std::abs(gw[i])) << l << " " << i;
    for (size_t i = 0; i < net.bias_grad(l).size(); ++i)
      EXPECT_NEAR(net.bias_grad(l)[i], gb[i], 1e-5 + 1e-4 * std::abs(gb[i])) << l << " " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(DenseAndSparseInputs, PairSelectionMlp, ::testing::Bool());

// Two training steps of each optimiser against Keras's update rules applied by
// hand to a twin net's gradients: SGD v = mu v - lr g, w += v; RMSprop (Keras
// 1.2) a = rho a + (1 - rho) g^2, w -= lr g / (sqrt(a) + 1e-8).
TEST(PairSelection, OptimisersFollowKerasUpdateRules) {
  for (const bool rms : {false, true}) {
    MlpConfig cfg;
    cfg.input = 6;
    cfg.hidden = {5, 4};
    cfg.batch = 4;
    cfg.margin = 2.0;
    cfg.dropout = 0.0;
    cfg.lr = 0.05;
    cfg.momentum = 0.8;
    cfg.optimizer = rms ? Optimizer::RmsProp : Optimizer::Sgd;
    cfg.rho = 0.9;
    SiameseMlp net(cfg, 7), twin(cfg, 7);
    const int64_t n = 8, in = 6, nb = 4;
    std::vector<float> x(n * in);
    Generator g(13, 0);
    for (float& v : x) v = static_cast<float>(0.1 + g.next_uniform());
    std::vector<Pair> pairs;
    std::vector<float> left, right;
    std::vector<uint8_t> imp;
    for (int32_t i = 0; i < nb; ++i) {
      pairs.push_back(Pair{i, i + 4, static_cast<uint8_t>(i % 2)});
      left.insert(left.end(), x.begin() + i * in, x.begin() + (i + 1) * in);
      right.insert(right.end(), x.begin() + (i + 4) * in, x.begin() + (i + 5) * in);
      imp.push_back(static_cast<uint8_t>(i % 2));
    }
    std::vector<std::vector<float>> sw(2), sb(2);  // optimiser state per layer
    auto update = [&](std::vector<float>& w, std::vector<float>& st, const std::vector<float>& grad) {
      st.resize(w.size(), 0.0f);
      for (size_t i = 0; i < w.size(); ++i) {
        if (rms) {
          st[i] = 0.9f * st[i] + (1.0f - 0.9f) * grad[i] * grad[i];
          w[i] -= 0.05f * grad[i] / (std::sqrt(st[i]) + 1e-8f);
        } else {
          st[i] = 0.8f * st[i] - 0.05f * grad[i];
          w[i] += st[i];
        }
      }
    };
    for (int step = 0; step < 2; ++step) {
      twin.forward_backward(left.data(), right.data(), imp.data(), nb, true);
      for (size_t l = 0; l < 2; ++l) {
        update(twin.weight(l), sw[l], twin.weight_grad(l));
        update(twin.bias(l), sb[l], twin.bias_grad(l));
      }
      net.train_epoch(x.data(), n, pairs);
      for (size_t l = 0; l < 2; ++l) {
        double moved = 0;
        for (size_t i = 0; i < net.weight(l).size(); ++i) {
          EXPECT_NEAR(net.weight(l)[i], twin.weight(l)[i], 1e-6) << (rms ? "rmsprop" : "sgd") << " step " << step;
          moved = std::max(moved, std::abs(double(net.weight(l)[i])));
        }
        for (size_t i = 0; i < net.bias(l).size(); ++i)
          EXPECT_NEAR(net.bias(l)[i], twin.bias(l)[i], 1e-6) << (rms ? "rmsprop" : "sgd") << " step " << step;
        EXPECT_GT(moved, 0.0);
      }
    }
    // The steps changed the biases (zero at initialisation): the test compares updates, not two idle nets.
    double bias_norm = 0;
    for (size_t l = 0; l < 2; ++l)
      for (float v : net.bias(l)) bias_norm += std::abs(v);
    EXPECT_GT(bias_norm, 1e-4) << (rms ? "rmsprop" : "sgd");
  }
}

// RMSprop and Adam against values computed by hand (in double, outside the
// code) for a one-unit net: input 1, one Dense(1) + ReLU, w = 0.5, b = 0.1,
// one genuine pair (x = 1, x' = 0.5), lr 0.01. Both units stay active, so
// e - e' = 0.5 w and dL/dw = 2 (e - e') (1 - 0.5) = 0.5 w (= 0.25 at step 1);
// dL/db = 0 (the bias cancels in e - e').
//   RMSprop (rho 0.9, eps 1e-8): a = 0.1 g^2, w -= lr g / (sqrt(a) + eps):
//     step 1: w = 0.5 - 0.01 / sqrt(0.1)              = 0.46837723
//     step 2: g = 0.23418861, a = 0.9 a1 + 0.1 g^2     -> w = 0.44615847
//   Adam (0.9, 0.999, 1e-8), bias-corrected: step 1 moves w by lr: 0.49;
//     step 2: g = 0.245, m = 0.9 m1 + 0.1 g, v = 0.999 v1 + 0.001 g^2 -> w = 0.48000578
TEST(PairSelection, RmsPropAndAdamMatchHandComputedSteps) {
  struct Case {
    Optimizer opt;
    float w1, w2;
  };
  for (const Case& c : {Case{Optimizer::RmsProp, 0.46837723f, 0.44615847f},
                        Case{Optimizer::Adam, 0.49000000f, 0.48000578f}}) {
    MlpConfig cfg;
    cfg.input = 1;
    cfg.hidden = {1};
    cfg.batch = 1;
    cfg.dropout = 0.0;
    cfg.lr = 0.01;
    cfg.optimizer = c.opt;
    SiameseMlp net(cfg, 3);
    net.weight(0)[0] = 0.5f;
    net.bias(0)[0] = 0.1f;
    const std::vector<float> x = {1.0f, 0.5f};
    const std::vector<Pair> pairs = {Pair{0, 1, 0}};
    net.train_epoch(x.data(), 2, pairs);
    EXPECT_NEAR(net.weight(0)[0], c.w1, 2e-7) << int(c.opt);  // float32 rounding of ~0.5
    EXPECT_NEAR(net.weight_grad(0)[0], 0.25f, 1e-7);
    net.train_epoch(x.data(), 2, pairs);
    EXPECT_NEAR(net.weight(0)[0], c.w2, 3e-7) << int(c.opt);
    EXPECT_NEAR(net.bias(0)[0], 0.1f, 1e-7);  // zero gradient: no move (eps keeps 0 / 0 away)
  }
}

// Every flag of the protocol's open choices reaches the configuration field it names.
TEST(PairSelection, OpenChoiceFlagsReachTheStudyConfig) {
  exp::Flags f("pair_selection", "test");
  declare_study_flags(f);
  const StudyConfig d = study_config(f);  // the settled reading: the defaults
  EXPECT_EQ(d.mlp.optimizer, Optimizer::Sgd);
  EXPECT_EQ(d.mlp.init, Init::Glorot);
  EXPECT_EQ(d.prototype, Prototype::InputCentroid);
  EXPECT_DOUBLE_EQ(d.mlp.dropout, 0.2);
  EXPECT_DOUBLE_EQ(d.mlp.lr, 1e-3);
  EXPECT_DOUBLE_EQ(d.mlp.momentum, 0.8);
  const std::vector<std::pair<std::string, std::string>> set = {
      {"optimizer", "adam"}, {"beta1", "0.7"},   {"beta2", "0.95"}, {"eps", "1e-6"},
      {"rho", "0.8"},        {"init", "torch"},  {"dropout", "0"},  {"lr", "0.02"},
      {"momentum", "0.5"},   {"prototype", "embedding-centroid"}};
  for (const auto& kv : set) f.set(kv.first, kv.second, exp::Flags::Origin::CommandLine, "test");
  const StudyConfig c = study_config(f);
  EXPECT_EQ(c.mlp.optimizer, Optimizer::Adam);
  EXPECT_DOUBLE_EQ(c.mlp.beta1, 0.7);
  EXPECT_DOUBLE_EQ(c.mlp.beta2, 0.95);
  EXPECT_DOUBLE_EQ(c.mlp.eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.mlp.rho, 0.8);
  EXPECT_EQ(c.mlp.init, Init::Torch);
  EXPECT_DOUBLE_EQ(c.mlp.dropout, 0.0);
  EXPECT_DOUBLE_EQ(c.mlp.lr, 0.02);
  EXPECT_DOUBLE_EQ(c.mlp.momentum, 0.5);
  EXPECT_EQ(c.prototype, Prototype::EmbeddingCentroid);
  f.set("optimizer", "rmsprop", exp::Flags::Origin::CommandLine, "test");
  EXPECT_EQ(study_config(f).mlp.optimizer, Optimizer::RmsProp);
  // An unknown choice is refused naming the flag.
  try {
    f.set("init", "he", exp::Flags::Origin::CommandLine, "test");
    FAIL() << "--init he accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("init"), std::string::npos) << e.what();
  }
}

// --init: Glorot-uniform weights with zero biases, or PyTorch's U(+-1/sqrt(fan_in))
// for both; each draw fills its range (max |w| near the bound) and stays inside it.
TEST(PairSelection, InitialisationFollowsTheFlag) {
  for (const Init init : {Init::Glorot, Init::Torch}) {
    MlpConfig cfg;
    cfg.init = init;
    SiameseMlp net(cfg, 5);  // 784 -> 300 -> 300 -> 300
    const int64_t dims[] = {784, 300, 300, 300};
    for (size_t l = 0; l < 3; ++l) {
      const double bound = init == Init::Torch ? 1.0 / std::sqrt(double(dims[l]))
                                               : std::sqrt(6.0 / double(dims[l] + dims[l + 1]));
      double wmax = 0, bmax = 0;
      for (float v : net.weight(l)) wmax = std::max(wmax, std::abs(double(v)));
      for (float v : net.bias(l)) bmax = std::max(bmax, std::abs(double(v)));
      EXPECT_LE(wmax, bound * (1 + 1e-6)) << "layer " << l;
      EXPECT_GT(wmax, 0.99 * bound) << "layer " << l;  // 90,000+ draws: the top 1 % is reached
      if (init == Init::Glorot) {
        EXPECT_EQ(bmax, 0.0) << "layer " << l;
      } else {
        EXPECT_LE(bmax, bound * (1 + 1e-6)) << "layer " << l;
        EXPECT_GT(bmax, 0.9 * bound) << "layer " << l;  // 300 draws: P(all below 0.9) = 0.9^300
      }
    }
  }
}

// --prototype embedding-centroid: each class's prototype is the mean of its
// embedded training rows; input-centroid embeds the class's mean row. Through
// the ReLU net the two differ.
TEST(PairSelection, EmbeddingCentroidPrototypeIsTheMeanOfEmbeddings) {
  MlpConfig cfg;
  cfg.input = 5;
  cfg.hidden = {7, 4};
  cfg.init = Init::Torch;
  SiameseMlp net(cfg, 11);
  Examples ex;
  ex.dim = 5;
  ex.classes = 3;
  Generator g(2, 0);
  for (int i = 0; i < 12; ++i) {
    for (int k = 0; k < 5; ++k) ex.x.push_back(static_cast<float>(2.0 * g.next_uniform() - 0.5));
    ex.y.push_back(i % 3);
  }
  const int64_t E = 4, n = ex.size();
  std::vector<float> emb(n * E);
  net.embed(ex.x.data(), n, emb.data());
  const auto in_cent = class_centroids(ex.x.data(), n, ex.dim, ex.y, ex.classes);
  const auto by_emb = prototypes(net, Prototype::EmbeddingCentroid, ex, in_cent, emb);
  const auto by_in = prototypes(net, Prototype::InputCentroid, ex, in_cent, emb);
  ASSERT_EQ(by_emb.size(), size_t(3 * E));
  double differ = 0;
  for (int c = 0; c < 3; ++c) {
    std::vector<float> one(E);
    net.embed(in_cent.data() + c * ex.dim, 1, one.data());
    for (int64_t j = 0; j < E; ++j) {
      double mean = 0;
      for (int64_t i = c; i < n; i += 3) mean += emb[i * E + j];  // class c: rows c, c + 3, ...
      mean /= 4;
      EXPECT_NEAR(by_emb[c * E + j], mean, 1e-6) << "class " << c;
      EXPECT_NEAR(by_in[c * E + j], one[j], 1e-6) << "class " << c;
      differ = std::max(differ, std::abs(double(by_emb[c * E + j]) - by_in[c * E + j]));
    }
  }
  EXPECT_GT(differ, 1e-3);  // the flag changes the prototypes
  // embedding-centroid without the training embeddings is refused, naming the flag.
  try {
    prototypes(net, Prototype::EmbeddingCentroid, ex, in_cent, {});
    FAIL() << "accepted no embeddings";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("--prototype"), std::string::npos) << e.what();
  }
}

// The trace (--export-trace) records the initial weights and each epoch's pairs:
// BASE trains every epoch on a reshuffle of one set, BASE* on one fixed order.
TEST(PairSelection, RunTraceRecordsInitAndEpochPairs) {
  StudyConfig cfg;
  cfg.mlp.input = 8;
  cfg.mlp.hidden = {6, 5};
  cfg.epochs = 4;
  cfg.cycle = 2;
  cfg.eval_every = 2;
  cfg.knn = 3;
  Examples train, test;
  train.dim = test.dim = 8;
  train.classes = test.classes = 3;
  Generator g(4, 0);
  for (int i = 0; i < 24; ++i) {
    for (int k = 0; k < 8; ++k) train.x.push_back(static_cast<float>(g.next_uniform()));
    train.y.push_back(i % 3);
  }
  test = train;
  auto sorted = [](std::vector<Pair> p) {
    std::sort(p.begin(), p.end(), [](const Pair& x, const Pair& y) {
      return std::tie(x.a, x.b, x.impostor) < std::tie(y.a, y.b, y.impostor);
    });
    return p;
  };
  RunTrace base, ordered;
  run_fold(Method::Base, 0, cfg, train, test, &base);
  run_fold(Method::BaseOrdered, 0, cfg, train, test, &ordered);
  ASSERT_EQ(base.epoch_pairs.size(), 4u);
  ASSERT_EQ(base.weights.size(), 2u);
  EXPECT_EQ(base.weights[0].size(), 8u * 6u);
  EXPECT_EQ(base.weights[0], ordered.weights[0]);  // same fold: same initial weights
  SiameseMlp fresh(cfg.mlp, fold_seed(cfg.seed, 0, 1));
  EXPECT_EQ(base.weights[1], fresh.weight(1));
  const auto first = sorted(base.epoch_pairs[0]);
  bool reshuffled = false;
  for (const auto& ep : base.epoch_pairs) {
    EXPECT_EQ(sorted(ep).size(), first.size());
    const auto s = sorted(ep);
    for (size_t i = 0; i < s.size(); ++i) EXPECT_TRUE(s[i].a == first[i].a && s[i].b == first[i].b);
    reshuffled |= ep[0].a != base.epoch_pairs[0][0].a || ep[1].a != base.epoch_pairs[0][1].a;
  }
  EXPECT_TRUE(reshuffled);
  for (const auto& ep : ordered.epoch_pairs)
    for (size_t i = 0; i < ep.size(); ++i) EXPECT_TRUE(ep[i].a == ordered.epoch_pairs[0][i].a &&
                                                       ep[i].b == ordered.epoch_pairs[0][i].b);
  // Written and read back.
  const std::string dir = testing::TempDir() + "/mn_ps_trace";
  std::filesystem::create_directories(dir);
  export_trace(dir, Method::Base, 0, base, true);
  const auto back = read_trace(dir + "/trace_base_fold0.txt");
  ASSERT_EQ(back.size(), 4u);
  EXPECT_EQ(back[2].size(), base.epoch_pairs[2].size());
  EXPECT_EQ(back[2][5].b, base.epoch_pairs[2][5].b);
  EXPECT_EQ(std::filesystem::file_size(dir + "/init_fold0.bin"), (8u * 6u + 6u + 6u * 5u + 5u) * sizeof(float));
}

namespace {
// Three separable clusters in 8-d: class c lights up inputs 2c, 2c+1, plus noise.
Examples clusters(int n, uint64_t seed) {
  Examples ex;
  ex.dim = 8;
  ex.classes = 3;
  Generator g(seed, 0);
  for (int i = 0; i < n; ++i) {
    const int c = i % 3;
    for (int k = 0; k < 8; ++k)
      ex.x.push_back(static_cast<float>((k / 2 == c ? 0.8 : 0.0) + 0.2 * g.next_uniform()));
    ex.y.push_back(c);
  }
  return ex;
}
}  // namespace

TEST(PairSelection, EveryMethodRunsAndBaseLearnsSeparableClusters) {
  StudyConfig cfg;
  cfg.mlp.input = 8;
  cfg.mlp.hidden = {16, 16, 8};
  cfg.mlp.lr = 0.05;
  cfg.epochs = 6;
  cfg.cycle = 2;
  cfg.eval_every = 2;
  cfg.knn = 3;
  const Examples train = clusters(30, 1), test = clusters(60, 2);
  std::vector<RunResult> runs;
  for (int fold = 0; fold < 2; ++fold)
    for (int m = 0; m < kNumMethods; ++m) {
      runs.push_back(run_fold(static_cast<Method>(m), fold, cfg, train, test));
      const RunResult& r = runs.back();
      ASSERT_EQ(r.points.size(), 3u);
      EXPECT_EQ(r.points[2].epoch, 6);
      for (const auto& p : r.points) {
        EXPECT_GE(p.vote.accuracy, 0.0);
        EXPECT_LE(p.vote.accuracy, 1.0);
        EXPECT_TRUE(std::isfinite(p.train_loss));
      }
    }
  // BASE on clearly separated clusters: well above chance (1/3) by the end.
  EXPECT_GT(runs[0].points.back().vote.nearest_accuracy, 0.9);
  // Same fold and seed: the run is reproducible.
  const RunResult again = run_fold(Method::DynEE, 0, cfg, train, test);
  EXPECT_EQ(again.points.back().vote.accuracy, runs[4].points.back().vote.accuracy);
  EXPECT_EQ(again.points.back().train_loss, runs[4].points.back().train_loss);

  const auto curves = summarise(runs);
  ASSERT_EQ(curves.size(), 6u);
  EXPECT_TRUE(curves[0].vs_base.empty());
  EXPECT_EQ(curves[1].vs_base.size(), 3u);
  const std::string md = results_markdown(curves, 0.05, "# test\n");
  EXPECT_NE(md.find("| 100 % | 6 |"), std::string::npos) << md;
  EXPECT_NE(md.find("(90.05*)"), std::string::npos) << md;  // the paper's DynEE at 100 %
  const std::string js = results_json(curves, 0.05, "{}");
  EXPECT_NE(js.find("\"DynEE*\""), std::string::npos);
}

TEST(PairSelection, DriverSmokeRunOnMnist) {
  const char* env = std::getenv("MN_DATA_DIR");
  const std::filesystem::path data =
      env && *env ? std::filesystem::path(env) : std::filesystem::path(MN_SOURCE_DIR) / ".." / "shared" / "datasets";
  if (!std::filesystem::exists(data / "mnist" / "t10k-labels-idx1-ubyte.gz"))
    GTEST_SKIP() << "MNIST not found under " << data << " (set MN_DATA_DIR): driver smoke run skipped";
  const std::string bin = std::string(MN_BINARY_DIR) + "/experiments/pair_selection";
  ASSERT_TRUE(std::filesystem::exists(bin)) << bin << " is not built";
  const auto out = std::filesystem::temp_directory_path() / "mn_pair_selection_smoke";
  std::filesystem::remove_all(out);
  const std::string cmd = "'" + bin + "' --data-dir '" + data.string() +
                          "' --folds 2 --budget 60 --epochs 2 --cycle 1 --eval-every 1 "
                          "--threads 1 --out-dir '" + out.string() + "' > '" + out.string() +
                          ".log' 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "see " << out.string() << ".log";
  for (const char* f : {"results.md", "results.json", "metrics.jsonl", "config.txt", "summary.json", "report.md"})
    EXPECT_TRUE(std::filesystem::exists(out / f)) << f;
  std::ifstream md(out / "results.md");
  std::stringstream ss;
  ss << md.rdbuf();
  EXPECT_NE(ss.str().find("DynEE*"), std::string::npos);
  // results.md names what produced it (tools/scoreboard.py --check requires a provenance line).
  EXPECT_NE(ss.str().find("\n## Provenance\n"), std::string::npos) << ss.str();
  EXPECT_NE(ss.str().find("--folds 2"), std::string::npos) << "the command is missing from results.md";
  // 6 methods x 2 folds x 2 evaluations.
  std::ifstream jl(out / "metrics.jsonl");
  int lines = 0;
  for (std::string l; std::getline(jl, l);) ++lines;
  EXPECT_EQ(lines, 24);
  // --summarise rebuilds the outputs from runs.jsonl alone, without training.
  const auto out2 = out.string() + "_summary";
  ASSERT_EQ(std::system(("'" + bin + "' --summarise '" + (out / "metrics.jsonl").string() +
                         "' --out-dir '" + out2 + "' > /dev/null 2>&1").c_str()), 0);
  std::ifstream md2(out2 + "/results.md");
  std::stringstream ss2;
  ss2 << md2.rdbuf();
  EXPECT_NE(ss2.str().find("12 runs over 2 complete folds"), std::string::npos) << ss2.str();
  // The tables (from Table 2 to the timing section) agree with the run's own.
  auto tables = [](const std::string& m) {
    const size_t b = m.find("## Table 2"), e = m.find("## Nearest");
    return b == std::string::npos || e == std::string::npos ? std::string() : m.substr(b, e - b);
  };
  EXPECT_FALSE(tables(ss.str()).empty());
  EXPECT_EQ(tables(ss2.str()), tables(ss.str()));
  // A bad flag is one clean line and a non-zero status.
  EXPECT_NE(std::system(("'" + bin + "' --method nope > /dev/null 2>&1").c_str()), 0);
  // No evaluation within --epochs: refused naming the flag (it used to crash after training).
  const std::string bad = out.string() + "_bad.log";
  EXPECT_NE(std::system(("'" + bin + "' --epochs 1 --eval-every 5 --out-dir '" + out.string() + "_bad' > '" +
                         bad + "' 2>&1").c_str()), 0);
  std::ifstream bl(bad);
  std::stringstream bs;
  bs << bl.rdbuf();
  EXPECT_NE(bs.str().find("--eval-every"), std::string::npos) << bs.str();
}

// --summarise of a damaged metrics file: a clear error naming the file and the
// key (std::stoi / std::stod used to escape as invalid_argument).
TEST(PairSelection, SummariseRefusesDamagedLinesNamingFileAndKey) {
  const std::string path = testing::TempDir() + "/damaged_runs.jsonl";
  for (const char* line : {"{\"method\":\"BASE\",\"fold\":x1,\"epoch\":5}\n",
                           "{\"method\":\"BASE\",\"fold\":0,\"epoch\":5,\"accuracy\":nope,\"nearest_accuracy\":0,"
                           "\"abstain_share\":0,\"train_loss\":0,\"genuine_pairs\":1}\n",
                           "{\"method\":\"BASE\",\"fold\":0.5,\"epoch\":5}\n"}) {
    { std::ofstream(path) << line; }
    try {
      mn::pairsel::read_runs_jsonl(path);
      FAIL() << "no throw for " << line;
    } catch (const mn::Error& e) {
      const std::string w = e.what();
      EXPECT_NE(w.find("damaged_runs.jsonl"), std::string::npos) << w;
    }
  }
}

// --resume: a run stopped after its first (method, fold) run goes on with the
// others and ends with the same runs as an uninterrupted one.
TEST(PairSelection, ResumeAfterAStopFinishesWithTheSameRuns) {
  const char* env = std::getenv("MN_DATA_DIR");
  const std::filesystem::path data =
      env && *env ? std::filesystem::path(env) : std::filesystem::path(MN_SOURCE_DIR) / ".." / "shared" / "datasets";
  if (!std::filesystem::exists(data / "mnist" / "t10k-labels-idx1-ubyte.gz"))
    GTEST_SKIP() << "MNIST not found under " << data << " (set MN_DATA_DIR): resume test skipped";
  const std::string bin = std::string(MN_BINARY_DIR) + "/experiments/pair_selection";
  const auto base = std::filesystem::temp_directory_path() / "mn_pair_selection_resume";
  std::filesystem::remove_all(base);
  const std::string common = "'" + bin + "' --data-dir '" + data.string() +
                             "' --folds 2 --budget 60 --epochs 2 --cycle 1 --eval-every 1 --threads 1 "
                             "--method dyne --out-dir '";
  const std::string a = (base / "a").string(), b = (base / "b").string();
  ASSERT_EQ(std::system((common + a + "' > /dev/null 2>&1").c_str()), 0);
  ASSERT_EQ(WEXITSTATUS(std::system((common + b + "' --stop-after 1 > /dev/null 2>&1").c_str())), 3);
  ASSERT_EQ(std::system((common + b + "' --resume > /dev/null 2>&1").c_str()), 0);
  auto runs = [](const std::string& dir) {
    std::vector<std::string> v;
    std::ifstream in(dir + "/metrics.jsonl");
    for (std::string l; std::getline(in, l);) {
      const size_t s = l.find(",\"seconds\":");
      v.push_back(s == std::string::npos ? l : l.substr(0, s));
    }
    std::sort(v.begin(), v.end());
    return v;
  };
  const auto ra = runs(a), rb = runs(b);
  EXPECT_EQ(ra.size(), 4u) << "2 folds x 2 evaluations";
  EXPECT_EQ(ra, rb);
  EXPECT_TRUE(std::filesystem::exists(base / "b" / "results.md"));
}

// --score-on validation: the scored images are held out of MNIST's training images, the
// folds are drawn from the rest (disjoint from them), the split is stratified and seeded,
// and results.md says the numbers are validation numbers, not the test set's.
TEST(PairSelection, ValidationSplitIsHeldOutOfEveryFold) {
  const char* env = std::getenv("MN_DATA_DIR");
  const std::filesystem::path data =
      env && *env ? std::filesystem::path(env) : std::filesystem::path(MN_SOURCE_DIR) / ".." / "shared" / "datasets";
  if (!std::filesystem::exists(data / "mnist" / "t10k-labels-idx1-ubyte.gz"))
    GTEST_SKIP() << "MNIST not found under " << data << " (set MN_DATA_DIR): validation-split test skipped";
  const std::string bin = std::string(MN_BINARY_DIR) + "/experiments/pair_selection";
  const auto base = std::filesystem::temp_directory_path() / "mn_pair_selection_validation";
  std::filesystem::remove_all(base);
  std::filesystem::create_directories(base);
  auto run = [&](const std::string& name, const std::string& extra) {
    const std::string out = (base / name).string();
    const std::string cmd = "'" + bin + "' --data-dir '" + data.string() + "' --folds 3 --budget 60 --epochs 1 "
                            "--cycle 1 --eval-every 1 --threads 1 --method base --out-dir '" + out +
                            "' --export-dir '" + out + "/export' " + extra + " > '" + out + ".log' 2>&1";
    return std::system(cmd.c_str());
  };
  ASSERT_EQ(run("val", "--score-on validation --val-size 1000"), 0) << "see " << (base / "val.log");
  ASSERT_EQ(run("val2", "--score-on validation --val-size 1000"), 0);
  ASSERT_EQ(run("test", ""), 0);
  auto ints = [](const std::filesystem::path& p) {
    std::ifstream in(p);
    std::vector<int64_t> v;
    for (int64_t x; in >> x;) v.push_back(x);
    return v;
  };
  const auto held = ints(base / "val" / "export" / "validation.txt");
  ASSERT_EQ(held.size(), 1000u);
  EXPECT_EQ(held, ints(base / "val2" / "export" / "validation.txt")) << "the split must be seeded";
  const std::set<int64_t> held_set(held.begin(), held.end());
  EXPECT_EQ(held_set.size(), 1000u) << "distinct images";
  const auto folds = ints(base / "val" / "export" / "folds.txt");
  ASSERT_EQ(folds.size(), 180u) << "3 folds x 60 images";
  for (int64_t i : folds) EXPECT_EQ(held_set.count(i), 0u) << "training image " << i << " is also scored";
  EXPECT_FALSE(std::filesystem::exists(base / "test" / "export" / "validation.txt"));
  EXPECT_NE(ints(base / "test" / "export" / "folds.txt"), folds) << "the protocol's folds come from all 60,000";
  std::ifstream md(base / "val" / "results.md");
  std::stringstream ss;
  ss << md.rdbuf();
  EXPECT_NE(ss.str().find("VALIDATION split (1000 MNIST training images held out"), std::string::npos) << ss.str();
}
