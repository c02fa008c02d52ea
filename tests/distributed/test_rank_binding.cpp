// Each data-parallel rank on its own GPU (runtime/device.h: bind_local_rank_device) and
// the node's ranks from any launcher (runtime/comm.h: LaunchInfo): the binding logic on
// the CPU with a fake device count, and on two GPUs (Nccl.TwoRanks*: DataParallel and
// all_gather_rows over NCCL equal one process; ctest's distributed.nccl_2ranks, which
// skips with a message without two GPUs).
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "autograd/ops_dist.h"
#include "autograd/ops_matmul.h"
#include "nn/distributed.h"
#include "nn/models/mlp.h"
#include "nn/optim/optimizer.h"
#include "runtime/comm.h"
#include "runtime/device.h"
#include "runtime/rng.h"
#include "tests/common/test_util.h"

namespace {

class FakeDevices : public mn::DeviceCalls {
 public:
  explicit FakeDevices(int n) : n_(n) {}
  int count() override { return n_; }
  void set_current(int index) override { set.push_back(index); }
  std::vector<int> set;

 private:
  int n_;
};

TEST(RankBinding, EachLocalRankGetsItsOwnGpu) {
  for (int local = 0; local < 4; ++local) {
    FakeDevices gpus(4);
    EXPECT_EQ(mn::bind_local_rank_device(local, 4, gpus), local);
    EXPECT_EQ(gpus.set, std::vector<int>{local}) << "bound once, to its own device";
  }
}

TEST(RankBinding, OneVisibleGpuPerRankIsDeviceZero) {
  FakeDevices gpus(1);  // Slurm --gpus-per-task=1: each rank sees only its GPU
  EXPECT_EQ(mn::bind_local_rank_device(3, 4, gpus), 0);
  EXPECT_EQ(gpus.set, std::vector<int>{0});
}

TEST(RankBinding, MoreRanksThanGpusIsRefusedNamingBoth) {
  FakeDevices gpus(2);
  try {
    mn::bind_local_rank_device(2, 3, gpus);
    FAIL() << "3 ranks on a node with 2 GPUs must be refused";
  } catch (const mn::Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("local rank 2 of 3"), std::string::npos) << w;
    EXPECT_NE(w.find("2 CUDA device(s)"), std::string::npos) << w;
    EXPECT_NE(w.find("one GPU per rank"), std::string::npos) << w;
  }
  EXPECT_TRUE(gpus.set.empty()) << "nothing bound after a refusal";
  FakeDevices other(2);
  EXPECT_THROW(mn::bind_local_rank_device(0, 3, other), mn::Error) << "even local rank 0 of an oversubscribed node";
  FakeDevices none(0);
  EXPECT_THROW(mn::bind_local_rank_device(0, 1, none), mn::Error);
}

// Sets the variables for the scope, restoring them after.
class Env {
 public:
  Env(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const auto& [k, v] : vars) {
      const char* old = std::getenv(k);
      saved_.push_back({k, old ? std::string(old) : std::string(), old != nullptr});
      ::setenv(k, v, 1);
    }
  }
  ~Env() {
    for (const auto& s : saved_) s.had ? (void)::setenv(s.key, s.value.c_str(), 1) : (void)::unsetenv(s.key);
  }

 private:
  struct Saved {
    const char* key;
    std::string value;
    bool had;
  };
  std::vector<Saved> saved_;
};

bool under_a_launcher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", "MN_LOCAL_RANK", "MN_LOCAL_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

TEST(LaunchInfo, SlurmsNodeRanksAndOurOverrides) {
  if (under_a_launcher()) GTEST_SKIP() << "runs outside a launcher (it sets the variables itself)";
  {
    Env slurm({{"SLURM_NTASKS", "4"}, {"SLURM_PROCID", "3"}, {"SLURM_LOCALID", "1"}, {"SLURM_NTASKS_PER_NODE", "2"}});
    const mn::LaunchInfo li = mn::launch_info_from_env();
    EXPECT_EQ(li.size, 4);
    EXPECT_EQ(li.rank, 3);
    EXPECT_EQ(li.local_rank, 1);
    EXPECT_EQ(li.local_size, 2) << "the thread split and the GPU binding need the node's ranks";
    Env ours({{"MN_LOCAL_RANK", "0"}, {"MN_LOCAL_SIZE", "4"}});
    const mn::LaunchInfo o = mn::launch_info_from_env();
    EXPECT_EQ(o.local_rank, 0);
    EXPECT_EQ(o.local_size, 4);
    Env bad({{"MN_LOCAL_SIZE", "5"}});  // more ranks on the node than in the world
    EXPECT_THROW(mn::launch_info_from_env(), mn::Error);
  }
  {
    Env mpich({{"PMI_SIZE", "2"}, {"PMI_RANK", "1"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}});
    const mn::LaunchInfo li = mn::launch_info_from_env();
    EXPECT_EQ(li.local_rank, 1);
    EXPECT_EQ(li.local_size, 2);
  }
  EXPECT_EQ(mn::launch_info_from_env().local_size, -1) << "no launcher: the node's ranks are unknown";
}

// ---------------------------------------------------------------- two GPUs ---
// Each rank binds its local rank's GPU, then DataParallel over NCCL with the embeddings
// all-gathered over NCCL (all_gather_rows) runs 3 steps; one process on this rank's GPU
// runs the same 3 steps on the whole batch. Float sums in another order: not bit for bit.
TEST(Nccl, TwoRanksDataParallelAndAllGatherRowsEqualOneProcess) {
  MN_SKIP_IF_NO_CUDA();
  if (!mn::nccl_compiled()) GTEST_SKIP() << "built without NCCL: NCCL test skipped";
  if (mn::world().size() != 2 || mn::cuda_device_count() < 2)
    GTEST_SKIP() << "needs 2 GPUs and mpirun -np 2 (this machine has " << mn::cuda_device_count()
                 << " GPU(s), this world " << mn::world().size() << " rank(s))";
  mn::Communicator& w = mn::world();
  const int r = w.rank();
  const mn::LaunchInfo li = mn::launch_info_from_env();
  const int dev = mn::bind_local_rank_device(li.local_rank, li.local_size, mn::cuda_device_calls());
  EXPECT_EQ(dev, li.local_rank);
  auto nccl = mn::make_nccl_comm(w, dev);
  const mn::Device gpu = mn::Device::cuda(dev);
  auto make = [&] {
    mn::nn::MLPOptions o;
    o.sizes = {6, 16, 4};
    mn::Generator g(21);
    auto m = std::make_unique<mn::nn::MLP>(o, g);
    m->to(gpu);
    return m;
  };
  auto ref = make(), net = make();
  mn::nn::SGD ref_opt(ref->parameters(), 0.05, 0.9), opt(net->parameters(), 0.05, 0.9);
  mn::nn::DataParallel dp(*net, *nccl);
  dp.broadcast_from(0);
  // A loss over the gathered batch (every row against every other): the gather's
  // backward must route each rank's rows' gradient back to it.
  auto pairwise = [](const mn::ag::Variable& e) {
    return mn::ag::mean(mn::ag::mul(mn::ag::matmul(e, e, false, true), 0.1));
  };
  for (int step = 0; step < 3; ++step) {
    mn::Tensor x = mn::Tensor::zeros({8, 6});
    mn::Generator g(500 + step);
    mn::normal_(x, 0.0, 1.0, g);
    const mn::Tensor xg = x.to(gpu);
    pairwise(ref->forward(mn::ag::Variable(xg))).backward();
    ref_opt.step();
    ref_opt.zero_grad();
    const mn::ag::Variable mine = net->forward(mn::ag::Variable(xg.narrow(0, 4 * r, 4)));
    dp.backward(pairwise(mn::ag::all_gather_rows(mine, *nccl)));
    opt.step();
    opt.zero_grad();
  }
  auto a = ref->parameters(), b = net->parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    const auto x = a[i].data().to_double_vector(), y = b[i].data().to_double_vector();
    for (size_t k = 0; k < x.size(); ++k) EXPECT_NEAR(x[k], y[k], 1e-6 + 1e-5 * std::abs(x[k])) << "param " << i;
  }
  EXPECT_EQ(mn::cuda_current_device(), dev) << "a collective left another GPU current";
}

// Two GPUs, rank 1 stopped (SIGSTOP) in a stream of NCCL all-reduces: rank 0's NCCL
// watchdog (3 s) aborts the communicator naming the collective, the next call throws,
// and the job ends (ctest's distributed.nccl_stopped_rank_named, MN_TEST_STOP_RANK=1;
// skipped with a message without two GPUs).
TEST(NcclFailure, StoppedRankEndsTheJob) {
  if (!std::getenv("MN_TEST_STOP_RANK")) GTEST_SKIP() << "run by ctest as distributed.nccl_stopped_rank_named";
  MN_SKIP_IF_NO_CUDA();
  if (!mn::nccl_compiled()) GTEST_SKIP() << "built without NCCL: NCCL test skipped";
  if (mn::world().size() != 2 || mn::cuda_device_count() < 2)
    GTEST_SKIP() << "needs 2 GPUs and mpirun -np 2 (this machine has " << mn::cuda_device_count() << " GPU(s))";
  mn::set_collective_timeout(3);
  mn::Communicator& w = mn::world();
  const mn::LaunchInfo li = mn::launch_info_from_env();
  const int dev = mn::bind_local_rank_device(li.local_rank, li.local_size, mn::cuda_device_calls());
  auto nccl = mn::make_nccl_comm(w, dev);
  mn::Tensor t = mn::Tensor::ones({1024}, mn::DType::F32, mn::Device::cuda(dev));
  try {
    for (int i = 0; i < 100000; ++i) {
      if (i == 3 && w.rank() == 1) std::raise(SIGSTOP);
      nccl->all_reduce(t, mn::ReduceOp::Max);
      mn::synchronize(mn::Device::cuda(dev));
    }
  } catch (const mn::Error& e) {
    std::fprintf(stderr, "[rank %d] error: %s\n", w.rank(), e.what());
    std::fflush(stderr);
    w.abort(1);
  }
  FAIL() << "rank " << w.rank() << " ran 10^5 all-reduces: the stopped rank was not noticed";
}

}  // namespace
