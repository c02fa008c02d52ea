// Fused loss kernels vs direct textbook loops written here (per-term formulas of
// the papers, reductions, stats), identical-embedding safety, and CPU/CUDA parity.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kernels/losses.h"
#include "tests/common/test_util.h"

using namespace mn;
using namespace mn::kernels;

namespace {

struct Ref {
  double loss = 0, active = 0, mean_pos = 0, mean_neg = 0;
};

double sq(const std::vector<double>& x, const std::vector<double>& y, int64_t i, int64_t j,
          int64_t D) {
  double s = 0;
  for (int64_t k = 0; k < D; ++k) s += (x[i * D + k] - y[j * D + k]) * (x[i * D + k] - y[j * D + k]);
  return s;
}

// The losses exactly as written in the papers, as plain loops.
Ref ref_triplet(const TripletLossParams& P, Reduction red, const std::vector<double>& a,
                const std::vector<double>& p, const std::vector<double>& n, int64_t N, int64_t D) {
  std::vector<double> dp(N), dn(N);
  for (int64_t t = 0; t < N; ++t) {
    dp[t] = sq(a, p, t, t, D);
    dn[t] = sq(a, n, t, t, D);
    if (P.dist == DistKind::Plain) {
      dp[t] = std::sqrt(dp[t]);
      dn[t] = std::sqrt(dn[t]);
    }
  }
  Ref r;
  double mp = 0, mn_ = 0;
  for (int64_t t = 0; t < N; ++t) {
    mp += dp[t] / N;
    mn_ += dn[t] / N;
  }
  r.mean_pos = mp;
  r.mean_neg = mn_;
  const double m = P.margin;
  if (triplet_kind_is_global(P.kind)) {
    double vp = 0, vn = 0;
    for (int64_t t = 0; t < N; ++t) {
      vp += (dp[t] - mp) * (dp[t] - mp);
      vn += (dn[t] - mn_) * (dn[t] - mn_);
    }
    const double div = P.unbiased_var ? N - 1 : N;
    double L = vp / div + vn / div + P.global_l * std::max(0.0, mp - mn_ + P.global_t);
    if (P.kind == TripletKind::GlobalTriplet) {
      double k = 0;
      for (int64_t t = 0; t < N; ++t) k += std::max(0.0, 1 - dn[t] / (dp[t] + m)) / N;
      L += P.global_g * k;
    }
    for (int64_t t = 0; t < N; ++t) r.active += dp[t] - dn[t] + P.global_t > 0;
    r.loss = L;
    return r;
  }
  double sum = 0, nonzero = 0;
  for (int64_t t = 0; t < N; ++t) {
    double l = 0;
    bool act = false;
    switch (P.kind) {
      case TripletKind::Schroff:
      case TripletKind::MarginL2: l = std::max(0.0, dp[t] - dn[t] + m); act = l > 0; break;
      case TripletKind::Kumar: l = std::max(0.0, 1 - dn[t] / (dp[t] + m)); act = l > 0; break;
      case TripletKind::SoftMargin:
        l = std::log(1 + std::exp(dp[t] - dn[t] + m));
        act = dp[t] - dn[t] + m > 0;
        break;
      case TripletKind::SoftmaxRatio: {
        double ep = std::exp(dp[t]), en = std::exp(dn[t]);
        double dpl = ep / (ep + en), dnl = en / (ep + en);
        l = dpl * dpl + (dnl - 1) * (dnl - 1);
        act = l > 0;
        break;
      }
      default: break;
    }
    sum += P.weight * l;
    r.active += act;
    nonzero += P.weight * l > 0;  // MeanNonZero divides by the terms with a loss > 0 (pml AvgNonZeroReducer)
  }
  r.loss = red == Reduction::Sum ? sum
           : red == Reduction::Mean ? sum / N
                                    : sum / std::max(nonzero, 1.0);
  return r;
}

void expect_stats(const Ref& ref, const Tensor& stats, double tol) {
  LossStatsHost h = read_stats(stats);
  EXPECT_NEAR(h.loss, ref.loss, tol * std::max(1.0, std::abs(ref.loss)));
  EXPECT_EQ(h.active, ref.active);
  EXPECT_NEAR(h.mean_pos, ref.mean_pos, tol * std::max(1.0, ref.mean_pos));
  EXPECT_NEAR(h.mean_neg, ref.mean_neg, tol * std::max(1.0, ref.mean_neg));
}

const TripletKind kKinds[] = {TripletKind::Schroff,      TripletKind::Kumar,
                              TripletKind::MarginL2,     TripletKind::SoftMargin,
                              TripletKind::SoftmaxRatio, TripletKind::Global,
                              TripletKind::GlobalTriplet};

TripletLossParams params_for(TripletKind k, bool unbiased = false) {
  TripletLossParams P;
  P.kind = k;
  P.margin = k == TripletKind::Kumar || k == TripletKind::GlobalTriplet ? 0.01 : 0.5;
  P.dist = (k == TripletKind::MarginL2 || k == TripletKind::SoftMargin ||
            k == TripletKind::SoftmaxRatio)
               ? DistKind::Plain
               : DistKind::Squared;
  P.unbiased_var = unbiased;
  return P;
}

}  // namespace

TEST(LossKernels, TripletKindsMatchPaperLoops) {
  const int64_t N = 37, D = 11;
  Tensor a = test::randn({N, D}, DType::F64, Device::cpu(), 1);
  Tensor p = test::randn({N, D}, DType::F64, Device::cpu(), 2);
  Tensor n = test::randn({N, D}, DType::F64, Device::cpu(), 3);
  auto av = a.to_vector<double>(), pv = p.to_vector<double>(), nv = n.to_vector<double>();
  for (TripletKind k : kKinds)
    for (Reduction red : {Reduction::Mean, Reduction::MeanNonZero, Reduction::Sum})
      for (bool unb : {false, true}) {
        SCOPED_TRACE(std::string(triplet_kind_name(k)) + " red " +
                     std::to_string(static_cast<int>(red)) + (unb ? " unbiased" : ""));
        TripletLossParams P = params_for(k, unb);
        TermResult r = triplet_loss_terms(P, a, p, n, red);
        Reduction eff = triplet_kind_is_global(k) ? Reduction::Sum : red;
        // float64 loops vs float64 kernel: only summation order differs (~1e-15 relative).
        expect_stats(ref_triplet(P, eff, av, pv, nv, N, D), r.stats, 1e-12);
        // float32 kernel on the same data: rounding of D-term sums (~1e-6 relative).
        TermResult r32 = triplet_loss_terms(P, a.to(DType::F32), p.to(DType::F32),
                                            n.to(DType::F32), red);
        EXPECT_NEAR(read_stats(r32.stats).loss, read_stats(r.stats).loss,
                    1e-4 * std::max(1.0, std::abs(read_stats(r.stats).loss)));
      }
}

// Kumar et al.'s ratio loss 1 - dn / (dp + m): zero for a triplet ordered with room
// (dn >= dp + m), positive for a wrong one, and its gradient pulls the positive in
// (dL/ddp > 0) and pushes the negative out (dL/ddn < 0). The Omniglot study's printed
// eq. 4 (dp and dn swapped) fails every line below.
TEST(LossKernels, KumarRatioRewardsWellOrderedTriplets) {
  double gdp = 0, gdn = 0;
  bool active = true;
  EXPECT_EQ(loss_math::triplet_term(TripletKind::Kumar, 0.2, 1.0, 0.01, &gdp, &gdn, &active), 0.0);  // good triplet
  EXPECT_FALSE(active);
  const double bad = loss_math::triplet_term(TripletKind::Kumar, 1.0, 0.2, 0.01, &gdp, &gdn, &active);
  EXPECT_NEAR(bad, 1 - 0.2 / 1.01, 1e-15);
  EXPECT_TRUE(active);
  EXPECT_NEAR(gdp, 0.2 / (1.01 * 1.01), 1e-15);
  EXPECT_GT(gdp, 0);
  EXPECT_NEAR(gdn, -1 / 1.01, 1e-15);
}

TEST(LossKernels, IndexedTripletsEqualGatheredRows) {
  const int64_t B = 12, D = 5, T = 20;
  Tensor e = test::randn({B, D}, DType::F64, Device::cpu(), 4);
  auto ev = e.to_vector<double>();
  std::vector<int64_t> idx;
  std::vector<double> a, p, n;
  auto rv = test::rand_vec(3 * T, 0, B, 5);
  for (int64_t t = 0; t < 3 * T; ++t) idx.push_back(static_cast<int64_t>(rv[t]));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < D; ++k) {
      a.push_back(ev[idx[3 * t] * D + k]);
      p.push_back(ev[idx[3 * t + 1] * D + k]);
      n.push_back(ev[idx[3 * t + 2] * D + k]);
    }
  Tensor it = Tensor::from_vector(idx, {T, 3});
  for (TripletKind k : kKinds) {
    SCOPED_TRACE(triplet_kind_name(k));
    TripletLossParams P = params_for(k);
    TermResult ri = triplet_loss_terms_indexed(P, e, it, Reduction::Mean);
    TermResult rd = triplet_loss_terms(P, Tensor::from_vector(a, {T, D}),
                                       Tensor::from_vector(p, {T, D}),
                                       Tensor::from_vector(n, {T, D}), Reduction::Mean);
    // Same arithmetic on the same rows: exact up to the parallel summation order.
    EXPECT_TRUE(test::all_close(rd.loss, ri.loss, 1e-14, 1e-12));
    // Gradient of the indexed form = scatter-add of the dense per-row gradients.
    Tensor g1 = Tensor::ones({1}, DType::F64);
    Tensor ge = triplet_loss_grad_indexed(ri, g1, e, it);
    auto gd = triplet_loss_grad(rd, g1, Tensor::from_vector(a, {T, D}),
                                Tensor::from_vector(p, {T, D}), Tensor::from_vector(n, {T, D}));
    std::vector<double> sc(B * D, 0.0);
    auto ga = gd[0].to_vector<double>(), gp = gd[1].to_vector<double>(),
         gn = gd[2].to_vector<double>();
    for (int64_t t = 0; t < T; ++t)
      for (int64_t k2 = 0; k2 < D; ++k2) {
        sc[idx[3 * t] * D + k2] += ga[t * D + k2];
        sc[idx[3 * t + 1] * D + k2] += gp[t * D + k2];
        sc[idx[3 * t + 2] * D + k2] += gn[t * D + k2];
      }
    EXPECT_TRUE(test::all_close(sc, ge.to_double_vector(), 1e-12, 1e-10));
  }
}

// TermRows::count: the first `count` rows of a padded index list (a miner's
// fixed capacity) give exactly the loss, stats and gradient of the exact list;
// the padding rows (0, 0, 0) add nothing. Every reduction, every per-term kind.
static void expect_padded_equals_exact(Device dev) {
  const int64_t B = 12, D = 5, T = 17, cap = 40;
  Tensor e = test::randn({B, D}, DType::F64, Device::cpu(), 7).to(dev);
  auto rv = test::rand_vec(3 * T, 0, B, 8);
  std::vector<int64_t> idx;
  for (double v : rv) idx.push_back(static_cast<int64_t>(v));
  std::vector<int64_t> padded = idx;
  padded.resize(3 * cap, 0);
  Tensor exact = Tensor::from_vector(idx, {T, 3}).to(dev), pad = Tensor::from_vector(padded, {cap, 3}).to(dev);
  for (int64_t count : {T, int64_t(0)}) {
    Tensor cnt = Tensor::from_vector(std::vector<int64_t>{count}, {1}).to(dev);
    Tensor ex = count == T ? exact : Tensor::empty({0, 3}, DType::I64, dev);
    for (TripletKind k : {TripletKind::Schroff, TripletKind::Kumar, TripletKind::MarginL2, TripletKind::SoftMargin,
                          TripletKind::SoftmaxRatio})
      for (Reduction red : {Reduction::Mean, Reduction::MeanNonZero, Reduction::Sum}) {
        SCOPED_TRACE(std::string(triplet_kind_name(k)) + " reduction " + std::to_string(static_cast<int>(red)) +
                     " count " + std::to_string(count) + " on " + dev.str());
        TripletLossParams P = params_for(k);
        TermResult re = triplet_loss_terms_indexed(P, e, ex, red);
        TermResult rp = triplet_loss_terms_indexed(P, e, pad, red, cnt);
        EXPECT_TRUE(test::all_close(re.stats, rp.stats, 1e-14, 1e-12));
        Tensor g1 = Tensor::ones({1}, DType::F64, dev);
        EXPECT_TRUE(test::all_close(triplet_loss_grad_indexed(re, g1, e, ex),
                                    triplet_loss_grad_indexed(rp, g1, e, pad), 1e-14, 1e-12));
        auto l = rp.loss.to_double_vector();
        for (int64_t t = count; t < cap; ++t) ASSERT_EQ(l[static_cast<size_t>(t)], 0.0) << "padding row " << t;
      }
  }
  // The batch-mean kinds refuse a count.
  Tensor cnt = Tensor::from_vector(std::vector<int64_t>{T}, {1}).to(dev);
  EXPECT_THROW(triplet_loss_terms_indexed(params_for(TripletKind::Global), e, pad, Reduction::Sum, cnt), Error);
}

// Pull terms (LMNN's): the stats' positive-distance mean is the mean pull
// distance and the negative one 0. The kernels once left is_pos unwritten for
// pull terms, so the split read whatever the buffer held: over a million terms
// the buffer comes fresh from the system, zero, and the mean read 0.
TEST(LossKernels, PullStatsAreTheMeanPullDistance) {
  const int64_t B = 7, D = 3, T = (int64_t(1) << 20) + 5;
  Tensor e = test::randn({B, D}, DType::F64, Device::cpu(), 31);
  const auto ev = e.to_vector<double>();
  std::vector<int64_t> idx(static_cast<size_t>(2 * T));
  double sum = 0;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t a = t % B, p = (t * 3 + 1) % B;
    idx[static_cast<size_t>(2 * t)] = a;
    idx[static_cast<size_t>(2 * t + 1)] = p;
    double d2 = 0;
    for (int64_t k = 0; k < D; ++k) d2 += (ev[a * D + k] - ev[p * D + k]) * (ev[a * D + k] - ev[p * D + k]);
    sum += d2;  // Pull: squared L2
  }
  TripletLossParams P;
  P.kind = TripletKind::Pull;
  TermResult r = triplet_loss_terms_indexed(P, e, Tensor::from_vector(idx, {T, 2}), Reduction::Sum);
  const auto st = r.stats.to_vector<double>();
  EXPECT_NEAR(st[2], sum / static_cast<double>(T), 1e-9 * sum / static_cast<double>(T));
  EXPECT_EQ(st[3], 0.0);
}

// The same for the contrastive loss over a pair miner's padded output.
static void expect_padded_pairs_equal_exact(Device dev) {
  const int64_t B = 10, D = 4, T = 13, cap = 30;
  Tensor e = test::randn({B, D}, DType::F64, Device::cpu(), 9).to(dev);
  auto rv = test::rand_vec(2 * T, 0, B, 10);
  std::vector<int64_t> idx, lab;
  for (double v : rv) idx.push_back(static_cast<int64_t>(v));
  for (int64_t t = 0; t < T; ++t) lab.push_back(t % 3 == 0 ? 1 : 0);
  std::vector<int64_t> pidx = idx, plab = lab;
  pidx.resize(2 * cap, 0);
  plab.resize(cap, 0);
  Tensor cnt = Tensor::from_vector(std::vector<int64_t>{T}, {1}).to(dev);
  for (ContrastiveForm form : {ContrastiveForm::Hadsell, ContrastiveForm::Sampling})
    for (Reduction red : {Reduction::Mean, Reduction::MeanNonZero, Reduction::Sum}) {
      SCOPED_TRACE("form " + std::to_string(static_cast<int>(form)) + " reduction " +
                   std::to_string(static_cast<int>(red)) + " on " + dev.str());
      Tensor ex = Tensor::from_vector(idx, {T, 2}).to(dev), exl = Tensor::from_vector(lab, {T}).to(dev);
      Tensor pd = Tensor::from_vector(pidx, {cap, 2}).to(dev), pdl = Tensor::from_vector(plab, {cap}).to(dev);
      TermResult re = contrastive_terms_indexed(form, 0.7, e, ex, exl, red);
      TermResult rp = contrastive_terms_indexed(form, 0.7, e, pd, pdl, red, cnt);
      EXPECT_TRUE(test::all_close(re.stats, rp.stats, 1e-14, 1e-12));
      Tensor g1 = Tensor::ones({1}, DType::F64, dev);
      EXPECT_TRUE(test::all_close(triplet_loss_grad_indexed(re, g1, e, ex), triplet_loss_grad_indexed(rp, g1, e, pd),
                                  1e-14, 1e-12));
    }
}

TEST(LossKernels, PaddedPairListWithCountEqualsExactList) { expect_padded_pairs_equal_exact(Device::cpu()); }

TEST(LossKernels, CudaPaddedPairListWithCountEqualsExactList) {
  MN_SKIP_IF_NO_CUDA();
  expect_padded_pairs_equal_exact(Device::cuda(0));
}

TEST(LossKernels, PaddedIndexListWithCountEqualsExactList) { expect_padded_equals_exact(Device::cpu()); }

TEST(LossKernels, CudaPaddedIndexListWithCountEqualsExactList) {
  MN_SKIP_IF_NO_CUDA();
  expect_padded_equals_exact(Device::cuda(0));
}

TEST(LossKernels, ContrastiveBothConventions) {
  const int64_t N = 40, D = 6;
  Tensor x1 = test::randn({N, D}, DType::F64, Device::cpu(), 6);
  Tensor x2 = test::randn({N, D}, DType::F64, Device::cpu(), 7);
  auto a = x1.to_vector<double>(), b = x2.to_vector<double>();
  std::vector<int64_t> lab(N);
  for (int64_t i = 0; i < N; ++i) lab[i] = (i * 7) % 3 == 0;
  Tensor lt = Tensor::from_vector(lab, {N});
  const double M = 3.0;
  for (ContrastiveForm f : {ContrastiveForm::Hadsell, ContrastiveForm::Sampling}) {
    TermResult r = contrastive_terms(f, M, x1, x2, lt, Reduction::Sum);
    Ref ref;
    double sp = 0, snn = 0, cp = 0, cn = 0;
    for (int64_t i = 0; i < N; ++i) {
      double Dw = std::sqrt(sq(a, b, i, i, D));
      double Y = static_cast<double>(lab[i]);
      double l = f == ContrastiveForm::Hadsell
                     ? (1 - Y) * Dw * Dw + Y * std::pow(std::max(0.0, M - Dw), 2)  // Y=0 genuine
                     : Y * Dw + (1 - Y) * std::max(0.0, M - Dw);                   // y=1 positive
      bool pos = f == ContrastiveForm::Hadsell ? lab[i] == 0 : lab[i] == 1;
      (pos ? sp : snn) += Dw;
      (pos ? cp : cn) += 1;
      ref.loss += l;
      ref.active += l > 0;
    }
    ref.mean_pos = sp / cp;
    ref.mean_neg = snn / cn;
    expect_stats(ref, r.stats, 1e-12);
  }
}

TEST(LossKernels, KochBceFromLogitMatchesLoop) {
  const int64_t N = 25, D = 9;
  Tensor h1 = test::rand({N, D}, 0, 1, DType::F64, Device::cpu(), 8);
  Tensor h2 = test::rand({N, D}, 0, 1, DType::F64, Device::cpu(), 9);
  Tensor al = test::randn({D}, DType::F64, Device::cpu(), 10);
  Tensor bias = Tensor::full({1}, -0.3, DType::F64);
  std::vector<double> tv(N);
  for (int64_t i = 0; i < N; ++i) tv[i] = i % 2;
  KochResult r = koch_terms(h1, h2, al, bias, Tensor::from_vector(tv, {N}), Reduction::Mean);
  auto a = h1.to_vector<double>(), b = h2.to_vector<double>(), w = al.to_vector<double>();
  double L = 0;
  for (int64_t i = 0; i < N; ++i) {
    double z = -0.3;
    for (int64_t j = 0; j < D; ++j) z += w[j] * std::abs(a[i * D + j] - b[i * D + j]);
    double s = 1 / (1 + std::exp(-z));
    L += -(tv[i] * std::log(s) + (1 - tv[i]) * std::log(1 - s)) / N;
  }
  EXPECT_NEAR(read_stats(r.stats).loss, L, 1e-12);
  // Extreme logits stay finite (the log(sigmoid) form would give inf).
  Tensor big = Tensor::full({1, D}, 100.0, DType::F64), zero = Tensor::zeros({1, D}, DType::F64);
  KochResult rb = koch_terms(big, zero, Tensor::ones({D}, DType::F64), Tensor::zeros({1}, DType::F64),
                             Tensor::zeros({1}, DType::F64), Reduction::Mean);
  EXPECT_NEAR(read_stats(rb.stats).loss, 100.0 * D, 1e-9);
}

TEST(LossKernels, LmnnObjectiveMatchesEq2) {
  const int64_t B = 10, Din = 4, K = 3;
  Tensor x = test::randn({B, Din}, DType::F64, Device::cpu(), 11);
  Tensor L = test::randn({Din, K}, DType::F64, Device::cpu(), 12);
  std::vector<int64_t> pairs = {0, 1, 2, 3, 4, 5, 1, 0};
  std::vector<int64_t> trip = {0, 1, 6, 2, 3, 7, 4, 5, 8, 1, 0, 9, 0, 1, 9};
  const double c = 0.7;
  LmnnResult r = lmnn_terms(x, L, Tensor::from_vector(pairs, {4, 2}),
                            Tensor::from_vector(trip, {5, 3}), c);
  auto xv = x.to_vector<double>(), lv = L.to_vector<double>();
  auto dM = [&](int64_t i, int64_t j) {  // ||L^T (x_i - x_j)||^2
    double s = 0;
    for (int64_t k = 0; k < K; ++k) {
      double v = 0;
      for (int64_t d = 0; d < Din; ++d) v += lv[d * K + k] * (xv[i * Din + d] - xv[j * Din + d]);
      s += v * v;
    }
    return s;
  };
  double obj = 0;
  for (int q = 0; q < 4; ++q) obj += dM(pairs[2 * q], pairs[2 * q + 1]);
  for (int q = 0; q < 5; ++q)
    obj += c * std::max(0.0, 1 + dM(trip[3 * q], trip[3 * q + 1]) - dM(trip[3 * q], trip[3 * q + 2]));
  EXPECT_NEAR(read_stats(r.stats).loss, obj, 1e-10 * std::max(1.0, obj));
}

TEST(LossKernels, IdenticalEmbeddingsGiveFiniteLossAndGrad) {
  const int64_t N = 4, D = 3;
  Tensor a = Tensor::full({N, D}, 0.5, DType::F64);
  for (TripletKind k : kKinds)
    for (int dist = 0; dist < 2; ++dist) {
      TripletLossParams P = params_for(k);
      P.dist = dist ? DistKind::Plain : DistKind::Squared;
      TermResult r = triplet_loss_terms(P, a, a, a, Reduction::Mean);
      auto g = triplet_loss_grad(r, Tensor::ones({1}, DType::F64), a, a, a);
      EXPECT_TRUE(std::isfinite(read_stats(r.stats).loss)) << triplet_kind_name(k);
      for (auto& t : g)
        for (double v : t.to_double_vector()) EXPECT_TRUE(std::isfinite(v)) << triplet_kind_name(k);
    }
  for (ContrastiveForm f : {ContrastiveForm::Hadsell, ContrastiveForm::Sampling}) {
    TermResult r = contrastive_terms(f, 1.0, a, a, Tensor::from_vector(std::vector<int64_t>{0, 1, 0, 1}, {N}),
                                     Reduction::Mean);
    auto g = triplet_loss_grad(r, Tensor::ones({1}, DType::F64), a, a, Tensor());
    EXPECT_TRUE(std::isfinite(read_stats(r.stats).loss));
    for (double v : g[0].to_double_vector()) EXPECT_TRUE(std::isfinite(v));
  }
}

TEST(LossKernels, CudaMatchesCpu) {
  MN_SKIP_IF_NO_CUDA();
  const int64_t B = 64, D = 130, T = 200;
  for (DType dt : {DType::F32, DType::F64}) {
    Tensor e = test::randn({B, D}, dt, Device::cpu(), 13);
    std::vector<int64_t> idx;
    auto rv = test::rand_vec(3 * T, 0, B, 14);
    for (double v : rv) idx.push_back(static_cast<int64_t>(v));
    Tensor it = Tensor::from_vector(idx, {T, 3});
    // float32: D=130 term sums and atomics in another order: ~1e-5 relative.
    const double tol = dt == DType::F32 ? 1e-4 : 1e-10;
    for (TripletKind k : kKinds) {
      SCOPED_TRACE(triplet_kind_name(k));
      TripletLossParams P = params_for(k);
      TermResult rc = triplet_loss_terms_indexed(P, e, it, Reduction::MeanNonZero);
      TermResult rg = triplet_loss_terms_indexed(P, e.cuda(), it.cuda(), Reduction::MeanNonZero);
      EXPECT_TRUE(test::all_close(rc.stats, rg.stats, tol, tol));
      Tensor g1 = Tensor::ones({1}, dt);
      EXPECT_TRUE(test::all_close(triplet_loss_grad_indexed(rc, g1, e, it),
                                  triplet_loss_grad_indexed(rg, g1.cuda(), e.cuda(), it.cuda()),
                                  tol, tol));
      Tensor a = e.narrow(0, 0, 20), p = e.narrow(0, 20, 20), n = e.narrow(0, 40, 20);
      TermResult dc = triplet_loss_terms(P, a, p, n, Reduction::Mean);
      TermResult dg = triplet_loss_terms(P, a.cuda(), p.cuda(), n.cuda(), Reduction::Mean);
      EXPECT_TRUE(test::all_close(dc.stats, dg.stats, tol, tol));
      auto gc = triplet_loss_grad(dc, g1, a, p, n);
      auto gg = triplet_loss_grad(dg, g1.cuda(), a.cuda(), p.cuda(), n.cuda());
      for (int q = 0; q < 3; ++q) EXPECT_TRUE(test::all_close(gc[q], gg[q], tol, tol));
    }
    Tensor lab = Tensor::from_vector(std::vector<int64_t>(20, 1), {20});
    for (ContrastiveForm f : {ContrastiveForm::Hadsell, ContrastiveForm::Sampling}) {
      Tensor a = e.narrow(0, 0, 20), b = e.narrow(0, 20, 20);
      TermResult c = contrastive_terms(f, 20.0, a, b, lab, Reduction::Mean);
      TermResult g = contrastive_terms(f, 20.0, a.cuda(), b.cuda(), lab.cuda(), Reduction::Mean);
      EXPECT_TRUE(test::all_close(c.stats, g.stats, tol, tol));
    }
    Tensor al = test::randn({D}, dt, Device::cpu(), 15), bi = Tensor::zeros({1}, dt);
    Tensor tg = Tensor::ones({20}, dt);
    Tensor h1 = e.narrow(0, 0, 20), h2 = e.narrow(0, 20, 20);
    KochResult kc = koch_terms(h1, h2, al, bi, tg, Reduction::Mean);
    KochResult kg = koch_terms(h1.cuda(), h2.cuda(), al.cuda(), bi.cuda(), tg.cuda(), Reduction::Mean);
    EXPECT_TRUE(test::all_close(kc.stats, kg.stats, tol, tol));
    auto gc = koch_grad(kc, Tensor::ones({1}, dt), h1, h2, al);
    auto gg = koch_grad(kg, Tensor::ones({1}, dt).cuda(), h1.cuda(), h2.cuda(), al.cuda());
    for (int q = 0; q < 4; ++q) EXPECT_TRUE(test::all_close(gc[q], gg[q], tol, tol));
  }
}

// Index lists naming a row outside the embedding matrix must throw (naming the
// op), not read past the buffer.
TEST(LossKernels, IndexedFormsRejectOutOfRangeRows) {
  Tensor e = Tensor::from_vector(test::rand_vec(4 * 3, -1, 1, 9), {4, 3});
  TripletLossParams P;
  Tensor bad_hi = Tensor::from_vector(std::vector<int64_t>{0, 1, 4}, {1, 3});
  Tensor bad_lo = Tensor::from_vector(std::vector<int64_t>{-1, 1, 2}, {1, 3});
  EXPECT_THROW(triplet_loss_terms_indexed(P, e, bad_hi, Reduction::Mean), Error);
  EXPECT_THROW(triplet_loss_terms_indexed(P, e, bad_lo, Reduction::Mean), Error);
  Tensor pairs = Tensor::from_vector(std::vector<int64_t>{0, 7}, {1, 2});
  Tensor label = Tensor::from_vector(std::vector<int64_t>{1}, {1});
  EXPECT_THROW(contrastive_terms_indexed(ContrastiveForm::Sampling, 1.0, e, pairs, label,
                                         Reduction::Mean),
               Error);
}

// The same on the GPU, where the lists are not checked on the host (that would cost a
// synchronisation): the kernels skip a term with a bad row and report it; the host
// throws at the next synchronisation point, naming the index and the bound, and clears
// the report. Forward (triplet and contrastive) and the indexed gradient.
TEST(LossKernels, CudaIndexedFormsReportOutOfRangeRowsAtTheNextSync) {
  MN_SKIP_IF_NO_CUDA();
  const Device d = Device::cuda();
  Tensor e = Tensor::from_vector(test::rand_vec(4 * 3, -1, 1, 9), {4, 3}).to(d);
  auto idx = [&](std::vector<int64_t> v, Shape s) { return Tensor::from_vector<int64_t>(v, s).to(d); };
  auto expect_report = [&](const std::function<Tensor()>& op, const std::string& what) {
    test::expect_device_report(op, what, e);
  };
  TripletLossParams P;
  expect_report([&] { return triplet_loss_terms_indexed(P, e, idx({0, 1, 2, 3, 1, 4}, {2, 3}), Reduction::Mean).loss; },
                "index 4 is out of range [0, 4)");
  expect_report([&] { return triplet_loss_terms_indexed(P, e, idx({-1, 1, 2}, {1, 3}), Reduction::Mean).loss; },
                "index -1 is out of range [0, 4)");
  expect_report([&] {
    return contrastive_terms_indexed(ContrastiveForm::Sampling, 1.0, e, idx({0, 7}, {1, 2}),
                                     idx({1}, {1}), Reduction::Mean).loss;
  }, "index 7 is out of range [0, 4)");
  // The gradient: terms from a good list, then a list with a bad row.
  const TermResult good = triplet_loss_terms_indexed(P, e, idx({0, 1, 2}, {1, 3}), Reduction::Mean);
  const Tensor one = Tensor::ones({1}, e.dtype(), d);
  expect_report([&] { return triplet_loss_grad_indexed(good, one, e, idx({0, 1, 5}, {1, 3})); },
                "index 5 is out of range [0, 4)");
  // Valid lists afterwards: the CPU's values.
  const Tensor ok = idx({0, 1, 2, 3, 2, 1}, {2, 3});
  EXPECT_TRUE(test::all_close(triplet_loss_terms_indexed(P, e.cpu(), ok.cpu(), Reduction::Mean).loss,
                              triplet_loss_terms_indexed(P, e, ok, Reduction::Mean).loss.cpu(), 1e-6, 1e-6));
}
