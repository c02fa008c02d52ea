// The NCCL communicator (runtime/comm.h) for CUDA tensors, one GPU per rank.
// Compiled whenever CUDA is and CMake finds libnccl (MN_WITH_NCCL: the CUDA
// toolkit at /usr/local/cuda ships it); otherwise make_nccl_comm() throws.
//
// Streams: every collective is queued on the communicator's own stream after an
// event recorded on the library's stream (cuda::stream()), so it reads the
// gradients the backward wrote before it and overlaps the kernels queued after
// it; wait() makes the library's stream wait for the collective's event (no host
// synchronisation). The blocking collectives do the same and wait at once.
// Errors: NCCL's result string, naming the collective; an asynchronous NCCL error
// (a peer died) is polled with ncclCommGetAsyncError in test() and by the watchdog.
// Watchdog (runtime/comm.h: collective_timeout): a thread follows every collective
// queued on the communicator's stream (an event recorded after it); when the oldest
// has not completed within the timeout, or NCCL reports an asynchronous error, it
// prints which collective waited on which rank, aborts the communicator
// (ncclCommAbort: the stalled kernels end) and every later call on it throws that
// message, so the harness's main() ends every rank (MPI_Abort).
#include "runtime/comm.h"

#if defined(MN_WITH_CUDA) && defined(MN_WITH_NCCL)
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "runtime/cuda_check.h"
#endif

namespace mn {

#if defined(MN_WITH_CUDA) && defined(MN_WITH_NCCL)
bool nccl_compiled() { return true; }

namespace {
void nccl_check(ncclResult_t r, const char* op) {
  MN_CHECK(r == ncclSuccess, op, " (nccl): ", ncclGetErrorString(r),
           r == ncclSystemError || r == ncclRemoteError ? " (another rank failed or left?)" : "");
}

ncclDataType_t nccl_type(const char* op, const Tensor& t) {
  switch (t.dtype()) {
    case DType::F32: return ncclFloat32;
    case DType::F64: return ncclFloat64;
    case DType::I32: return ncclInt32;
    case DType::I64: return ncclInt64;
    default: MN_THROW(op, " (nccl): dtype ", dtype_name(t.dtype()), " is not supported (float32, float64, int32, int64)");
  }
}

// Follows the collectives of one communicator from a thread of its own (see the top).
class NcclWatchdog {
 public:
  NcclWatchdog(int device, int rank, ncclComm_t comm)
      : device_(device), rank_(rank), comm_(comm), thread_([this] { loop(); }) {}
  ~NcclWatchdog() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    for (Pending& p : pending_) cudaEventDestroy(p.done);
  }
  // After a collective was queued on `stream` (main thread).
  void track(cudaStream_t stream, const char* op) {
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
    ++seq_;
    if (capturing != cudaStreamCaptureStatusNone) return;  // a graph's collective: replayed, not followed
    cudaEvent_t done;
    CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(done, stream));
    std::lock_guard<std::mutex> lk(mu_);
    pending_.push_back({done, op, seq_, std::chrono::steady_clock::now()});
  }
  // Throws the watchdog's message once it aborted the communicator.
  void check(const char* op) const {
    if (!aborted_) return;
    std::lock_guard<std::mutex> lk(mu_);
    MN_THROW(op, " (nccl): the communicator was aborted by the watchdog: ", why_);
  }
  bool aborted() const { return aborted_; }

 private:
  struct Pending {
    cudaEvent_t done;
    const char* op;
    long long seq;
    std::chrono::steady_clock::time_point start;
  };
  void loop() {
    if (cudaSetDevice(device_) != cudaSuccess) return;
    std::unique_lock<std::mutex> lk(mu_);
    while (!stop_) {
      cv_.wait_for(lk, std::chrono::milliseconds(100));
      while (!pending_.empty() && cudaEventQuery(pending_.front().done) == cudaSuccess) {
        cudaEventDestroy(pending_.front().done);
        pending_.pop_front();
      }
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      const double limit = collective_timeout();
      std::string why;
      if (async != ncclSuccess && async != ncclInProgress) {
        why = std::string("NCCL reported an asynchronous error: ") + ncclGetErrorString(async) +
              " (another rank failed or left?)";
      } else if (!pending_.empty() && limit > 0) {
        const Pending& p = pending_.front();
        const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - p.start).count();
        if (waited > limit)
          why = std::string(p.op) + " #" + std::to_string(p.seq) + " of rank " + std::to_string(rank_) +
                " had not completed after " + std::to_string(static_cast<long long>(waited)) +
                " s (--collective-timeout / MN_COLLECTIVE_TIMEOUT: " + std::to_string(static_cast<long long>(limit)) +
                " s): another rank is stopped, hung, or not in this collective";
      }
      if (why.empty()) continue;
      why_ = why;
      aborted_ = true;
      std::fprintf(stderr, "[rank %d] nccl watchdog: %s; aborting the communicator\n", rank_, why.c_str());
      std::fflush(stderr);
      ncclCommAbort(comm_);  // ends the stalled kernels; every later call on it throws why_
      return;
    }
  }

  const int device_, rank_;
  const ncclComm_t comm_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;
  bool stop_ = false;
  std::atomic<bool> aborted_{false};
  std::string why_;
  long long seq_ = 0;
  std::thread thread_;  // last: it starts once the members above exist
};

class NcclRequest final : public CommRequest {
 public:
  NcclRequest(cudaEvent_t done, ncclComm_t comm, int device, const NcclWatchdog& watch)
      : done_(done), comm_(comm), device_(device), watch_(watch) {}
  ~NcclRequest() override { CUDA_CHECK_NOTHROW(cudaEventDestroy(done_)); }
  // The library's stream of the communicator's device (not of whatever device is current)
  // waits for the collective.
  void wait() override {
    watch_.check("all_reduce_async (wait)");
    CudaDeviceScope scope(Device::cuda(device_));
    CUDA_CHECK(cudaStreamWaitEvent(cuda::stream(), done_, 0));
  }
  bool test() override {
    watch_.check("all_reduce_async (test)");
    CudaDeviceScope scope(Device::cuda(device_));
    ncclResult_t async = ncclSuccess;
    nccl_check(ncclCommGetAsyncError(comm_, &async), "all_reduce_async (test)");
    nccl_check(async, "all_reduce_async");
    const cudaError_t q = cudaEventQuery(done_);
    if (q == cudaErrorNotReady) return false;
    CUDA_CHECK(q);
    return true;
  }

 private:
  cudaEvent_t done_;
  ncclComm_t comm_;
  int device_;
  const NcclWatchdog& watch_;  // the communicator's, which outlives its requests
};

class NcclComm final : public Communicator {
 public:
  NcclComm(Communicator& bootstrap, int device) : device_(device) {
    int n = 0;
    CUDA_CHECK(cudaGetDeviceCount(&n));
    MN_CHECK(device >= 0 && device < n, "make_nccl_comm: CUDA device ", device, " does not exist (", n,
             " visible); one GPU per rank: give each rank its local rank's device");
    ncclUniqueId id;
    if (bootstrap.rank() == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    // rank 0's id to every rank, as bytes over the host communicator
    if (bootstrap.size() > 1) broadcast_bytes(bootstrap, &id, sizeof id);
    CudaDeviceScope scope(Device::cuda(device_));
    nccl_check(ncclCommInitRank(&comm_, bootstrap.size(), id, bootstrap.rank()), "ncclCommInitRank");
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    rank_ = bootstrap.rank();
    size_ = bootstrap.size();
    watch_ = std::make_unique<NcclWatchdog>(device_, rank_, comm_);
  }
  ~NcclComm() override {
    const bool aborted = watch_ && watch_->aborted();
    watch_.reset();
    if (comm_ && !aborted) ncclCommDestroy(comm_);
    if (stream_) CUDA_CHECK_NOTHROW(cudaStreamDestroy(stream_));
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }
  Device device() const override { return Device::cuda(device_); }

  void all_reduce(Tensor& t, ReduceOp op) override { all_reduce_async(t, op)->wait(); }
  std::unique_ptr<CommRequest> all_reduce_async(Tensor& t, ReduceOp op) override {
    check_comm_tensor("all_reduce", "nccl", t, device());
    watch_->check("all_reduce");
    CudaDeviceScope scope(device());
    after_library_stream();
    nccl_check(ncclAllReduce(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()), nccl_type("all_reduce", t),
                             op == ReduceOp::Sum ? ncclSum : ncclMax, comm_, stream_), "all_reduce");
    watch_->track(stream_, "all_reduce");
    return done_request();
  }
  void all_gather(const Tensor& in, Tensor& out) override {
    check_blocks("all_gather", out, in);
    watch_->check("all_gather");
    CudaDeviceScope scope(device());
    after_library_stream();
    nccl_check(ncclAllGather(in.raw_data(), out.raw_data(), static_cast<size_t>(in.numel()),
                             nccl_type("all_gather", in), comm_, stream_), "all_gather");
    watch_->track(stream_, "all_gather");
    done_request()->wait();
  }
  void reduce_scatter(const Tensor& in, Tensor& out) override {
    check_blocks("reduce_scatter", in, out);
    watch_->check("reduce_scatter");
    CudaDeviceScope scope(device());
    after_library_stream();
    nccl_check(ncclReduceScatter(in.raw_data(), out.raw_data(), static_cast<size_t>(out.numel()),
                                 nccl_type("reduce_scatter", out), ncclSum, comm_, stream_), "reduce_scatter");
    watch_->track(stream_, "reduce_scatter");
    done_request()->wait();
  }
  void broadcast(Tensor& t, int root) override {
    check_comm_tensor("broadcast", "nccl", t, device());
    MN_CHECK(root >= 0 && root < size_, "broadcast (nccl): root ", root, " is not a rank of a world of size ", size_);
    watch_->check("broadcast");
    CudaDeviceScope scope(device());
    after_library_stream();
    nccl_check(ncclBroadcast(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()), nccl_type("broadcast", t),
                             root, comm_, stream_), "broadcast");
    watch_->track(stream_, "broadcast");
    done_request()->wait();
  }
  void barrier() override {
    Tensor one = Tensor::zeros({1}, DType::F32, device());
    all_reduce(one, ReduceOp::Sum);
    synchronize(device());
  }
  [[noreturn]] void abort(int code) override {
    if (!watch_->aborted()) ncclCommAbort(comm_);
    comm_ = nullptr;
    std::_Exit(code);
  }

 private:
  // Rank 0's bytes to every rank over the host communicator (int32 words).
  static void broadcast_bytes(Communicator& c, void* p, size_t n) {
    const int64_t words = static_cast<int64_t>((n + 3) / 4);
    Tensor t = Tensor::zeros({words}, DType::I32);
    if (c.rank() == 0) std::memcpy(t.raw_data(), p, n);
    c.broadcast(t, 0);
    std::memcpy(p, t.raw_data(), n);
  }
  void after_library_stream() {
    cudaEvent_t ready;
    CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(ready, cuda::stream()));
    CUDA_CHECK(cudaStreamWaitEvent(stream_, ready, 0));
    CUDA_CHECK(cudaEventDestroy(ready));
  }
  std::unique_ptr<CommRequest> done_request() {
    cudaEvent_t done;
    CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(done, stream_));
    return std::make_unique<NcclRequest>(done, comm_, device_, *watch_);
  }
  void check_blocks(const char* op, const Tensor& whole, const Tensor& block) const {
    check_comm_tensor(op, "nccl", whole, device());
    check_comm_tensor(op, "nccl", block, device());
    MN_CHECK(whole.dtype() == block.dtype(), op, " (nccl): ", whole.desc(), " and ", block.desc(), " differ in dtype");
    MN_CHECK(whole.numel() == block.numel() * size_ && whole.dim() >= 1 && whole.size(0) == block.size(0) * size_,
             op, " (nccl): ", whole.desc(), " must hold ", size_, " blocks of ", block.desc(), " along dim 0");
  }
  int device_ = 0, rank_ = 0, size_ = 1;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<NcclWatchdog> watch_;
};
}  // namespace

std::unique_ptr<Communicator> make_nccl_comm(Communicator& bootstrap, int device) {
  return std::make_unique<NcclComm>(bootstrap, device);
}

#else  // no NCCL in this build

bool nccl_compiled() { return false; }
std::unique_ptr<Communicator> make_nccl_comm(Communicator&, int) {
  MN_THROW("make_nccl_comm: this build has no NCCL (it needs CUDA and libnccl, which the CUDA toolkit at "
           "/usr/local/cuda provides; configure with -DMN_ENABLE_CUDA=ON on a machine with nvcc)");
}

#endif

}  // namespace mn
