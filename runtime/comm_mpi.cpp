// The MPI communicator (runtime/comm.h) over MPI_COMM_WORLD, for host tensors.
// Compiled when CMake finds MPI (MN_WITH_MPI); otherwise make_mpi_comm() throws.
//
// Errors return (MPI_ERRORS_RETURN) and are thrown as mn::Error naming the
// collective and MPI's message. MPI is initialised with MPI_THREAD_FUNNELED: only
// the thread that made the communicator calls MPI (the thread pool's workers never
// do). MPI_Finalize runs when the communicator is destroyed (world() at exit).
#include "runtime/comm.h"

#if MN_WITH_MPI
#include <mpi.h>

#include <cstdio>
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

class MpiRequest final : public CommRequest {
 public:
  explicit MpiRequest(MPI_Request r) : req_(r) {}
  ~MpiRequest() override {
    // A request dropped unwaited (an exception unwound past it) must still complete
    // before its buffer can be freed.
    if (req_ != MPI_REQUEST_NULL) MPI_Wait(&req_, MPI_STATUS_IGNORE);
  }
  void wait() override { mpi_check(MPI_Wait(&req_, MPI_STATUS_IGNORE), "all_reduce_async (wait)"); }
  bool test() override {
    int done = 0;
    mpi_check(MPI_Test(&req_, &done, MPI_STATUS_IGNORE), "all_reduce_async (test)");
    return done != 0;
  }

 private:
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
  }
  ~MpiComm() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_ && !finalized) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  Device device() const override { return Device::cpu(); }

  void all_reduce(Tensor& t, ReduceOp op) override {
    check_comm_tensor("all_reduce", "mpi", t, Device::cpu());
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, t.raw_data(), count_of("all_reduce", t), mpi_type("all_reduce", t),
                            mpi_op(op), MPI_COMM_WORLD), "all_reduce");
  }
  std::unique_ptr<CommRequest> all_reduce_async(Tensor& t, ReduceOp op) override {
    check_comm_tensor("all_reduce_async", "mpi", t, Device::cpu());
    MPI_Request r = MPI_REQUEST_NULL;
    mpi_check(MPI_Iallreduce(MPI_IN_PLACE, t.raw_data(), count_of("all_reduce_async", t),
                             mpi_type("all_reduce_async", t), mpi_op(op), MPI_COMM_WORLD, &r),
              "all_reduce_async");
    return std::make_unique<MpiRequest>(r);
  }
  void all_gather(const Tensor& in, Tensor& out) override {
    check_blocks("all_gather", out, in);
    mpi_check(MPI_Allgather(in.raw_data(), count_of("all_gather", in), mpi_type("all_gather", in), out.raw_data(),
                            count_of("all_gather", in), mpi_type("all_gather", in), MPI_COMM_WORLD), "all_gather");
  }
  void reduce_scatter(const Tensor& in, Tensor& out) override {
    check_blocks("reduce_scatter", in, out);
    mpi_check(MPI_Reduce_scatter_block(in.raw_data(), out.raw_data(), count_of("reduce_scatter", out),
                                       mpi_type("reduce_scatter", out), MPI_SUM, MPI_COMM_WORLD), "reduce_scatter");
  }
  void broadcast(Tensor& t, int root) override {
    check_comm_tensor("broadcast", "mpi", t, Device::cpu());
    MN_CHECK(root >= 0 && root < size_, "broadcast (mpi): root ", root, " is not a rank of a world of size ", size_);
    mpi_check(MPI_Bcast(t.raw_data(), count_of("broadcast", t), mpi_type("broadcast", t), root, MPI_COMM_WORLD),
              "broadcast");
  }
  void barrier() override { mpi_check(MPI_Barrier(MPI_COMM_WORLD), "barrier"); }
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
  int rank_ = 0, size_ = 1;
  bool owns_ = false;
};
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
