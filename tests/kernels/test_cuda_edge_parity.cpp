// Edge-case parity of the CUDA kernels against the CPU oracle: grid-dimension
// limits (batch norm with more than 65535 channels), the launch paths the
// regular parity tests miss (reductions with r > 1024 rows, ties and NaNs
// across lanes and warps), empty tensors, one-element and odd sizes, and miners
// on distance matrices full of ties.
//
// Every check is a function of the device it compares with the CPU. The GPU
// tests call it with a CUDA device (and skip without one); SelfCheckOnCpu calls
// it with the CPU, so the test code itself (shapes, arguments, the CPU side) is
// exercised on machines without a GPU and cannot fail for a reason of its own
// once a GPU is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/activation.h"
#include "kernels/batchnorm.h"
#include "kernels/distance.h"
#include "kernels/dropout.h"
#include "kernels/elementwise.h"
#include "kernels/indexing.h"
#include "kernels/join.h"
#include "kernels/linear.h"
#include "kernels/losses.h"
#include "kernels/lrn.h"
#include "kernels/miners.h"
#include "kernels/pool.h"
#include "kernels/reduce.h"
#include "tests/common/test_util.h"

namespace mn {
namespace {
namespace K = kernels;

// ---- batch norm with C > 65535 (gridDim.y limit) ------------------------------
// The statistics kernels used to put the channel on gridDim.y, which is capped at
// 65535: a BatchNorm1d over (N, F) with F > 65535 failed to launch.
void bn_many_channels(Device dev) {
  for (DType dt : {DType::F32, DType::F64}) {
    // The CPU runs a two-pass variance in double, the GPU Welford in T. With only
    // M = 4 or 6 values per channel some of the 70,000 channels have var ~1e-3,
    // where float32 m2 carries ~1e-5 relative error (invstd, y and dx follow):
    // 1e-4 as in BatchNormCudaTest. float64: ~1e-14, so 1e-10.
    const double tol = dt == DType::F32 ? 1e-4 : 1e-10;
    for (Shape s : {Shape{4, 70000}, Shape{3, 65537, 2}}) {
      SCOPED_TRACE(shape_str(s));
      const int64_t C = s[1];
      Tensor x = test::randn(s, dt, Device::cpu(), 21);
      Tensor gamma = test::rand({C}, 0.5, 1.5, dt, Device::cpu(), 22);
      Tensor beta = test::rand({C}, -1, 1, dt, Device::cpu(), 23);
      Tensor rm = Tensor::zeros({C}, dt), rv = Tensor::ones({C}, dt);
      Tensor rmd = rm.to(dev).clone(), rvd = rv.to(dev).clone();
      auto c = K::batchnorm_forward(x, gamma, beta, rm, rv, true, 0.1, 1e-5);
      auto d = K::batchnorm_forward(x.to(dev), gamma.to(dev), beta.to(dev), rmd, rvd, true, 0.1,
                                    1e-5);
      EXPECT_TRUE(test::all_close(c.y, d.y, tol, tol));
      EXPECT_TRUE(test::all_close(c.mean, d.mean, tol, tol));
      EXPECT_TRUE(test::all_close(c.invstd, d.invstd, tol, tol));
      EXPECT_TRUE(test::all_close(rm, rmd, tol, tol));
      EXPECT_TRUE(test::all_close(rv, rvd, tol, tol));
      Tensor gy = test::randn(s, dt, Device::cpu(), 24);
      auto gc = K::batchnorm_backward(x, gy, c.mean, c.invstd, gamma, true);
      auto gd = K::batchnorm_backward(x.to(dev), gy.to(dev), d.mean, d.invstd, gamma.to(dev),
                                      true);
      EXPECT_TRUE(test::all_close(gc.dx, gd.dx, tol, tol));
      EXPECT_TRUE(test::all_close(gc.dgamma, gd.dgamma, tol, tol));
      EXPECT_TRUE(test::all_close(gc.dbeta, gd.dbeta, tol, tol));
    }
  }
}

// ---- reductions: every launch path, with ties and NaNs --------------------------
// Values from a few levels only, so maxima and minima repeat at indices owned by
// different lanes, warps and blocks: the index must be the lowest one (CPU rule).
Tensor tied(const Shape& s, DType dt, uint64_t seed) {
  std::vector<double> v = test::rand_vec(numel_of(s), 0, 4, seed);
  for (double& e : v) e = std::floor(e);  // {0, 1, 2, 3}
  return Tensor::from_vector(v, s).to(dt);
}

void reduce_paths(Device dev) {
  for (DType dt : {DType::F32, DType::F64}) {
    // Sums accumulate in double on both devices (in another order): 1e-6 relative
    // of float rounding; max/min values and indices are exact.
    // {5, 3000} dim 1: inner == 1, r > 1024 -> one block per row (reduce_rows_block_kernel).
    // {7, 1000} dim 1: one warp per row. {50, 37} dim 0: one thread per column.
    // {200003}: the two-pass whole-tensor path.
    for (auto [s, d] : std::vector<std::pair<Shape, int64_t>>{
             {{5, 3000}, 1}, {{7, 1000}, 1}, {{50, 37}, 0}, {{200003}, 0}, {{1}, 0}}) {
      SCOPED_TRACE(shape_str(s) + " dim " + std::to_string(d));
      Tensor x = tied(s, dt, 31);
      Tensor xd = x.to(dev);
      EXPECT_TRUE(test::all_close(K::sum(x, {d}), K::sum(xd, {d}), 1e-6, 1e-6));
      EXPECT_TRUE(test::all_close(K::mean(x, {d}), K::mean(xd, {d}), 1e-6, 1e-6));
      for (bool mx : {true, false}) {
        auto a = mx ? K::max_dim(x, d) : K::min_dim(x, d);
        auto b = mx ? K::max_dim(xd, d) : K::min_dim(xd, d);
        EXPECT_TRUE(test::all_close(a.values, b.values, 0, 0));
        EXPECT_TRUE(test::all_close(a.indices, b.indices, 0, 0));
      }
      auto a = K::max_all(x), b = K::max_all(xd);
      EXPECT_TRUE(test::all_close(a.indices, b.indices, 0, 0));
      // NaN wins and the first NaN's index is reported: put two NaNs far apart.
      std::vector<double> v = x.to(DType::F64).to_vector<double>();
      const int64_t n = static_cast<int64_t>(v.size());
      if (n >= 2) {
        v[static_cast<size_t>(n - 1)] = std::numeric_limits<double>::quiet_NaN();
        v[static_cast<size_t>(n / 2)] = std::numeric_limits<double>::quiet_NaN();
      }
      Tensor xn = Tensor::from_vector(v, s).to(dt);
      auto c = K::max_dim(xn, d), e = K::max_dim(xn.to(dev), d);
      EXPECT_TRUE(test::all_close(c.values, e.values, 0, 0));
      EXPECT_TRUE(test::all_close(c.indices, e.indices, 0, 0));
      auto f = K::min_all(xn), g = K::min_all(xn.to(dev));
      EXPECT_TRUE(test::all_close(f.values, g.values, 0, 0));
      EXPECT_TRUE(test::all_close(f.indices, g.indices, 0, 0));
    }
    // All -inf: the identity of max must not win over a real element.
    Tensor ninf = Tensor::full({3, 1500}, -std::numeric_limits<double>::infinity(), dt);
    EXPECT_TRUE(test::all_close(K::max_dim(ninf, 1).indices, K::max_dim(ninf.to(dev), 1).indices,
                                0, 0));
  }
}

// ---- empty tensors ----------------------------------------------------------------
void empty_tensors(Device dev) {
  for (DType dt : {DType::F32, DType::F64}) {
    Tensor e = Tensor::zeros({0, 3}, dt), ed = e.to(dev);
    EXPECT_EQ(K::unary(K::UnaryOp::Exp, ed).numel(), 0);
    EXPECT_EQ(K::binary(K::BinaryOp::Add, ed, Tensor::ones({3}, dt, dev)).numel(), 0);
    EXPECT_EQ(K::binary_scalar(K::BinaryOp::Mul, ed, 2.0, false).numel(), 0);
    // Reducing an empty dimension: sums are 0, means 0/0 = NaN, on both devices.
    Tensor z = Tensor::zeros({4, 0}, dt), z3 = Tensor::zeros({4, 0, 5}, dt);
    EXPECT_TRUE(test::all_close(K::sum(z, {1}), K::sum(z.to(dev), {1}), 0, 0));
    EXPECT_TRUE(test::all_close(K::mean(z, {1}), K::mean(z.to(dev), {1}), 0, 0));
    EXPECT_TRUE(test::all_close(K::sum(z3, {1}), K::sum(z3.to(dev), {1}), 0, 0));
    EXPECT_TRUE(test::all_close(K::sum(e), K::sum(ed), 0, 0));
    EXPECT_EQ(K::sum(ed, {0}).numel(), 3);
    EXPECT_TRUE(test::all_close(K::sum(e, {0}), K::sum(ed, {0}), 0, 0));
    EXPECT_EQ(K::row_distance_forward(K::RowDist::L2, ed, ed).numel(), 0);
    auto pw = K::pairwise_distance_forward(K::Pairwise::Euclidean, ed,
                                           Tensor::ones({2, 3}, dt, dev));
    EXPECT_EQ(pw.out.numel(), 0);
    EXPECT_EQ(K::dropout_forward(ed, 0.5, 1, 0).y.numel(), 0);
    EXPECT_EQ(K::index_select(Tensor::ones({4, 3}, dt, dev), 0,
                              Tensor::zeros({0}, DType::I64, dev))
                  .numel(),
              0);
    EXPECT_EQ(K::masked_select(ed, Tensor::zeros({0, 3}, DType::U8, dev)).numel(), 0);
    Tensor cat = K::concat({Tensor::ones({2, 3}, dt, dev), ed}, 0);
    EXPECT_TRUE(test::all_close(Tensor::ones({2, 3}, dt), cat, 0, 0));
    EXPECT_TRUE(test::all_close(Tensor::zeros({3}, dt), K::linear_backward_bias(ed), 0, 0));
    auto mp = K::max_pool2d_forward(Tensor::zeros({0, 2, 4, 4}, dt, dev), K::Pool2dParams{});
    EXPECT_EQ(mp.first.numel(), 0);
    EXPECT_EQ(K::lrn_forward(Tensor::zeros({0, 4, 2, 2}, dt, dev), K::LrnOptions{}).y.numel(), 0);
    // Losses over zero terms: Mean divides by nothing (normaliser 0), stats all 0.
    K::TripletLossParams P;
    for (K::Reduction red : {K::Reduction::Mean, K::Reduction::MeanNonZero}) {
      K::TermResult c = K::triplet_loss_terms(P, e, e, e, red);
      K::TermResult g = K::triplet_loss_terms(P, ed, ed, ed, red);
      EXPECT_TRUE(test::all_close(c.stats, g.stats, 0, 0));
      auto gg = K::triplet_loss_grad(g, Tensor::ones({1}, dt, dev), ed, ed, ed);
      EXPECT_EQ(gg[0].numel(), 0);
    }
  }
}

// ---- one element and odd sizes ------------------------------------------------------
void small_and_odd(Device dev) {
  const K::TripletKind kinds[] = {K::TripletKind::Schroff,    K::TripletKind::Kumar,
                                  K::TripletKind::MarginL2,   K::TripletKind::SoftMargin,
                                  K::TripletKind::SoftmaxRatio, K::TripletKind::Global,
                                  K::TripletKind::GlobalTriplet};
  for (DType dt : {DType::F32, DType::F64}) {
    // float64: the device and the oracle agree to 1e-12. float32: they sum the <= 33
    // squares of a distance in different orders (warp tree vs 8 partials), and a
    // distance near 66 (33 squared differences of unit normals) carries an absolute
    // rounding near 1e-5 that the global losses' variance terms pass to the gradient
    // unscaled: the first H200 run found 1.8e-5 on a gradient of 0.06. So float32
    // results are held to the float64 truth instead: the GPU's error may be at most
    // twice the CPU oracle's largest error on the same tensor, plus 1e-6. A wrong
    // kernel is off by the size of the value and still fails.
    const double tol = dt == DType::F32 ? 1e-5 : 1e-12;
    auto close = [&](const Tensor& truth, const Tensor& c, const Tensor& g) {
      if (dt == DType::F64) return test::all_close(c, g, tol, tol);
      const std::vector<double> t = truth.to_double_vector(), cv = c.to_double_vector();
      double cpu_err = 0;
      for (size_t i = 0; i < t.size() && i < cv.size(); ++i)
        cpu_err = std::max(cpu_err, std::abs(cv[i] - t[i]));
      return test::all_close(truth, g, 2 * cpu_err + 1e-6, 0);
    };
    for (auto [N, D] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 33}, {3, 1}, {5, 33}}) {
      SCOPED_TRACE("N " + std::to_string(N) + " D " + std::to_string(D));
      Tensor a = test::randn({N, D}, dt, Device::cpu(), 41);
      Tensor p = test::randn({N, D}, dt, Device::cpu(), 42);
      Tensor n = test::randn({N, D}, dt, Device::cpu(), 43);
      for (K::TripletKind k : kinds)
        for (bool unbiased : {false, true}) {
          SCOPED_TRACE(K::triplet_kind_name(k));
          K::TripletLossParams P;
          P.kind = k;
          P.margin = 0.5;
          P.unbiased_var = unbiased;  // N = 1: the unbiased variance falls back to N
          P.dist = k == K::TripletKind::MarginL2 ? K::DistKind::Plain : K::DistKind::Squared;
          K::TermResult c = K::triplet_loss_terms(P, a, p, n, K::Reduction::Mean);
          K::TermResult g =
              K::triplet_loss_terms(P, a.to(dev), p.to(dev), n.to(dev), K::Reduction::Mean);
          const Tensor a64 = a.to(DType::F64), p64 = p.to(DType::F64), n64 = n.to(DType::F64);
          K::TermResult t = K::triplet_loss_terms(P, a64, p64, n64, K::Reduction::Mean);
          EXPECT_TRUE(close(t.stats, c.stats, g.stats));
          EXPECT_TRUE(close(t.loss, c.loss, g.loss));
          Tensor one = Tensor::ones({1}, dt);
          auto gc = K::triplet_loss_grad(c, one, a, p, n);
          auto gg = K::triplet_loss_grad(g, one.to(dev), a.to(dev), p.to(dev), n.to(dev));
          auto gt = K::triplet_loss_grad(t, Tensor::ones({1}, DType::F64), a64, p64, n64);
          for (int q = 0; q < 3; ++q) EXPECT_TRUE(close(gt[q], gc[q], gg[q]));
        }
      for (K::RowDist rd : {K::RowDist::L1, K::RowDist::L2Squared, K::RowDist::L2})
        EXPECT_TRUE(test::all_close(K::row_distance_forward(rd, a, p),
                                    K::row_distance_forward(rd, a.to(dev), p.to(dev)), tol, tol));
    }
    // Dropout at the ends of [0, 1] and with partial Philox blocks: bit-identical.
    for (int64_t n : {1, 2, 3, 5}) {
      Tensor x = test::randn({n}, dt, Device::cpu(), 44);
      for (double pr : {0.0, 0.3, 1.0}) {
        auto c = K::dropout_forward(x, pr, 77, (uint64_t{1} << 32) - 1);
        auto g = K::dropout_forward(x.to(dev), pr, 77, (uint64_t{1} << 32) - 1);
        EXPECT_TRUE(test::all_close(c.mask, g.mask, 0, 0));
        EXPECT_TRUE(test::all_close(c.y, g.y, 0, 0));
      }
    }
    // One-element batch norm in evaluation mode and a (1, 1) pairwise matrix.
    Tensor x1 = test::randn({1, 1}, dt, Device::cpu(), 45);
    Tensor rm = Tensor::full({1}, 0.25, dt), rv = Tensor::full({1}, 2.0, dt);
    auto c = K::batchnorm_forward(x1, Tensor(), Tensor(), rm, rv, false, 0.1, 1e-5);
    auto g = K::batchnorm_forward(x1.to(dev), Tensor(), Tensor(), rm.to(dev), rv.to(dev), false,
                                  0.1, 1e-5);
    EXPECT_TRUE(test::all_close(c.y, g.y, tol, tol));
    for (K::Pairwise m : {K::Pairwise::SqEuclidean, K::Pairwise::Euclidean, K::Pairwise::Cosine})
      EXPECT_TRUE(test::all_close(K::pairwise_distance_forward(m, x1, x1).out,
                                  K::pairwise_distance_forward(m, x1.to(dev), x1.to(dev)).out,
                                  tol, tol));
  }
}

// ---- miners on distance matrices with many ties ---------------------------------------
// Integer distances in {1, 2, 3}: every selection has to fall back to the lowest
// index, and the pair miner's Q-th smallest key is shared by many pairs spread
// over several rows (the tie-count scan of the CUDA pair miner).
void miners_with_ties(Device dev) {
  const int64_t B = 24;
  std::vector<double> d(static_cast<size_t>(B * B));
  std::vector<double> r = test::rand_vec(B * B, 1, 4, 51);
  for (int64_t i = 0; i < B; ++i)
    for (int64_t j = 0; j < B; ++j)
      d[i * B + j] = i == j ? 0.0 : std::floor(r[std::min(i, j) * B + std::max(i, j)]);
  std::vector<int64_t> lab(static_cast<size_t>(B));
  for (int64_t i = 0; i < B; ++i) lab[i] = (i * 7) % 4;
  Tensor labels = Tensor::from_vector(lab, {B});
  for (DType dt : {DType::F32, DType::F64}) {
    Tensor dist = Tensor::from_vector(d, {B, B}).to(dt);
    Tensor dd = dist.to(dev), ld = labels.to(dev);
    for (int kind = 0; kind <= 5; ++kind)
      for (int km = 0; km <= (kind == 5 ? 6 : 0); ++km) {
        SCOPED_TRACE("kind " + std::to_string(kind) + " k " + std::to_string(km));
        K::MinerParams p;
        p.kind = static_cast<K::MinerKind>(kind);
        p.kminer = static_cast<K::KMiner>(km);
        p.margin = 1.0;  // integer distances: d(a,p) - d(a,n) + 1 > 0 ties at the margin
        p.fallback = K::SemiHardFallback::Hardest;
        p.dw_dim = 8;
        Generator g1(3, 0), g2(3, 0);
        K::MinedTriplets c = K::mine_triplets(dist, labels, p, &g1);
        K::MinedTriplets g = K::mine_triplets(dd, ld, p, &g2);
        EXPECT_EQ(c.triplets.to_vector<int64_t>(), g.triplets.to_vector<int64_t>());
        if (kind == 5) {
          EXPECT_EQ(c.pairs.to_vector<int64_t>(), g.pairs.to_vector<int64_t>());
        }
        EXPECT_EQ(g1.offset(), g2.offset());
      }
    for (K::PairNegatives neg : {K::PairNegatives::Random, K::PairNegatives::Hardest}) {
      Generator g1(4, 0), g2(4, 0);
      K::MinedPairs c = K::mine_pairs(dist, labels, neg, &g1);
      K::MinedPairs g = K::mine_pairs(dd, ld, neg, &g2);
      EXPECT_EQ(c.num_pos, g.num_pos);
      EXPECT_EQ(c.pairs.to_vector<int64_t>(), g.pairs.to_vector<int64_t>());
      EXPECT_EQ(c.is_pos.to_vector<int64_t>(), g.is_pos.to_vector<int64_t>());
    }
  }
  // Degenerate batches: one sample, and a single class (no negatives at all).
  for (int64_t b : {1, 5}) {
    Tensor dist = Tensor::zeros({b, b}, DType::F32), lab1 = Tensor::zeros({b}, DType::I64);
    K::MinerParams p;
    p.kind = K::MinerKind::BatchHard;
    EXPECT_EQ(K::mine_triplets(dist.to(dev), lab1.to(dev), p).triplets.numel(), 0);
    K::MinedPairs c = K::mine_pairs(dist, lab1, K::PairNegatives::Hardest);
    K::MinedPairs g = K::mine_pairs(dist.to(dev), lab1.to(dev), K::PairNegatives::Hardest);
    EXPECT_EQ(c.pairs.to_vector<int64_t>(), g.pairs.to_vector<int64_t>());
  }
}

TEST(CudaEdgeParity, SelfCheckOnCpu) {
  // The CPU against itself: only proves that the checks run (no throw, shapes
  // valid) where no GPU is present; the comparisons are trivially equal.
  bn_many_channels(Device::cpu());
  reduce_paths(Device::cpu());
  empty_tensors(Device::cpu());
  small_and_odd(Device::cpu());
  miners_with_ties(Device::cpu());
}

TEST(CudaEdgeParity, BatchNormMoreThan65535Channels) {
  MN_SKIP_IF_NO_CUDA();
  bn_many_channels(Device::cuda());
}

TEST(CudaEdgeParity, ReductionPathsTiesAndNaN) {
  MN_SKIP_IF_NO_CUDA();
  reduce_paths(Device::cuda());
}

TEST(CudaEdgeParity, EmptyTensors) {
  MN_SKIP_IF_NO_CUDA();
  empty_tensors(Device::cuda());
}

TEST(CudaEdgeParity, OneElementAndOddSizes) {
  MN_SKIP_IF_NO_CUDA();
  small_and_odd(Device::cuda());
}

TEST(CudaEdgeParity, MinersWithTies) {
  MN_SKIP_IF_NO_CUDA();
  miners_with_ties(Device::cuda());
}

}  // namespace
}  // namespace mn
