// Communicators for data-parallel training: one process per device, launched by
// `mpirun -np N` (or Slurm's srun), which tells each process its rank and the
// world's size in the environment.
//
// The library writes no collective itself: a Communicator wraps an existing
// engine.
//   * "single": world size 1 (no launcher, or mpirun -np 1); every collective
//     is the identity (all_gather copies), nothing is initialised.
//   * "mpi": Open MPI / MPICH for HOST tensors (runtime/comm_mpi.cpp; compiled
//     when CMake finds MPI, MN_WITH_MPI).
//   * "nccl": NCCL for DEVICE tensors (runtime/comm_nccl.cpp; compiled whenever
//     CUDA is, MN_WITH_NCCL), bootstrapped over another communicator (MPI) that
//     broadcasts NCCL's unique id. Collectives are queued on a stream of their
//     own that waits for the library's stream (cuda::stream()), so they overlap
//     the kernels queued after them; wait() makes the library's stream wait for
//     the collective (no host synchronisation).
//
// Every collective must be called by every rank, in the same order, with
// tensors of the same shape and dtype. Errors throw mn::Error naming the
// collective, the backend and the cause. A failed rank cannot be recovered:
// the program's main() calls abort() (MPI_Abort), which ends every rank.
#pragma once
#include <memory>
#include <string>

#include "runtime/tensor.h"

namespace mn {

enum class ReduceOp { Sum, Max };

// The launcher's view of this process (from the environment, before any MPI call).
// local_rank / local_size: this process's place among the ranks of its node (its GPU,
// its share of the cores); MN_LOCAL_RANK / MN_LOCAL_SIZE override the launcher's (a
// launcher that sets neither: local rank 0, local size unknown, -1).
struct LaunchInfo {
  int rank = 0, size = 1, local_rank = 0, local_size = -1;
  std::string source;  // the variables read ("OMPI_COMM_WORLD_*", "PMI_*", "SLURM_*"), "" without a launcher
};
LaunchInfo launch_info_from_env();

// A started non-blocking collective. wait() completes it (CPU: the buffer holds
// the result afterwards; NCCL: the library's stream waits for it). test()
// advances the engine (MPI_Test) and says whether it is done.
class CommRequest {
 public:
  virtual ~CommRequest() = default;
  virtual void wait() = 0;
  virtual bool test() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "single", "mpi", "nccl"
  // The device whose tensors it takes: the CPU for single and mpi, the GPU for nccl.
  virtual Device device() const = 0;

  // t (contiguous, any shape) <- op over every rank's t.
  virtual void all_reduce(Tensor& t, ReduceOp op) = 0;
  // The same, started now; t must not be touched until the request is waited on.
  virtual std::unique_ptr<CommRequest> all_reduce_async(Tensor& t, ReduceOp op) = 0;
  // out (size() * n, ...) <- every rank's in (n, ...), in rank order along dim 0.
  virtual void all_gather(const Tensor& in, Tensor& out) = 0;
  // out (n, ...) <- the sum over ranks of in's rows [rank() * n, (rank() + 1) * n); in (size() * n, ...).
  virtual void reduce_scatter(const Tensor& in, Tensor& out) = 0;
  // t <- root's t.
  virtual void broadcast(Tensor& t, int root) = 0;
  virtual void barrier() = 0;
  // Ends every rank's process at once with `code` (after a failure on this one, so
  // that no rank waits forever in a collective). For a program's main() only.
  [[noreturn]] virtual void abort(int code) = 0;
};

// The collective watchdog: a collective of the MPI communicator that has waited
// `seconds` for the other ranks (0: forever) throws mn::Error naming the collective,
// its number in this process and the ranks that did not answer a ping within a few
// seconds (stopped, hung, or not in any collective), instead of waiting forever;
// the program's main() then ends every rank (Communicator::abort: MPI_Abort). The
// wait polls at full speed for 20 ms, then with a 0.5 ms sleep between polls (no core
// spinning at 100 % while a rank is slow).
// Default 1800 s, or MN_COLLECTIVE_TIMEOUT (seconds); the harness's
// --collective-timeout sets it. The NCCL communicator follows its collectives from a
// thread of its own with the same timeout (runtime/comm_nccl.cpp).
void set_collective_timeout(double seconds);
double collective_timeout();

// True when this build has the MPI communicator (CMake found MPI).
bool mpi_compiled();
// True when this build has the NCCL communicator (built with CUDA and NCCL).
bool nccl_compiled();

// The process's host communicator, made on first use: "mpi" when the launcher
// started more than one process (mn::Error when the build has no MPI, saying how to
// get it), "single" otherwise. Lives until exit (MPI_Finalize then).
Communicator& world();
// world() as it would be made, without making it: the launcher's size.
int world_size_from_env();

std::unique_ptr<Communicator> make_single_comm();
// MPI_COMM_WORLD (initialising MPI once); mn::Error in a build without MPI.
std::unique_ptr<Communicator> make_mpi_comm();
// An NCCL communicator over `bootstrap`'s ranks for CUDA device `device`
// (bootstrap broadcasts the unique id; a 1-rank world needs no exchange);
// mn::Error in a build without NCCL or without that device.
std::unique_ptr<Communicator> make_nccl_comm(Communicator& bootstrap, int device);

// Collectives' argument checks, shared by the backends: throws naming `op` and `backend`.
void check_comm_tensor(const char* op, const std::string& backend, const Tensor& t, Device expected);

}  // namespace mn
