// The MPI communicator (runtime/comm.h) over MPI_COMM_WORLD, for host tensors.
// Compiled when CMake finds MPI (MN_WITH_MPI); otherwise make_mpi_comm() throws.
//
// Errors return (MPI_ERRORS_RETURN) and are thrown as mn::Error naming the
// collective and MPI's message. Every collective is started non-blocking and
// completed by MpiComm::await, which the watchdog bounds (runtime/comm.h:
// collective_timeout). MPI is initialised with MPI_THREAD_FUNNELED: only
// the thread that made the communicator calls MPI (the thread pool's workers never
// do). MPI_Finalize runs when the communicator is destroyed (world() at exit).
#include "runtime/comm.h"

#if MN_WITH_MPI
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>
#endif

namespace mn {

#if MN_WITH_MPI
bool mpi_compiled() { return true; }

namespace {
void mpi_check(int rc, const char* op) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  MN_THROW(op, " (mpi): ", std::string(msg, static_cast<size_t>(len)),
           " (another rank failed or left? every rank must call the same collectives in the same order)");
}

MPI_Datatype mpi_type(const char* op, const Tensor& t) {
  switch (t.dtype()) {
    case DType::F32: return MPI_FLOAT;
    case DType::F64: return MPI_DOUBLE;
    case DType::I32: return MPI_INT32_T;
    case DType::I64: return MPI_INT64_T;
    default: MN_THROW(op, " (mpi): dtype ", dtype_name(t.dtype()), " is not supported (float32, float64, int32, int64)");
  }
}

MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::Sum ? MPI_SUM : MPI_MAX; }

int count_of(const char* op, const Tensor& t) {
  MN_CHECK(t.numel() < (int64_t{1} << 31), op, " (mpi): ", t.numel(), " elements exceed MPI's int count");
  return static_cast<int>(t.numel());
}

// Set when a watchdog expired: the job is ending, so requests still in flight are
// left as they are (waiting on them would hang the unwinding).
std::atomic<bool> g_broken{false};
constexpr int kTagPing = 7001, kTagPong = 7002;

class MpiComm;

class MpiRequest final : public CommRequest {
 public:
  MpiRequest(MpiComm& comm, MPI_Request r) : comm_(comm), req_(r) {}
  ~MpiRequest() override {
    // A request dropped unwaited (an exception unwound past it) must still complete
    // before its buffer can be freed.
    if (req_ != MPI_REQUEST_NULL && !g_broken) MPI_Wait(&req_, MPI_STATUS_IGNORE);
  }
  void wait() override;
  bool test() override {
    int done = 0;
    mpi_check(MPI_Test(&req_, &done, MPI_STATUS_IGNORE), "all_reduce_async (test)");
    return done != 0;
  }

 private:
  MpiComm& comm_;
  MPI_Request req_;
};

class MpiComm final : public Communicator {
 public:
  MpiComm() {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      int provided = 0;
      mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
      owns_ = true;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    // The watchdog's pings travel on a communicator of their own, never mixed with the collectives.
    mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &watch_), "MPI_Comm_dup");
  }
  ~MpiComm() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && !g_broken) MPI_Comm_free(&watch_);
    if (owns_ && !finalized) MPI_Finalize();
  }

  // Completes a started collective, polling with a growing sleep (a slow rank does not
  // cost a spinning core) and answering the other ranks' watchdog pings; throws after
  // collective_timeout() seconds (watchdog_expired).
  void await(MPI_Request& r, const char* op) {
    ++seq_;
    const double limit = collective_timeout();
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      int done = 0;
      mpi_check(MPI_Test(&r, &done, MPI_STATUS_IGNORE), op);
      if (done) return;
      answer_pings();
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (limit > 0 && waited > limit) watchdog_expired(op, waited, limit);
      // The ranks of a step arrive within milliseconds of each other: poll at full speed
      // for 20 ms (no added latency), then sleep 0.5 ms between polls (a rank waiting
      // seconds for a slow or stopped one costs a few percent of a core, not all of it).
      if (waited > 0.02) std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  Device device() const override { return Device::cpu(); }

  void all_reduce(Tensor& t, ReduceOp op) override {
    check_comm_tensor("all_reduce", "mpi", t, Device::cpu());
    MPI_Request r = MPI_REQUEST_NULL;
    mpi_check(MPI_Iallreduce(MPI_IN_PLACE, t.raw_data(), count_of("all_reduce", t), mpi_type("all_reduce", t),
                             mpi_op(op), MPI_COMM_WORLD, &r), "all_reduce");
    await(r, "all_reduce");
  }
  std::unique_ptr<CommRequest> all_reduce_async(Tensor& t, ReduceOp op) override {
    check_comm_tensor("all_reduce_async", "mpi", t, Device::cpu());
    MPI_Request r = MPI_REQUEST_NULL;
    mpi_check(MPI_Iallreduce(MPI_IN_PLACE, t.raw_data(), count_of("all_reduce_async", t),
                             mpi_type("all_reduce_async", t), mpi_op(op), MPI_COMM_WORLD, &r),
              "all_reduce_async");
    return std::make_unique<MpiRequest>(*this, r);
  }
  void all_gather(const Tensor& in, Tensor& out) override {
    check_blocks("all_gather", out, in);
    MPI_Request r = MPI_REQUEST_NULL;
    mpi_check(MPI_Iallgather(in.raw_data(), count_of("all_gather", in), mpi_type("all_gather", in), out.raw_data(),
                             count_of("all_gather", in), mpi_type("all_gather", in), MPI_COMM_WORLD, &r),
              "all_gather");
    await(r, "all_gather");
  }
  void reduce_scatter(const Tensor& in, Tensor& out) override {
    check_blocks("reduce_scatter", in, out);
    MPI_Request r = MPI_REQUEST_NULL;
    mpi_check(MPI_Ireduce_scatter_block(in.raw_data(), out.raw_data(), count_of("reduce_scatter", out),
                                        mpi_type("reduce_scatter", out), MPI_SUM, MPI_COMM_WORLD, &r),
              "reduce_scatter");
    await(r, "reduce_scatter");
  }
  void broadcast(Tensor& t, int root) override {
    check_comm_tensor("broadcast", "mpi", t, Device::cpu());
    MN_CHECK(root >= 0 && root < size_, "broadcast (mpi): root ", root, " is not a rank of a world of size ", size_);
    MPI_Request r = MPI_REQUEST_NULL;
    mpi_check(MPI_Ibcast(t.raw_data(), count_of("broadcast", t), mpi_type("broadcast", t), root, MPI_COMM_WORLD, &r),
              "broadcast");
    await(r, "broadcast");
  }
  void barrier() override {
    MPI_Request r = MPI_REQUEST_NULL;
    mpi_check(MPI_Ibarrier(MPI_COMM_WORLD, &r), "barrier");
    await(r, "barrier");
  }
  [[noreturn]] void abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; this is for a broken MPI
  }

 private:
  // whole (size * n, ...) and block (n, ...): same dtype, contiguous host tensors.
  void check_blocks(const char* op, const Tensor& whole, const Tensor& block) const {
    check_comm_tensor(op, "mpi", whole, Device::cpu());
    check_comm_tensor(op, "mpi", block, Device::cpu());
    MN_CHECK(whole.dtype() == block.dtype(), op, " (mpi): ", whole.desc(), " and ", block.desc(),
             " differ in dtype");
    MN_CHECK(whole.numel() == block.numel() * size_ && whole.dim() >= 1 && whole.size(0) == block.size(0) * size_,
             op, " (mpi): ", whole.desc(), " must hold ", size_, " blocks of ", block.desc(), " along dim 0");
  }
  // Every pending ping (from a rank whose watchdog expired) gets a pong: this rank is alive
  // and inside a collective.
  void answer_pings() {
    for (;;) {
      int flag = 0;
      MPI_Status st;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kTagPing, watch_, &flag, &st) != MPI_SUCCESS || !flag) return;
      int from = -1;
      MPI_Recv(&from, 1, MPI_INT, st.MPI_SOURCE, kTagPing, watch_, MPI_STATUS_IGNORE);
      MPI_Request q = MPI_REQUEST_NULL;
      MPI_Isend(&rank_, 1, MPI_INT, st.MPI_SOURCE, kTagPong, watch_, &q);
      MPI_Request_free(&q);
    }
  }

  // The watchdog: ping every other rank, give them a few seconds to answer, and throw
  // naming the collective and the ranks that did not (main() then ends the job).
  [[noreturn]] void watchdog_expired(const char* op, double waited, double limit) {
    g_broken = true;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      MPI_Request q = MPI_REQUEST_NULL;
      MPI_Isend(&rank_, 1, MPI_INT, r, kTagPing, watch_, &q);
      MPI_Request_free(&q);
    }
    std::vector<bool> answered(static_cast<size_t>(size_), false);
    answered[static_cast<size_t>(rank_)] = true;
    const double grace = std::min(5.0, std::max(1.0, limit));
    const auto t0 = std::chrono::steady_clock::now();
    while (std::count(answered.begin(), answered.end(), false) > 0 &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < grace) {
      int flag = 0;
      MPI_Status st;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kTagPong, watch_, &flag, &st) == MPI_SUCCESS && flag) {
        int who = -1;
        MPI_Recv(&who, 1, MPI_INT, st.MPI_SOURCE, kTagPong, watch_, MPI_STATUS_IGNORE);
        answered[static_cast<size_t>(st.MPI_SOURCE)] = true;
        continue;
      }
      answer_pings();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::string silent;
    for (int r = 0; r < size_; ++r)
      if (!answered[static_cast<size_t>(r)]) silent += (silent.empty() ? "" : ", ") + std::to_string(r);
    const std::string why =
        silent.empty()
            ? "every other rank answered a ping, so all are inside collectives: a rank called another collective "
              "than this one (every rank must call the same collectives in the same order)"
            : "rank(s) " + silent + " did not answer a ping within " + std::to_string(static_cast<int>(grace)) +
                  " s: stopped, hung, or not in any collective (a rank that runs on alone, as rank 0 validating, "
                  "needs a longer --collective-timeout)";
    MN_THROW(op, " (mpi): rank ", rank_, " waited ", std::lround(waited), " s in collective #", seq_,
             " of this process for the other ranks (--collective-timeout / MN_COLLECTIVE_TIMEOUT: ", limit, " s); ",
             why, "; ending the job");
  }

  int rank_ = 0, size_ = 1;
  bool owns_ = false;
  MPI_Comm watch_ = MPI_COMM_NULL;
  long long seq_ = 0;
};

void MpiRequest::wait() {
  comm_.await(req_, "all_reduce_async (wait)");
}
}  // namespace

std::unique_ptr<Communicator> make_mpi_comm() { return std::make_unique<MpiComm>(); }

#else  // no MPI in this build

bool mpi_compiled() { return false; }
std::unique_ptr<Communicator> make_mpi_comm() {
  MN_THROW("make_mpi_comm: this build has no MPI (CMake did not find it); install Open MPI (apt-get install "
           "libopenmpi-dev openmpi-bin) and configure the build again");
}

#endif

}  // namespace mn
