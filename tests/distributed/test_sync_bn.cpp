// Synchronised batch-norm (autograd/ops_dist.h: sync_batch_norm; nn::sync_batch_norms).
// SyncBatchNorm.* in a world of one (ctest's single-process run: it must equal the
// fused batch_norm, and its gradient passes a float64 gradcheck); Mpi.* on 2 ranks
// (distributed.mpi_2ranks): 2 ranks x 4 rows with --sync-bn's statistics step like one
// process x 8 rows, and without them they do not.
#include <gtest/gtest.h>

#include <memory>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "autograd/ops_dist.h"
#include "autograd/ops_layers.h"
#include "nn/distributed.h"
#include "nn/layers/batchnorm.h"
#include "nn/layers/linear.h"
#include "nn/optim/optimizer.h"
#include "runtime/comm.h"
#include "runtime/rng.h"

namespace {

using mn::DType;
using mn::Tensor;
using mn::ag::Variable;

Tensor randn(const mn::Shape& s, uint64_t seed) {
  Tensor t = Tensor::zeros(s, DType::F64);
  mn::Generator g(seed);
  mn::normal_(t, 0.5, 2.0, g);
  return t;
}

TEST(SyncBatchNorm, WorldOfOneEqualsBatchNorm) {
  auto comm = mn::make_single_comm();
  const Tensor x = randn({6, 3, 4, 5}, 1), gamma = randn({3}, 2), beta = randn({3}, 3);
  Tensor rm1 = Tensor::zeros({3}, DType::F64), rv1 = Tensor::ones({3}, DType::F64);
  Tensor rm2 = rm1.clone(), rv2 = rv1.clone();
  Variable x1(x, true), g1(gamma, true), b1(beta, true), x2(x, true), g2(gamma, true), b2(beta, true);
  const Variable y1 = mn::ag::batch_norm(x1, g1, b1, rm1, rv1, true, 0.1, 1e-5);
  const Variable y2 = mn::ag::sync_batch_norm(x2, g2, b2, rm2, rv2, 0.1, 1e-5, *comm);
  const Tensor w = randn({6, 3, 4, 5}, 4);
  mn::ag::sum(mn::ag::mul(y1, Variable(w))).backward();
  mn::ag::sum(mn::ag::mul(y2, Variable(w))).backward();
  auto near = [](const Tensor& a, const Tensor& b, const char* what) {
    const auto u = a.to_double_vector(), v = b.to_double_vector();
    ASSERT_EQ(u.size(), v.size()) << what;
    for (size_t i = 0; i < u.size(); ++i) EXPECT_NEAR(u[i], v[i], 1e-11 * (1 + std::abs(u[i]))) << what << " " << i;
  };
  near(y1.data(), y2.data(), "y");
  near(x1.grad(), x2.grad(), "dx");
  near(g1.grad(), g2.grad(), "dgamma");
  near(b1.grad(), b2.grad(), "dbeta");
  near(rm1, rm2, "running_mean");
  near(rv1, rv2, "running_var");
}

TEST(SyncBatchNorm, GradcheckFloat64) {
  auto comm = mn::make_single_comm();
  auto r = mn::ag::gradcheck(
      [&](const std::vector<Variable>& v) {
        return mn::ag::sync_batch_norm(v[0], v[1], v[2], Tensor(), Tensor(), 0.1, 1e-5, *comm);
      },
      {randn({4, 3, 2, 2}, 5), randn({3}, 6), randn({3}, 7)});
  EXPECT_TRUE(r.ok) << r.message;
}

// Linear(5, 6) -> BatchNorm(6) -> ReLU -> Linear(6, 2), the loss mean(y^2).
struct BnNet : mn::nn::Module {
  std::shared_ptr<mn::nn::Linear> a, b;
  std::shared_ptr<mn::nn::BatchNorm> bn;
  BnNet() {
    mn::Generator g(31);
    mn::nn::LinearOptions la(5, 6), lb(6, 2);
    la.dtype = lb.dtype = DType::F64;
    a = register_module("a", std::make_shared<mn::nn::Linear>(la, g));
    bn = register_module("bn", std::make_shared<mn::nn::BatchNorm>(mn::nn::BatchNormOptions(6).of(DType::F64)));
    b = register_module("b", std::make_shared<mn::nn::Linear>(lb, g));
  }
  Variable forward(const Variable& x) override { return b->forward(mn::ag::relu(bn->forward(a->forward(x)))); }
};

// 3 momentum-SGD steps: 2 ranks x 4 rows (sync or not) against 1 process x 8 rows;
// the worst |difference| of the parameters and running statistics.
double steps_against_one_process(bool sync) {
  mn::Communicator& c = mn::world();
  const int r = c.rank();
  BnNet ref, net;
  mn::nn::SGD ref_opt(ref.parameters(), 0.1, 0.9), opt(net.parameters(), 0.1, 0.9);
  mn::nn::DataParallel dp(net, c);
  EXPECT_EQ(mn::nn::sync_batch_norms(net, sync ? &c : nullptr), 1);
  auto loss = [](mn::nn::Module& m, const Tensor& x) {
    const Variable y = m.forward(Variable(x));
    return mn::ag::mean(mn::ag::mul(y, y));
  };
  for (int step = 0; step < 3; ++step) {
    const Tensor x = randn({8, 5}, 40 + step);
    loss(ref, x).backward();
    ref_opt.step();
    ref_opt.zero_grad();
    dp.backward(loss(net, x.narrow(0, 4 * r, 4)));
    opt.step();
    opt.zero_grad();
  }
  double worst = 0;
  auto cmp = [&](const Tensor& a, const Tensor& b) {
    const auto u = a.to_double_vector(), v = b.to_double_vector();
    for (size_t i = 0; i < u.size(); ++i) worst = std::max(worst, std::abs(u[i] - v[i]) / (1 + std::abs(u[i])));
  };
  auto pa = ref.parameters(), pb = net.parameters();
  for (size_t i = 0; i < pa.size(); ++i) cmp(pa[i].data(), pb[i].data());
  cmp(ref.bn->running_mean(), net.bn->running_mean());
  cmp(ref.bn->running_var(), net.bn->running_var());
  return worst;
}

TEST(Mpi, SyncBatchNormTwoRanksEqualOneProcess) {
  if (mn::world().size() != 2) GTEST_SKIP() << "needs mpirun -np 2: ctest runs it as distributed.mpi_2ranks";
  EXPECT_LE(steps_against_one_process(true), 1e-12);
}

// The comparison can fail: per-rank statistics leave the 1-process weights.
TEST(Mpi, PerRankBatchNormDiffersFromOneProcess) {
  if (mn::world().size() != 2) GTEST_SKIP() << "needs mpirun -np 2: ctest runs it as distributed.mpi_2ranks";
  EXPECT_GT(steps_against_one_process(false), 1e-6);
}

}  // namespace
