// Data-parallel training (runtime/comm.h, autograd/ops_dist.h, nn/distributed.h).
//
// ctest runs this binary twice: once as a single process (the tests that need a
// world of one run, the others skip with a message) and, when MPI was found, under
// `mpirun -np 2 --oversubscribe --allow-run-as-root` (tests/CMakeLists.txt:
// distributed.mpi_2ranks.*). Every test that needs two ranks calls the same
// collectives in the same order on both ranks and uses EXPECT (not ASSERT) before
// its last collective, so a failure on one rank cannot leave the other waiting.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "autograd/ops.h"
#include "autograd/ops_dist.h"
#include "tests/common/test_util.h"
#include "nn/distributed.h"
#include "nn/losses/losses.h"
#include "nn/models/mlp.h"
#include "nn/models/siamese.h"
#include "nn/models/triplet.h"
#include "nn/objective.h"
#include "nn/optim/optimizer.h"
#include "runtime/comm.h"
#include "runtime/rng.h"

namespace {

using mn::Communicator;
using mn::DType;
using mn::ReduceOp;
using mn::Shape;
using mn::Tensor;
using mn::ag::Variable;

#define MN_NEED_RANKS(n)                                                                              \
  do {                                                                                                \
    if (mn::world().size() != (n))                                                                    \
      GTEST_SKIP() << "needs mpirun -np " << (n) << " (this world has " << mn::world().size()         \
                   << "): ctest runs it as distributed.mpi_2ranks"                                    \
                   << (mn::mpi_compiled() ? "" : ", which this build lacks (no MPI found)");          \
  } while (0)

// ------------------------------------------------------------ world of one ---
TEST(Comm, SingleWorldIsTheIdentity) {
  auto c = mn::make_single_comm();
  EXPECT_EQ(c->rank(), 0);
  EXPECT_EQ(c->size(), 1);
  Tensor x = Tensor::from_vector<float>({1, 2, 3}, {3});
  c->all_reduce(x, ReduceOp::Sum);
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  Tensor out = Tensor::zeros({3});
  c->all_gather(x, out);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  Tensor bad = Tensor::zeros({4});
  EXPECT_THROW(c->all_gather(x, bad), mn::Error);
  EXPECT_THROW(c->broadcast(x, 1), mn::Error);
}

TEST(Comm, LaunchInfoReadsOpenMpisEnvironment) {
  if (std::getenv("OMPI_COMM_WORLD_SIZE")) GTEST_SKIP() << "runs outside mpirun (it sets the variables itself)";
  ::setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  ::setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
  const mn::LaunchInfo li = mn::launch_info_from_env();
  EXPECT_EQ(li.size, 4);
  EXPECT_EQ(li.rank, 2);
  EXPECT_EQ(li.local_rank, 0);
  ::setenv("OMPI_COMM_WORLD_RANK", "4", 1);  // not a rank of a world of 4
  EXPECT_THROW(mn::launch_info_from_env(), mn::Error);
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"}) ::unsetenv(v);
  EXPECT_EQ(mn::launch_info_from_env().size, 1);
}

// The tape's leaf hook: once per leaf, when its gradient is complete (what the
// reducer relies on to start a bucket early), never for a leaf outside the graph.
TEST(LeafGradHook, FiresOncePerLeafWithItsFinalGradient) {
  Variable w(Tensor::from_vector<double>({1, 2, 3}, {3}), true);
  Variable v(Tensor::from_vector<double>({4, 5, 6}, {3}), true);
  Variable unused(Tensor::from_vector<double>({7}, {1}), true);
  // w is used early (w * w) and late (w * v): its hook must wait for both.
  Variable y = mn::ag::sum(mn::ag::mul(mn::ag::mul(w, w), mn::ag::exp(mn::ag::mul(w, v))));
  std::vector<std::pair<const void*, std::vector<double>>> seen;
  {
    mn::ag::LeafGradHookScope hook([&](const Variable& leaf) {
      seen.emplace_back(leaf.id(), leaf.grad().to_double_vector());
    });
    y.backward();
  }
  ASSERT_EQ(seen.size(), 2u);
  for (const auto& [id, g] : seen) {
    const Variable& leaf = id == w.id() ? w : v;
    EXPECT_TRUE(id == w.id() || id == v.id());
    EXPECT_EQ(g, leaf.grad().to_double_vector()) << "reported before its gradient was complete";
  }
  EXPECT_NE(seen[0].first, seen[1].first);
  EXPECT_FALSE(unused.has_grad());
}

// ------------------------------------------------------------- two ranks ---
TEST(Mpi, CollectivesMatchTheirDefinitions) {
  MN_NEED_RANKS(2);
  Communicator& c = mn::world();
  const int r = c.rank();
  Tensor s = Tensor::from_vector<double>({1.0 + r, 10.0 * r}, {2});
  c.all_reduce(s, ReduceOp::Sum);
  EXPECT_EQ(s.to_vector<double>(), (std::vector<double>{3, 10}));
  Tensor m = Tensor::from_vector<int64_t>({r, -r}, {2});
  c.all_reduce(m, ReduceOp::Max);
  EXPECT_EQ(m.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  Tensor in = Tensor::from_vector<float>({float(r), float(r) + 0.5f}, {1, 2});
  Tensor all = Tensor::zeros({2, 2});
  c.all_gather(in, all);
  EXPECT_EQ(all.to_vector<float>(), (std::vector<float>{0, 0.5f, 1, 1.5f}));
  Tensor rs_in = Tensor::from_vector<float>({1.f + r, 2.f, 3.f, 4.f * r}, {4});
  Tensor rs_out = Tensor::zeros({2});
  c.reduce_scatter(rs_in, rs_out);  // rank 0: (1 + 2, 2 + 2), rank 1: (3 + 3, 0 + 4)
  EXPECT_EQ(rs_out.to_vector<float>(), r == 0 ? (std::vector<float>{3, 4}) : (std::vector<float>{6, 4}));
  Tensor b = Tensor::full({3}, 7.0 + r);
  c.broadcast(b, 1);
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{8, 8, 8}));
  Tensor wrong = Tensor::zeros({3, 2});
  EXPECT_THROW(c.all_gather(in, wrong), mn::Error);  // checked before any message: no rank waits
}

// F = sum over ranks r of L_r(gather(x)), L_r = sum(W_r * y^2 + y) with rank-dependent
// W_r: d F / d x_q by backward (the reduce-scatter) against central differences in
// float64, perturbing one element of one rank's x at a time (both ranks evaluate F).
TEST(Mpi, AllGatherRowsGradcheckFloat64) {
  MN_NEED_RANKS(2);
  Communicator& c = mn::world();
  const int r = c.rank();
  const Shape xs{3, 2};
  Tensor x0 = mn::test::rand(xs, -1, 1, DType::F64, mn::Device::cpu(), 11 + r);
  Tensor W = mn::test::rand({6, 2}, 0.5, 2, DType::F64, mn::Device::cpu(), 23 + r);
  auto total = [&](const Tensor& x) {
    Variable y = mn::ag::all_gather_rows(Variable(x), c);
    Tensor l = mn::ag::sum(mn::ag::add(mn::ag::mul(Variable(W), mn::ag::square(y)), y)).data().clone();
    c.all_reduce(l, ReduceOp::Sum);
    return l.item();
  };
  Variable x(x0.clone(), true);
  Variable y = mn::ag::all_gather_rows(x, c);
  mn::ag::sum(mn::ag::add(mn::ag::mul(Variable(W), mn::ag::square(y)), y)).backward();
  const std::vector<double> analytic = x.grad().to_double_vector();
  const double h = 1e-5;
  double worst = 0;
  for (int q = 0; q < 2; ++q) {
    for (int64_t i = 0; i < x0.numel(); ++i) {
      Tensor plus = x0.clone(), minus = x0.clone();
      if (q == r) {
        plus.data<double>()[i] += h;
        minus.data<double>()[i] -= h;
      }
      const double numeric = (total(plus) - total(minus)) / (2 * h);
      if (q != r) continue;
      const double a = analytic[static_cast<size_t>(i)];
      // Central differences of a quadratic are exact up to rounding: ~1e-10 / h.
      const double err = std::abs(a - numeric) / std::max({std::abs(a), std::abs(numeric), 1.0});
      worst = std::max(worst, err);
      EXPECT_LE(err, 1e-7) << "rank " << r << " element " << i << ": analytic " << a << " numeric " << numeric;
    }
  }
  // The reduce-scatter really sums over ranks: rank r's rows get 2 (W_0 + W_1) y + 2 at them.
  EXPECT_LT(worst, 1e-7);
}

// A triplet batch: P classes x K rows of `dim` features, class-major (every rank draws the same).
struct Batch {
  Tensor x, labels;
};
Batch make_batch(int64_t P, int64_t K, int64_t dim, DType dt, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n(0, 1);
  std::vector<double> xs;
  std::vector<int64_t> ls;
  for (int64_t p = 0; p < P; ++p) {
    std::vector<double> centre(static_cast<size_t>(dim));
    for (auto& v : centre) v = n(rng);
    for (int64_t k = 0; k < K; ++k) {
      for (int64_t d = 0; d < dim; ++d) xs.push_back(centre[static_cast<size_t>(d)] + 0.7 * n(rng));
      ls.push_back(p);
    }
  }
  return {Tensor::from_vector(xs, {P * K, dim}).to(dt), Tensor::from_vector(ls, {P * K})};
}

std::unique_ptr<mn::nn::TripletNet> triplet_mlp(DType dt) {
  mn::nn::MLPOptions o;
  o.sizes = {8, 32, 16, 4};
  o.dtype = dt;
  mn::Generator g(5);
  return std::make_unique<mn::nn::TripletNet>(
      [&]() -> std::shared_ptr<mn::nn::Module> { return std::make_shared<mn::nn::MLP>(o, g); },
      mn::nn::TripletShare::Full);
}

// |ref - x| <= atol + rtol |ref| over every parameter; returns the worst ratio (<= 1 passes).
double worst_ratio(const mn::nn::Module& ref, const mn::nn::Module& got, double atol, double rtol) {
  auto a = ref.parameters(), b = got.parameters();
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    auto x = a[i].data().to_double_vector(), y = b[i].data().to_double_vector();
    for (size_t k = 0; k < x.size(); ++k) worst = std::max(worst, std::abs(x[k] - y[k]) / (atol + rtol * std::abs(x[k])));
  }
  return worst;
}

// Both ranks hold the same weights, bit for bit (the average is the same sum on each).
bool replicas_identical(const mn::nn::Module& m, Communicator& c) {
  bool same = true;
  for (const auto& p : m.parameters()) {
    Tensor mine = p.data().contiguous().reshape({1, p.numel()});
    Tensor both = Tensor::empty({2, p.numel()}, p.dtype());
    c.all_gather(mine, both);
    same = same && both.select(0, 0).to_double_vector() == both.select(0, 1).to_double_vector();
  }
  return same;
}

// k steps of a triplet net with a global-batch online miner: 2 ranks x 8 rows
// (embeddings all-gathered before the miner and the loss) against 1 process x 16 rows.
void triplet_equality(DType dt, double atol, double rtol) {
  Communicator& c = mn::world();
  const int r = c.rank();
  auto ref = triplet_mlp(dt), dp_net = triplet_mlp(dt);
  mn::nn::SGD ref_opt(ref->parameters(), 0.05, 0.9), dp_opt(dp_net->parameters(), 0.05, 0.9);
  mn::nn::LossConfig lc;
  lc.margin = 0.5;
  auto ref_obj = mn::nn::Objective::from_names("margin-l2", "semi-hard-or-hardest", lc);
  auto dp_obj = mn::nn::Objective::from_names("margin-l2", "semi-hard-or-hardest", lc);
  mn::nn::DataParallelOptions o;
  o.bucket_bytes = 1024;  // several buckets: most start inside the backward
  mn::nn::DataParallel dp(*dp_net, c, o);
  dp.broadcast_from(0);
  for (int step = 0; step < 5; ++step) {
    Batch b = make_batch(4, 4, 8, dt, 100 + step);
    auto out = ref_obj(ref->embed_candidate(Variable(b.x)), b.labels);
    out.loss.backward();
    ref_opt.step();
    ref_opt.zero_grad();
    Variable mine = dp_net->embed_candidate(Variable(b.x.narrow(0, 8 * r, 8)));
    auto dout = dp_obj(mn::ag::all_gather_rows(mine, c), b.labels);
    dp.backward(dout.loss);
    dp_opt.step();
    dp_opt.zero_grad();
    EXPECT_EQ(out.tuples, dout.tuples) << "step " << step << ": the global miner found another set";
  }
  EXPECT_GE(dp.buckets_overlapped(), dp.bucket_count() - 1) << "buckets did not start during the backward";
  EXPECT_LE(worst_ratio(*ref, *dp_net, atol, rtol), 1.0);
  EXPECT_TRUE(replicas_identical(*dp_net, c));
}

// float32: the 2-rank sums add the rows' contributions in another order (two half
// sums), a relative 1e-7 per step that 5 steps of momentum SGD keep near 1e-6.
TEST(Mpi, TripletGlobalMinerTwoRanksEqualOneRankFloat32) {
  MN_NEED_RANKS(2);
  triplet_equality(DType::F32, 1e-6, 1e-5);
}
// float64: the same difference is ~1e-15: the tolerance shows it is rounding only.
TEST(Mpi, TripletGlobalMinerTwoRanksEqualOneRankFloat64) {
  MN_NEED_RANKS(2);
  triplet_equality(DType::F64, 1e-13, 1e-12);
}

// The siamese MLP (Koch's weighted-L1 head, BCE over pairs): 2 ranks x 6 pairs
// against 1 process x 12 pairs, momentum SGD as in Koch et al. (Not Adam: its first
// steps move every weight by ~lr * sign(g), so a gradient that cancels to rounding
// noise, ~1e-17 in float64, can take either sign in either run: the runs then differ
// by 2 lr in that weight, which says nothing about the reduction.)
void siamese_equality(DType dt, double atol, double rtol) {
  Communicator& c = mn::world();
  const int r = c.rank();
  auto make = [&] {
    mn::nn::MLPOptions o;
    o.sizes = {8, 24, 6};
    o.dtype = dt;
    mn::Generator g(9);
    auto trunk = std::make_shared<mn::nn::MLP>(o, g);
    auto net = std::make_unique<mn::nn::SiameseNet>(trunk, 6, g);
    net->to(dt);
    return net;
  };
  auto ref = make(), dp_net = make();
  mn::nn::SGD ref_opt(ref->parameters(), 0.1, 0.9), dp_opt(dp_net->parameters(), 0.1, 0.9);
  mn::nn::DataParallel dp(*dp_net, c);
  for (int step = 0; step < 5; ++step) {
    Batch a = make_batch(12, 1, 8, dt, 200 + step), b = make_batch(12, 1, 8, dt, 300 + step);
    std::vector<double> t;
    for (int i = 0; i < 12; ++i) t.push_back((i + step) % 2);
    Tensor target = Tensor::from_vector(t, {12}).to(dt);
    auto loss = [](mn::nn::SiameseNet& n, const Tensor& x1, const Tensor& x2, const Tensor& y) {
      auto e = n.embed_pairs(Variable(x1), Variable(x2));
      return mn::nn::koch_siamese_loss(e[0], e[1], n.head_weight(), n.head_bias(), y).loss;
    };
    loss(*ref, a.x, b.x, target).backward();
    ref_opt.step();
    ref_opt.zero_grad();
    dp.backward(loss(*dp_net, a.x.narrow(0, 6 * r, 6), b.x.narrow(0, 6 * r, 6), target.narrow(0, 6 * r, 6)));
    dp_opt.step();
    dp_opt.zero_grad();
  }
  EXPECT_LE(worst_ratio(*ref, *dp_net, atol, rtol), 1.0);
  EXPECT_TRUE(replicas_identical(*dp_net, c));
}

// float32: as for the triplet net, two half sums instead of one sum; 5 steps.
TEST(Mpi, SiameseMlpTwoRanksEqualOneRankFloat32) {
  MN_NEED_RANKS(2);
  siamese_equality(DType::F32, 1e-6, 1e-5);
}
TEST(Mpi, SiameseMlpTwoRanksEqualOneRankFloat64) {
  MN_NEED_RANKS(2);
  siamese_equality(DType::F64, 1e-12, 1e-11);
}

// The equality check must be able to fail: a rank that steps on its own rows'
// gradient (no reduction) leaves the 1-process weights.
TEST(Mpi, EqualityCheckCatchesARankThatStepsAlone) {
  MN_NEED_RANKS(2);
  Communicator& c = mn::world();
  const int r = c.rank();
  auto ref = triplet_mlp(DType::F64), local = triplet_mlp(DType::F64);
  mn::nn::SGD ref_opt(ref->parameters(), 0.05), local_opt(local->parameters(), 0.05);
  auto obj = mn::nn::Objective::from_names("margin-l2", "batch-hard");
  Batch b = make_batch(4, 4, 8, DType::F64, 7);
  obj(ref->embed_candidate(Variable(b.x)), b.labels).loss.backward();
  ref_opt.step();
  obj(local->embed_candidate(Variable(b.x.narrow(0, 8 * r, 8))), b.labels.narrow(0, 8 * r, 8)).loss.backward();
  local_opt.step();
  EXPECT_GT(worst_ratio(*ref, *local, 1e-13, 1e-12), 1.0);
}

// ------------------------------------------------------------------- NCCL ---
#define MN_SKIP_IF_NO_NCCL()                                                                        \
  do {                                                                                              \
    MN_SKIP_IF_NO_CUDA();                                                                           \
    if (!mn::nccl_compiled()) GTEST_SKIP() << "built without NCCL: NCCL test skipped";              \
  } while (0)

// One rank on one GPU: the NCCL collectives of a world of one, and DataParallel over
// them giving exactly plain backward's gradients (the average over one rank is x 1).
TEST(Nccl, OneRankOnOneGpu) {
  MN_SKIP_IF_NO_NCCL();
  auto single = mn::make_single_comm();
  auto c = mn::make_nccl_comm(*single, 0);
  const mn::Device gpu = mn::Device::cuda(0);
  EXPECT_EQ(c->backend(), "nccl");
  Tensor x = Tensor::from_vector<float>({1, 2, 3}, {3}, gpu);
  c->all_reduce(x, ReduceOp::Sum);
  auto req = c->all_reduce_async(x, ReduceOp::Max);
  req->wait();
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  Tensor out = Tensor::zeros({3}, DType::F32, gpu);
  c->all_gather(x, out);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  Tensor host = Tensor::zeros({3});
  EXPECT_THROW(c->all_reduce(host, ReduceOp::Sum), mn::Error);  // names the device mismatch

  auto plain = triplet_mlp(DType::F32), dp_net = triplet_mlp(DType::F32);
  plain->to(gpu);
  dp_net->to(gpu);
  mn::nn::DataParallel dp(*dp_net, *c);
  Batch b = make_batch(4, 4, 8, DType::F32, 3);
  auto obj = mn::nn::Objective::from_names("margin-l2", "batch-hard");
  Tensor xg = b.x.to(gpu), lg = b.labels.to(gpu);
  obj(plain->embed_candidate(Variable(xg)), lg).loss.backward();
  dp.backward(obj(dp_net->embed_candidate(Variable(xg)), lg).loss);
  auto pa = plain->parameters(), pb = dp_net->parameters();
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(pa[i].grad().to_double_vector(), pb[i].grad().to_double_vector()) << "parameter " << i;
}

// Two ranks, one GPU each (mpirun -np 2 on a machine with 2 GPUs: ctest's
// distributed.nccl_2ranks): the collectives on device tensors.
TEST(Nccl, TwoRanksTwoGpus) {
  MN_SKIP_IF_NO_NCCL();
  if (mn::world().size() != 2 || mn::cuda_device_count() < 2)
    GTEST_SKIP() << "needs 2 GPUs and mpirun -np 2 (this machine has " << mn::cuda_device_count()
                 << " GPU(s), this world " << mn::world().size() << " rank(s))";
  Communicator& w = mn::world();
  const int r = w.rank();
  auto c = mn::make_nccl_comm(w, mn::launch_info_from_env().local_rank % mn::cuda_device_count());
  const mn::Device gpu = c->device();
  Tensor s = Tensor::from_vector<double>({1.0 + r, 10.0 * r}, {2}, gpu);
  c->all_reduce(s, ReduceOp::Sum);
  EXPECT_EQ(s.to_vector<double>(), (std::vector<double>{3, 10}));
  Tensor in = Tensor::from_vector<float>({float(r), float(r) + 0.5f}, {1, 2}, gpu);
  Tensor all = Tensor::zeros({2, 2}, DType::F32, gpu);
  c->all_gather(in, all);
  EXPECT_EQ(all.to_vector<float>(), (std::vector<float>{0, 0.5f, 1, 1.5f}));
  Tensor rs_in = Tensor::from_vector<float>({1.f + r, 2.f, 3.f, 4.f * r}, {4}, gpu);
  Tensor rs_out = Tensor::zeros({2}, DType::F32, gpu);
  c->reduce_scatter(rs_in, rs_out);
  EXPECT_EQ(rs_out.to_vector<float>(), r == 0 ? (std::vector<float>{3, 4}) : (std::vector<float>{6, 4}));
  Tensor b = Tensor::full({3}, 7.0 + r, DType::F32, gpu);
  c->broadcast(b, 1);
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{8, 8, 8}));
}

// A killed rank ends every rank within seconds (never a hang): run by ctest as
// distributed.killed_rank_ends_all (MN_TEST_KILL_RANK=1), which times it.
TEST(MpiFailure, KilledRankEndsEveryRank) {
  if (!std::getenv("MN_TEST_KILL_RANK")) GTEST_SKIP() << "run by ctest as distributed.killed_rank_ends_all";
  MN_NEED_RANKS(2);
  Communicator& c = mn::world();
  Tensor t = Tensor::ones({1024});
  for (int i = 0; i < 1000000; ++i) {
    if (i == 3 && c.rank() == 1) std::raise(SIGKILL);
    c.all_reduce(t, ReduceOp::Max);
  }
  FAIL() << "rank " << c.rank() << " ran 10^6 all-reduces: the killed rank was not noticed";
}

// A rank stopped (SIGSTOP) in a stream of all-reduces: the other's watchdog ends its wait
// after the timeout with an error naming the stopped rank, and aborts the job as the
// harness's main() does (ctest's distributed.stopped_rank_named, MN_TEST_STOP_RANK=1,
// which times it and reads the message).
TEST(MpiFailure, StoppedRankIsNamedByTheWatchdog) {
  if (!std::getenv("MN_TEST_STOP_RANK")) GTEST_SKIP() << "run by ctest as distributed.stopped_rank_named";
  MN_NEED_RANKS(2);
  mn::set_collective_timeout(3);
  Communicator& c = mn::world();
  Tensor t = Tensor::ones({1024});
  try {
    for (int i = 0; i < 1000000; ++i) {
      if (i == 3 && c.rank() == 1) std::raise(SIGSTOP);
      c.all_reduce(t, ReduceOp::Max);
    }
  } catch (const mn::Error& e) {
    std::fprintf(stderr, "[rank %d] error: %s\n", c.rank(), e.what());
    std::fflush(stderr);
    c.abort(1);
  }
  FAIL() << "rank " << c.rank() << " ran 10^6 all-reduces: the stopped rank was not noticed";
}

}  // namespace
