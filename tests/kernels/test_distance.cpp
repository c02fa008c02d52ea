// Distances (the one implementation of kernels/distance.h): forward against
// direct double loops written here for all four metrics (L1, squared L2, L2,
// cosine), float64 gradchecks of every op and metric (also the self case b = a),
// identical embeddings (finite values and gradients), non-negative pairwise
// distances on near-duplicate rows, the miners' matrix bit for bit against the
// Gram formula it had before the code was unified, the fused losses' distances
// bit for bit against row_distance, and CPU/GPU parity (skips without a GPU).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <functional>

#include "autograd/gradcheck.h"
#include "autograd/ops_layers.h"
#include "kernels/distance.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/losses.h"
#include "kernels/miners.h"
#include "kernels/reduce.h"
#include "tests/common/test_util.h"

namespace mn {
namespace {

using ag::Variable;
using kernels::Pairwise;

const Pairwise kMetrics[] = {Pairwise::L1, Pairwise::SqEuclidean, Pairwise::Euclidean,
                             Pairwise::Cosine};

std::vector<double> pairwise_ref(const std::vector<double>& a, const std::vector<double>& b,
                                 int64_t M, int64_t N, int64_t D, Pairwise m) {
  std::vector<double> out(M * N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double l1 = 0, sq = 0, dot = 0, na = 0, nb = 0;
      for (int64_t d = 0; d < D; ++d) {
        const double x = a[i * D + d], y = b[j * D + d];
        l1 += std::abs(x - y);
        sq += (x - y) * (x - y);
        dot += x * y;
        na += x * x;
        nb += y * y;
      }
      out[i * N + j] = m == Pairwise::L1            ? l1
                       : m == Pairwise::SqEuclidean ? sq
                       : m == Pairwise::Euclidean
                           ? std::sqrt(sq)
                           : 1 - dot / (std::max(std::sqrt(na), 1e-8) * std::max(std::sqrt(nb), 1e-8));
    }
  return out;
}

TEST(DistanceTest, ForwardMatchesLoops) {
  const int64_t N = 5, D = 7;
  Tensor a = test::randn({N, D}, DType::F64, Device::cpu(), 1);
  Tensor b = test::randn({N, D}, DType::F64, Device::cpu(), 2);
  auto av = a.to_double_vector(), bv = b.to_double_vector();
  std::vector<double> absd(N * D), l1(N, 0), l2s(N, 0), l2(N);
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t d = 0; d < D; ++d) {
      const double diff = av[i * D + d] - bv[i * D + d];
      absd[i * D + d] = std::abs(diff);
      l1[i] += std::abs(diff);
      l2s[i] += diff * diff;
    }
    l2[i] = std::sqrt(l2s[i]);
  }
  // float64, summation order only.
  EXPECT_TRUE(test::all_close(absd, kernels::abs_diff_forward(a, b).to_double_vector(), 0, 0));
  using kernels::RowDist;
  EXPECT_TRUE(test::all_close(l1, kernels::row_distance_forward(RowDist::L1, a, b).to_double_vector(), 1e-14, 1e-14));
  EXPECT_TRUE(test::all_close(l2s, kernels::row_distance_forward(RowDist::L2Squared, a, b).to_double_vector(), 1e-14, 1e-14));
  EXPECT_TRUE(test::all_close(l2, kernels::row_distance_forward(RowDist::L2, a, b).to_double_vector(), 1e-14, 1e-14));
  Tensor c = test::randn({3, D}, DType::F64, Device::cpu(), 3);
  for (Pairwise m : kMetrics) {
    auto r = kernels::pairwise_distance_forward(m, a, c);
    // The expansion ||a||^2 + ||b||^2 - 2 a.b loses ~1e-15 * ||a||^2 absolutely.
    EXPECT_TRUE(test::all_close(pairwise_ref(av, c.to_double_vector(), N, 3, D, m),
                                r.out.to_double_vector(), 1e-12, 1e-12))
        << kernels::pairwise_name(m);
  }
}

TEST(DistanceTest, Gradchecks) {
  Tensor a = test::randn({4, 6}, DType::F64, Device::cpu(), 4);
  Tensor b = test::randn({4, 6}, DType::F64, Device::cpu(), 5);
  Tensor c = test::randn({3, 6}, DType::F64, Device::cpu(), 6);
  auto check = [](const char* what, const std::function<Variable(const std::vector<Variable>&)>& f,
                  const std::vector<Tensor>& in) {
    auto res = ag::gradcheck(f, in);
    EXPECT_TRUE(res.ok) << what << ": " << res.message;
  };
  check("abs_diff", [](const std::vector<Variable>& v) { return ag::abs_diff(v[0], v[1]); }, {a, b});
  check("l1", [](const std::vector<Variable>& v) { return ag::l1_distance(v[0], v[1]); }, {a, b});
  check("l2sq", [](const std::vector<Variable>& v) { return ag::l2_distance(v[0], v[1], true); }, {a, b});
  check("l2", [](const std::vector<Variable>& v) { return ag::l2_distance(v[0], v[1], false); }, {a, b});
  for (Pairwise m : kMetrics) {
    check(kernels::pairwise_name(m),
          [m](const std::vector<Variable>& v) { return ag::pairwise_distance(v[0], v[1], m); },
          {a, c});
    // Same batch on both sides (the miner's B x B matrix), off-diagonal entries only
    // matter for the Euclidean kink at 0: the diagonal is 0, with a zero subgradient.
    if (m != Pairwise::Euclidean)
      check("pairwise self",
            [m](const std::vector<Variable>& v) { return ag::pairwise_distance(v[0], v[0], m); },
            {a});
  }
}

bool all_finite(const Tensor& t) {
  for (double v : t.to_double_vector())
    if (!std::isfinite(v)) return false;
  return true;
}

TEST(DistanceTest, IdenticalEmbeddingsGiveFiniteValuesAndGradients) {
  for (DType dt : {DType::F32, DType::F64}) {
    Tensor e = test::randn({6, 8}, dt, Device::cpu(), 7);
    Tensor zero = Tensor::zeros({6, 8}, dt);
    std::vector<std::function<Variable(const Variable&, const Variable&)>> ops = {
        [](const Variable& x, const Variable& y) { return ag::abs_diff(x, y); },
        [](const Variable& x, const Variable& y) { return ag::l1_distance(x, y); },
        [](const Variable& x, const Variable& y) { return ag::l2_distance(x, y, true); },
        [](const Variable& x, const Variable& y) { return ag::l2_distance(x, y, false); },
        [](const Variable& x, const Variable& y) { return ag::pairwise_distance(x, y, Pairwise::SqEuclidean); },
        [](const Variable& x, const Variable& y) { return ag::pairwise_distance(x, y, Pairwise::Euclidean); },
        [](const Variable& x, const Variable& y) { return ag::pairwise_distance(x, y, Pairwise::Cosine); },
        [](const Variable& x, const Variable& y) { return ag::pairwise_distance(x, y, Pairwise::L1); },
        // b is a: the self case (norms from the Gram diagonal).
        [](const Variable& x, const Variable&) { return ag::pairwise_distance(x, x, Pairwise::L1); },
        [](const Variable& x, const Variable&) { return ag::pairwise_distance(x, x, Pairwise::SqEuclidean); },
        [](const Variable& x, const Variable&) { return ag::pairwise_distance(x, x, Pairwise::Euclidean); },
        [](const Variable& x, const Variable&) { return ag::pairwise_distance(x, x, Pairwise::Cosine); }};
    for (const Tensor& base : {e, zero}) {  // also all-zero embeddings (cosine's clamp)
      for (size_t k = 0; k < ops.size(); ++k) {
        Variable a(base.clone(), true), b(base.clone(), true);
        Variable d = ops[k](a, b);
        EXPECT_TRUE(all_finite(d.data())) << "op " << k;
        Tensor gseed = Tensor::ones(d.shape(), dt);
        d.backward(gseed);
        EXPECT_TRUE(all_finite(a.grad())) << "op " << k;
        if (b.grad().defined()) {
          EXPECT_TRUE(all_finite(b.grad())) << "op " << k;
        }
      }
    }
    // Plain L2 of identical rows is exactly 0 with a zero gradient (the stated subgradient).
    Variable a(e.clone(), true);
    Variable d = ag::l2_distance(a, Variable(e.clone()), false);
    EXPECT_TRUE(test::all_close(Tensor::zeros({6}, dt), d.data(), 0, 0));
    d.backward(Tensor::ones({6}, dt));
    EXPECT_TRUE(test::all_close(Tensor::zeros({6, 8}, dt), a.grad(), 0, 0));
  }
}

TEST(DistanceTest, PairwiseNeverNegativeOnNearDuplicates) {
  // Rows of b are rows of a plus 1e-6 noise, with large norms so the expansion's
  // cancellation is at its worst; float32 especially.
  for (DType dt : {DType::F32, DType::F64}) {
    Tensor a = test::rand({64, 128}, 10, 20, DType::F64, Device::cpu(), 9);
    Tensor noise = test::rand({64, 128}, -1e-6, 1e-6, DType::F64, Device::cpu(), 10);
    auto av = a.to_double_vector(), nv = noise.to_double_vector();
    for (size_t i = 0; i < av.size(); ++i) nv[i] += av[i];
    Tensor b = Tensor::from_vector(nv, {64, 128}).to(dt);
    Tensor ad = a.to(dt);
    for (Pairwise m : {Pairwise::SqEuclidean, Pairwise::Euclidean}) {
      for (const Tensor& rhs : {b, ad}) {
        auto r = kernels::pairwise_distance_forward(m, ad, rhs);
        for (double v : r.out.to_double_vector()) ASSERT_GE(v, 0.0) << kernels::pairwise_name(m);
      }
    }
  }
}

// Embeddings clustered far from the origin (sigmoid outputs near 0.5, as in the
// Koch branch at initialisation): small float32 distances must survive. Reference:
// direct differences in float64. Without centring, the expansion's error
// (~ulp(|a|^2) = ulp(1024) ~ 6e-5 here) swamps distances of ~1e-4.
TEST(DistanceTest, PairwiseAccurateForPointsFarFromOrigin) {
  const int64_t M = 5, N = 20, D = 4096;
  std::vector<double> a = test::rand_vec(M * D, -1e-3, 1e-3, 21), b = test::rand_vec(N * D, -1e-3, 1e-3, 22);
  for (auto& x : a) x += 0.5;
  for (auto& x : b) x += 0.5;
  std::vector<double> ref(M * N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < D; ++k) s += (a[i * D + k] - b[j * D + k]) * (a[i * D + k] - b[j * D + k]);
      ref[i * N + j] = s;
    }
  Tensor ta = Tensor::from_vector(a, {M, D}).to(DType::F32), tb = Tensor::from_vector(b, {N, D}).to(DType::F32);
  Tensor sq = ag::pairwise_distance(Variable(ta), Variable(tb), Pairwise::SqEuclidean).data();
  // ~2.7e-3 squared distances; float32 inputs carry ~3e-8 relative rounding of the
  // differences, so 1e-3 relative is a loose but meaningful bound (the uncentred
  // expansion is off by more than 2 %).
  EXPECT_TRUE(test::all_close(ref, sq.to_double_vector(), 0, 1e-3));
  Tensor md = kernels::pairwise_distance_matrix(ta, true);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < M; ++j) {
      double s = 0;
      for (int64_t k = 0; k < D; ++k) s += (a[i * D + k] - a[j * D + k]) * (a[i * D + k] - a[j * D + k]);
      EXPECT_NEAR(md.to_double_vector()[i * M + j], s, 1e-3 * s + 1e-12) << i << "," << j;
    }
}

// The miners' (B, B) matrix is the pairwise implementation's self case. The
// Omniglot study mines from it, so it must keep the exact operations it had as
// a separate helper: centre on the batch mean, Gram matrix by our GEMM, norms
// from the Gram diagonal, max(G_ii + G_jj - 2 G_ij, 0), diagonal 0, sqrt for
// plain L2. Compared bit for bit (tolerance 0).
TEST(DistanceTest, MinerMatrixIsTheGramFormBitForBit) {
  for (DType dt : {DType::F32, DType::F64}) {
    Tensor e = test::randn({37, 24}, dt, Device::cpu(), 31);
    Tensor ec = kernels::binary(kernels::BinaryOp::Sub, e, kernels::mean(e, {0}, true));
    std::vector<double> G = kernels::matmul(ec, ec, false, true).to_double_vector();
    const int64_t B = 37;
    for (bool squared : {true, false}) {
      std::vector<double> ref(B * B);
      for (int64_t i = 0; i < B; ++i)
        for (int64_t j = 0; j < B; ++j) {
          if (dt == DType::F32) {  // the same float operations, in float
            float v = i == j ? 0.f
                             : float(G[i * B + i]) + float(G[j * B + j]) - 2.f * float(G[i * B + j]);
            v = v > 0.f ? v : 0.f;
            ref[i * B + j] = squared ? v : std::sqrt(v);
          } else {
            double v = i == j ? 0.0 : G[i * B + i] + G[j * B + j] - 2.0 * G[i * B + j];
            v = v > 0.0 ? v : 0.0;
            ref[i * B + j] = squared ? v : std::sqrt(v);
          }
        }
      EXPECT_TRUE(test::all_close(ref, kernels::pairwise_distance_matrix(e, squared).to_double_vector(),
                                  0, 0))
          << dtype_name(dt) << (squared ? " squared" : " plain");
    }
  }
}

// pairwise_distance_matrix with a metric: every metric against the double loops;
// symmetric, and the diagonal exactly 0 for L1 and the L2 metrics.
TEST(DistanceTest, MinerMatrixAllMetrics) {
  const int64_t B = 9, D = 5;
  Tensor e = test::randn({B, D}, DType::F64, Device::cpu(), 32);
  auto ev = e.to_double_vector();
  for (Pairwise m : kMetrics) {
    auto out = kernels::pairwise_distance_matrix(e, m).to_double_vector();
    // Gram-based metrics: ~1e-15 * ||e||^2 absolute (the expansion).
    EXPECT_TRUE(test::all_close(pairwise_ref(ev, ev, B, B, D, m), out, 1e-12, 1e-12))
        << kernels::pairwise_name(m);
    for (int64_t i = 0; i < B; ++i) {
      if (m != Pairwise::Cosine) {
        EXPECT_EQ(out[i * B + i], 0.0) << kernels::pairwise_name(m);
      }
      for (int64_t j = 0; j < B; ++j)
        EXPECT_EQ(out[i * B + j], out[j * B + i]) << kernels::pairwise_name(m) << " " << i << "," << j;
    }
  }
}

// The fused losses and row_distance share one per-row squared distance: the
// loss's d(a, p) is row_distance(L2Squared) bit for bit (float and double, D not
// a multiple of the 8-lane blocking).
TEST(DistanceTest, LossDistancesAreRowDistances) {
  for (DType dt : {DType::F32, DType::F64}) {
    for (int64_t D : {1, 8, 29}) {
      Tensor a = test::randn({11, D}, dt, Device::cpu(), 33);
      Tensor p = test::randn({11, D}, dt, Device::cpu(), 34);
      Tensor n = test::randn({11, D}, dt, Device::cpu(), 35);
      kernels::TripletLossParams P;  // Schroff, squared distances
      auto r = kernels::triplet_loss_terms(P, a, p, n, kernels::Reduction::Mean);
      EXPECT_TRUE(test::all_close(kernels::row_distance_forward(kernels::RowDist::L2Squared, a, p),
                                  r.dp, 0, 0));
      EXPECT_TRUE(test::all_close(kernels::row_distance_forward(kernels::RowDist::L2Squared, a, n),
                                  r.dn, 0, 0));
    }
  }
}

TEST(DistanceTest, RowDistanceRejectsCosineWithAClearError) {
  Tensor a = test::randn({3, 4}, DType::F64, Device::cpu(), 36);
  try {
    kernels::row_distance_forward(kernels::Metric::Cosine, a, a);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row_distance"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cosine"), std::string::npos) << e.what();
  }
}

TEST(DistanceCudaTest, Parity) {
  MN_SKIP_IF_NO_CUDA();
  using kernels::RowDist;
  for (DType dt : {DType::F32, DType::F64}) {
    // float32: GEMM blocking and reduction order differ between devices; the
    // expansion amplifies absolute error to ~1e-6 * ||a||^2 (||a||^2 ~ D here).
    const double tol = dt == DType::F32 ? 2e-4 : 1e-10;
    for (auto mnd : std::vector<std::array<int64_t, 3>>{{150, 150, 4096}, {150, 150, 128},
                                                         {1, 7, 3}, {33, 65, 17}}) {
      Tensor a = test::randn({mnd[0], mnd[2]}, dt, Device::cpu(), 11);
      Tensor b = test::randn({mnd[1], mnd[2]}, dt, Device::cpu(), 12);
      for (Pairwise m : kMetrics) {
        if (m == Pairwise::L1 && mnd[2] == 4096) continue;  // O(M N D) direct form: skip the big case
        auto c = kernels::pairwise_distance_forward(m, a, b);
        auto d = kernels::pairwise_distance_forward(m, a.cuda(), b.cuda());
        EXPECT_TRUE(test::all_close(c.out, d.out, tol, tol)) << kernels::pairwise_name(m);
        Tensor g = test::randn({mnd[0], mnd[1]}, dt, Device::cpu(), 13);
        auto gc = kernels::pairwise_distance_backward(m, a, b, c, g);
        auto gd = kernels::pairwise_distance_backward(m, a.cuda(), b.cuda(), d, g.cuda());
        EXPECT_TRUE(test::all_close(gc.first, gd.first, tol * 10, tol)) << kernels::pairwise_name(m);
        EXPECT_TRUE(test::all_close(gc.second, gd.second, tol * 10, tol)) << kernels::pairwise_name(m);
      }
      // The self case (the miners' matrix): same kernels path on both devices.
      for (Pairwise m : kMetrics) {
        Tensor ad = a.cuda();
        EXPECT_TRUE(test::all_close(kernels::pairwise_distance_forward(m, a, a).out,
                                    kernels::pairwise_distance_forward(m, ad, ad).out, tol, tol))
            << "self " << kernels::pairwise_name(m);
      }
      Tensor b2 = test::randn({mnd[0], mnd[2]}, dt, Device::cpu(), 14);
      Tensor g1 = test::randn({mnd[0]}, dt, Device::cpu(), 15);
      for (RowDist k : {RowDist::L1, RowDist::L2Squared, RowDist::L2}) {
        Tensor oc = kernels::row_distance_forward(k, a, b2);
        Tensor od = kernels::row_distance_forward(k, a.cuda(), b2.cuda());
        EXPECT_TRUE(test::all_close(oc, od, tol, tol));
        auto gc = kernels::row_distance_backward(k, a, b2, oc, g1);
        auto gd = kernels::row_distance_backward(k, a.cuda(), b2.cuda(), od, g1.cuda());
        EXPECT_TRUE(test::all_close(gc.first, gd.first, tol, tol));
      }
      Tensor ac = kernels::abs_diff_forward(a, b2);
      EXPECT_TRUE(test::all_close(ac, kernels::abs_diff_forward(a.cuda(), b2.cuda()), 0, 0));
    }
  }
}

}  // namespace
}  // namespace mn
