// The ranks of a data-parallel run (mpirun -np N): join_world once the flags are
// parsed (refusing a study that does not run data-parallel, sharing the node's
// cores, silencing stdout off rank 0), rank_device (each rank's GPU), end_run
// (a failure on one rank ends them all) and RunContext::device_comm. It calls
// runtime/comm.h and runtime/parallel.h only.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "experiments/common/harness_internal.h"
#include "runtime/parallel.h"

namespace mn::exp {

Communicator& RunContext::device_comm() const {
  static std::unique_ptr<Communicator> nccl;
  const Device d = device();
  if (d.is_cpu() || world_size() == 1) return comm();
  if (!nccl) nccl = make_nccl_comm(comm(), d.index);
  return *nccl;
}

namespace {
// A data-parallel run's world, made once the flags parsed (MPI_Init under mpirun).
// Ranks other than 0 print nothing on stdout (their progress is rank 0's);
// errors go to stderr from every rank, prefixed with the rank.
bool g_world_ready = false;
}  // namespace

bool world_joined() { return g_world_ready; }

void join_world(Study& st, const Flags& f, std::string& prog) {
  const int n = world_size_from_env();
  if (n <= 1) return;
  if (!st.data_parallel())
    throw UsageError(st.name() + " does not run data-parallel: the launcher started " + std::to_string(n) +
                     " processes; run it as one process (without mpirun -np " + std::to_string(n) + ")");
  set_collective_timeout(f.f64("collective-timeout"));
  Communicator& w = world();
  g_world_ready = true;
  // Ranks on one node share its cores: without MN_NUM_THREADS each takes its share
  // (hardware threads / ranks on the node, as Open MPI, MPICH, Slurm or MN_LOCAL_SIZE
  // say), not all of them.
  const int local = launch_info_from_env().local_size;
  if (!std::getenv("MN_NUM_THREADS") && local > 1)
    set_num_threads(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / local));
  prog += " [rank " + std::to_string(w.rank()) + " of " + std::to_string(w.size()) + "]";
  if (w.rank() != 0 && !std::freopen("/dev/null", "w", stdout))
    std::fprintf(stderr, "%s: warning: cannot silence this rank's stdout\n", prog.c_str());
}

// --device cuda under mpirun: the GPU of this process's local rank, bound (made
// current) before the run's first CUDA work; an explicit --device cuda:N is bound as given.
Device rank_device(Device d, const Flags& f) {
  if (!g_world_ready || !d.is_cuda()) return d;
  if (f.str("device").find(':') != std::string::npos) {
    cuda_device_calls().set_current(d.index);
    return d;
  }
  const LaunchInfo li = launch_info_from_env();
  return Device::cuda(bind_local_rank_device(li.local_rank, li.local_size, cuda_device_calls()));
}

// After a failure on this rank, every other rank would wait in its next collective:
// end them all now (MPI_Abort), with this rank's status.
int end_run(int code) {
  if (g_world_ready && code != kExitOk) world().abort(code);
  return code;
}

}  // namespace mn::exp
