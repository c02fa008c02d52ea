// DataParallel's gradient semantics (nn/distributed.h), as PyTorch DDP's with
// find_unused_parameters: gradients accumulate across backward calls, a parameter a
// backward does not reach keeps what it had, a parameter without a gradient on every
// rank keeps none (so an optimizer skips it), and no_sync() accumulates locally with no
// collective. DataParallel.* run in a world of one (ctest's single-process run of this
// binary); Mpi.* need mpirun -np 2 (distributed.mpi_2ranks), Mpi4.* -np 4 (distributed.mpi_4ranks).
#include <gtest/gtest.h>

#include <cstdlib>

#include "autograd/ops.h"
#include "nn/distributed.h"
#include "nn/models/mlp.h"
#include "nn/optim/optimizer.h"
#include "runtime/comm.h"
#include "runtime/rng.h"

namespace {

using mn::Communicator;
using mn::DType;
using mn::ReduceOp;
using mn::Tensor;
using mn::ag::Variable;

// Three parameter vectors; the tests' losses use a and b, or a alone; c never.
struct ThreeParams : mn::nn::Module {
  Variable a, b, c;
  explicit ThreeParams(double shift = 0)
      : a(register_parameter("a", Tensor::from_vector<double>({0.5 + shift, -1.0, 2.0}, {3}))),
        b(register_parameter("b", Tensor::from_vector<double>({1.5, 0.25 - shift, -0.75}, {3}))),
        c(register_parameter("c", Tensor::from_vector<double>({3.0, 3.0, 3.0}, {3}))) {}
};

Variable input(std::vector<double> v) { return Variable(Tensor::from_vector<double>(v, {3})); }
// sum(a * x) + sum(b * b * x): reaches a and b.
Variable loss_ab(ThreeParams& m, const Variable& x) {
  return mn::ag::add(mn::ag::sum(mn::ag::mul(m.a, x)), mn::ag::sum(mn::ag::mul(mn::ag::mul(m.b, m.b), x)));
}
// sum(a * a * x): reaches a only.
Variable loss_a(ThreeParams& m, const Variable& x) { return mn::ag::sum(mn::ag::mul(mn::ag::mul(m.a, m.a), x)); }

// A world of one that counts the collectives it is asked for.
class CountingComm : public Communicator {
 public:
  int calls = 0;
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "counting"; }
  mn::Device device() const override { return mn::Device::cpu(); }
  void all_reduce(Tensor& t, ReduceOp op) override { ++calls, inner_->all_reduce(t, op); }
  std::unique_ptr<mn::CommRequest> all_reduce_async(Tensor& t, ReduceOp op) override {
    ++calls;
    return inner_->all_reduce_async(t, op);
  }
  void all_gather(const Tensor& in, Tensor& out) override { ++calls, inner_->all_gather(in, out); }
  void reduce_scatter(const Tensor& in, Tensor& out) override { ++calls, inner_->reduce_scatter(in, out); }
  void broadcast(Tensor& t, int root) override { ++calls, inner_->broadcast(t, root); }
  void barrier() override { ++calls; }
  [[noreturn]] void abort(int code) override {
    inner_->abort(code);
    std::abort();  // not reached: abort() of the inner communicator does not return
  }

 private:
  std::unique_ptr<Communicator> inner_ = mn::make_single_comm();
};

std::vector<double> grad_of(const Variable& v) { return v.grad().to_double_vector(); }

// Two backward calls without zero_grad, the second not reaching b: b keeps the first
// one's gradient (it was overwritten with zeros), a sums both, c never gets one.
TEST(DataParallel, GradientsAccumulateAcrossBackwardCallsLikeOneProcess) {
  ThreeParams ref, m;
  auto comm = mn::make_single_comm();
  mn::nn::DataParallel dp(m, *comm);
  loss_ab(ref, input({1, 2, 3})).backward();
  loss_a(ref, input({-1, 0.5, 4})).backward();
  dp.backward(loss_ab(m, input({1, 2, 3})));
  dp.backward(loss_a(m, input({-1, 0.5, 4})));
  EXPECT_EQ(grad_of(m.a), grad_of(ref.a));
  ASSERT_TRUE(m.b.has_grad());
  EXPECT_EQ(grad_of(m.b), grad_of(ref.b)) << "b's gradient from the first backward was lost";
  EXPECT_FALSE(ref.c.has_grad());
  EXPECT_FALSE(m.c.has_grad()) << "a parameter no rank used was given a (zero) gradient";
}

// A parameter used nowhere keeps no gradient, so Adam (with weight decay, which would
// move it on a zero gradient) leaves it as it was, as in a 1-process run.
TEST(DataParallel, ParameterUnusedEverywhereIsUntouchedByAdam) {
  ThreeParams m;
  auto comm = mn::make_single_comm();
  mn::nn::DataParallel dp(m, *comm);
  mn::nn::Adam opt(m.parameters(), 0.1, /*weight_decay=*/0.5);
  const auto b0 = m.b.data().to_double_vector(), c0 = m.c.data().to_double_vector();
  for (int step = 0; step < 3; ++step) {
    dp.backward(loss_a(m, input({1, -2, 0.5})));
    opt.step();
    opt.zero_grad();
  }
  EXPECT_FALSE(m.b.has_grad());
  EXPECT_EQ(m.b.data().to_double_vector(), b0);
  EXPECT_EQ(m.c.data().to_double_vector(), c0);
}

// no_sync(): the backward calls inside it start no collective and accumulate; the
// synchronised one after it reduces the sum (here, a world of one: the same values).
TEST(DataParallel, NoSyncAccumulatesWithoutCollectives) {
  ThreeParams ref, m;
  CountingComm comm;
  mn::nn::DataParallel dp(m, comm);
  const std::vector<std::vector<double>> xs = {{1, 2, 3}, {0.5, -1, 2}, {-3, 1, 1}};
  for (const auto& x : xs) loss_ab(ref, input(x)).backward();
  {
    auto guard = dp.no_sync();
    dp.backward(loss_ab(m, input(xs[0])));
    dp.backward(loss_ab(m, input(xs[1])));
    EXPECT_EQ(comm.calls, 0) << "a backward inside no_sync() started a collective";
  }
  dp.backward(loss_ab(m, input(xs[2])));
  EXPECT_GT(comm.calls, 0);
  EXPECT_EQ(grad_of(m.a), grad_of(ref.a));
  EXPECT_EQ(grad_of(m.b), grad_of(ref.b));
  EXPECT_FALSE(m.c.has_grad());
}

#define MN_NEED_TWO_RANKS()                                                                         \
  do {                                                                                              \
    if (mn::world().size() != 2)                                                                    \
      GTEST_SKIP() << "needs mpirun -np 2 (this world has " << mn::world().size()                   \
                   << "): ctest runs it as distributed.mpi_2ranks";                                 \
  } while (0)

// Rank 0's loss reaches a and b, rank 1's only a: b's gradient is rank 0's over 2 on
// both ranks (rank 1 contributes zeros), c keeps none anywhere.
TEST(Mpi, ParameterUsedOnOneRankGetsTheAverageEverywhere) {
  MN_NEED_TWO_RANKS();
  Communicator& comm = mn::world();
  const int r = comm.rank();
  ThreeParams m, ref0;
  mn::nn::DataParallel dp(m, comm);
  const Variable x0 = input({1, 2, 3}), x1 = input({-2, 1, 0.5});
  dp.backward(r == 0 ? loss_ab(m, x0) : loss_a(m, x1));
  // What one process computes for the mean of the two ranks' losses.
  ThreeParams ref;
  mn::ag::mul(mn::ag::add(loss_ab(ref, x0), loss_a(ref, x1)), 0.5).backward();
  std::vector<double> da = grad_of(m.a), ea = grad_of(ref.a), db = grad_of(m.b), eb = grad_of(ref.b);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(da[i], ea[i], 1e-14);
    EXPECT_NEAR(db[i], eb[i], 1e-14);
  }
  EXPECT_FALSE(m.c.has_grad());
}

// Gradient accumulation over micro-batches: two backward calls inside no_sync() and a
// synchronised third, 2 ranks x 2 rows each, against one process accumulating the same
// three micro-batches of 4 rows (a mean loss per micro-batch), then a momentum-SGD step.
TEST(Mpi, NoSyncMicroBatchesEqualOneProcess) {
  MN_NEED_TWO_RANKS();
  Communicator& comm = mn::world();
  const int r = comm.rank();
  auto make = [] {
    mn::nn::MLPOptions o;
    o.sizes = {5, 7, 3};
    o.dtype = DType::F64;
    mn::Generator g(13);
    return std::make_unique<mn::nn::MLP>(o, g);
  };
  auto ref = make(), net = make();
  mn::nn::SGD ref_opt(ref->parameters(), 0.1, 0.9), opt(net->parameters(), 0.1, 0.9);
  mn::nn::DataParallel dp(*net, comm);
  auto loss = [](mn::nn::MLP& n, const Tensor& x) {
    const Variable y = n.forward(Variable(x));
    return mn::ag::mean(mn::ag::mul(y, y));
  };
  for (int step = 0; step < 2; ++step) {
    std::vector<Tensor> micro;
    mn::Generator g(100 + step);
    for (int m = 0; m < 3; ++m) {
      micro.push_back(Tensor::zeros({4, 5}, DType::F64));
      mn::normal_(micro.back(), 0.0, 1.0, g);
    }
    for (const Tensor& x : micro) loss(*ref, x).backward();
    ref_opt.step();
    ref_opt.zero_grad();
    {
      auto guard = dp.no_sync();
      dp.backward(loss(*net, micro[0].narrow(0, 2 * r, 2)));
      dp.backward(loss(*net, micro[1].narrow(0, 2 * r, 2)));
    }
    dp.backward(loss(*net, micro[2].narrow(0, 2 * r, 2)));
    opt.step();
    opt.zero_grad();
  }
  auto a = ref->parameters(), b = net->parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    const auto x = a[i].data().to_double_vector(), y = b[i].data().to_double_vector();
    for (size_t k = 0; k < x.size(); ++k) EXPECT_NEAR(x[k], y[k], 1e-12 + 1e-11 * std::abs(x[k])) << "param " << i;
  }
}

// 4 ranks (oversubscribed; ctest's distributed.mpi_4ranks), a different graph per rank:
// the even ranks' losses reach a and b, the odd ranks' a only, c is reached nowhere. Two
// steps of Adam with weight decay against one process minimising the mean of the four
// losses: a and b equal to rounding, c untouched (no gradient on any rank: Adam skips it).
TEST(Mpi4, DifferentGraphPerRankEqualsOneProcess) {
  if (mn::world().size() != 4) GTEST_SKIP() << "needs mpirun -np 4: ctest runs it as distributed.mpi_4ranks";
  Communicator& comm = mn::world();
  const int r = comm.rank();
  ThreeParams ref, m;
  mn::nn::Adam ref_opt(ref.parameters(), 0.05, 0.1), opt(m.parameters(), 0.05, 0.1);
  mn::nn::DataParallel dp(m, comm);
  auto x_of = [](int rank, int step) { return input({1.0 + rank, -0.5 * step, 2.0 - rank}); };
  auto loss_of = [&](ThreeParams& net, int rank, int step) {
    return rank % 2 == 0 ? loss_ab(net, x_of(rank, step)) : loss_a(net, x_of(rank, step));
  };
  const auto c0 = m.c.data().to_double_vector();
  for (int step = 0; step < 2; ++step) {
    Variable total = loss_of(ref, 0, step);
    for (int q = 1; q < 4; ++q) total = mn::ag::add(total, loss_of(ref, q, step));
    mn::ag::mul(total, 0.25).backward();
    ref_opt.step();
    ref_opt.zero_grad();
    dp.backward(loss_of(m, r, step));
    opt.step();
    opt.zero_grad();
  }
  for (auto [mine, theirs] : {std::pair{m.a, ref.a}, std::pair{m.b, ref.b}}) {
    const auto u = mine.data().to_double_vector(), v = theirs.data().to_double_vector();
    for (size_t i = 0; i < u.size(); ++i) EXPECT_NEAR(u[i], v[i], 1e-13);
  }
  EXPECT_FALSE(m.c.has_grad());
  EXPECT_EQ(m.c.data().to_double_vector(), c0);
}

}  // namespace
