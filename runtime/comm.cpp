// The launcher's environment, the single-process communicator and world()
// (runtime/comm.h). The MPI and NCCL backends are in comm_mpi.cpp / comm_nccl.cpp.
#include "runtime/comm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace mn {

namespace {
// The first of `names` that is set, as an int; -1 when none is.
int env_int(std::initializer_list<const char*> names, std::string* which) {
  for (const char* n : names) {
    const char* v = std::getenv(n);
    if (!v || !*v) continue;
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    MN_CHECK(end && *end == '\0' && x >= 0 && x < (1L << 30), "launcher environment: ", n, "='", v,
             "' is not a rank or a size");
    if (which) *which += (which->empty() ? "" : ", ") + std::string(n);
    return static_cast<int>(x);
  }
  return -1;
}
}  // namespace

LaunchInfo launch_info_from_env() {
  LaunchInfo li;
  std::string src;
  // Open MPI, then MPICH / Intel MPI (PMI), then Slurm's srun.
  const int size = env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}, &src);
  if (size < 0) return li;
  const int rank = env_int({"OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}, &src);
  // The node's ranks: ours first (a user's override), then Open MPI's, MPICH / Hydra's, Slurm's.
  const int local = env_int({"MN_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}, &src);
  const int local_size =
      env_int({"MN_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"}, &src);
  MN_CHECK(size >= 1 && rank >= 0 && rank < size, "launcher environment (", src, "): rank ", rank,
           " is not in a world of size ", size);
  MN_CHECK(local_size < 0 || (local_size >= 1 && local_size <= size && std::max(local, 0) < local_size),
           "launcher environment (", src, "): local rank ", std::max(local, 0), " of ", local_size,
           " ranks on this node does not fit a world of ", size, " (MN_LOCAL_RANK / MN_LOCAL_SIZE set by hand?)");
  li.size = size;
  li.rank = rank;
  li.local_rank = local < 0 ? 0 : local;
  li.local_size = local_size;
  li.source = src;
  return li;
}

int world_size_from_env() { return launch_info_from_env().size; }

namespace {
double initial_collective_timeout() {
  const char* v = std::getenv("MN_COLLECTIVE_TIMEOUT");
  if (!v || !*v) return 1800.0;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  MN_CHECK(end && *end == '\0' && s >= 0, "MN_COLLECTIVE_TIMEOUT='", v, "' is not a number of seconds (0: no limit)");
  return s;
}
double& timeout_seconds() {
  static double s = initial_collective_timeout();
  return s;
}
}  // namespace

void set_collective_timeout(double seconds) {
  MN_CHECK(seconds >= 0, "set_collective_timeout: ", seconds, " s is negative (0: no limit)");
  timeout_seconds() = seconds;
}
double collective_timeout() { return timeout_seconds(); }

void check_comm_tensor(const char* op, const std::string& backend, const Tensor& t, Device expected) {
  MN_CHECK(t.defined(), op, " (", backend, "): undefined tensor");
  MN_CHECK(t.is_contiguous(), op, " (", backend, "): the tensor ", t.desc(), " must be contiguous");
  MN_CHECK(t.device() == expected, op, " (", backend, "): the tensor ", t.desc(), " is on ", t.device().str(),
           " but this communicator takes ", expected.str(), " tensors",
           expected.is_cpu() ? " (use the NCCL communicator for GPU tensors)"
                             : " (use the MPI communicator for host tensors)");
}

// ------------------------------------------------------------- single ---
namespace {
class SingleRequest final : public CommRequest {
 public:
  void wait() override {}
  bool test() override { return true; }
};

class SingleComm final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "single"; }
  Device device() const override { return Device::cpu(); }
  void all_reduce(Tensor& t, ReduceOp) override { MN_CHECK(t.defined(), "all_reduce (single): undefined tensor"); }
  std::unique_ptr<CommRequest> all_reduce_async(Tensor& t, ReduceOp op) override {
    all_reduce(t, op);
    return std::make_unique<SingleRequest>();
  }
  void all_gather(const Tensor& in, Tensor& out) override { same_copy("all_gather", in, out); }
  void reduce_scatter(const Tensor& in, Tensor& out) override { same_copy("reduce_scatter", in, out); }
  void broadcast(Tensor& t, int root) override {
    MN_CHECK(root == 0, "broadcast (single): root ", root, " is not a rank of a world of size 1");
    MN_CHECK(t.defined(), "broadcast (single): undefined tensor");
  }
  void barrier() override {}
  [[noreturn]] void abort(int code) override { std::_Exit(code); }

 private:
  // A world of one: gathering or scattering is a copy (any device: no engine involved).
  static void same_copy(const char* op, const Tensor& in, Tensor& out) {
    MN_CHECK(in.defined() && out.defined(), op, " (single): undefined tensor");
    MN_CHECK(in.shape() == out.shape(), op, " (single): in ", in.desc(), " and out ", out.desc(),
             " must have the same shape in a world of size 1");
    out.copy_(in);
  }
};
}  // namespace

std::unique_ptr<Communicator> make_single_comm() { return std::make_unique<SingleComm>(); }

Communicator& world() {
  static std::once_flag once;
  static std::unique_ptr<Communicator> w;
  std::call_once(once, [] {
    const LaunchInfo li = launch_info_from_env();
    if (li.size <= 1) {
      w = make_single_comm();
      return;
    }
    MN_CHECK(mpi_compiled(), "world: the launcher started ", li.size, " processes (", li.source, ") but this build "
             "has no MPI; install Open MPI (apt-get install libopenmpi-dev openmpi-bin) and configure the build "
             "again (cmake -S . -B build), or run a single process without mpirun");
    w = make_mpi_comm();
    MN_CHECK(w->size() == li.size && w->rank() == li.rank, "world: MPI says rank ", w->rank(), " of ", w->size(),
             " but the launcher's environment (", li.source, ") says rank ", li.rank, " of ", li.size);
  });
  return *w;
}

}  // namespace mn
