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
// (a peer died) is polled with ncclCommGetAsyncError in test().
#include "runtime/comm.h"

#if defined(MN_WITH_CUDA) && defined(MN_WITH_NCCL)
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>

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

class NcclRequest final : public CommRequest {
 public:
  NcclRequest(cudaEvent_t done, ncclComm_t comm, int device) : done_(done), comm_(comm), device_(device) {}
  ~NcclRequest() override { CUDA_CHECK_NOTHROW(cudaEventDestroy(done_)); }
  // The library's stream of the communicator's device (not of whatever device is current)
  // waits for the collective.
  void wait() override {
    CudaDeviceScope scope(Device::cuda(device_));
    CUDA_CHECK(cudaStreamWaitEvent(cuda::stream(), done_, 0));
  }
  bool test() override {
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
  }
  ~NcclComm() override {
    if (comm_) ncclCommDestroy(comm_);
    if (stream_) CUDA_CHECK_NOTHROW(cudaStreamDestroy(stream_));
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }
  Device device() const override { return Device::cuda(device_); }

  void all_reduce(Tensor& t, ReduceOp op) override { all_reduce_async(t, op)->wait(); }
  std::unique_ptr<CommRequest> all_reduce_async(Tensor& t, ReduceOp op) override {
    check_comm_tensor("all_reduce", "nccl", t, device());
    CudaDeviceScope scope(device());
    after_library_stream();
    nccl_check(ncclAllReduce(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()), nccl_type("all_reduce", t),
                             op == ReduceOp::Sum ? ncclSum : ncclMax, comm_, stream_), "all_reduce");
    return done_request();
  }
  void all_gather(const Tensor& in, Tensor& out) override {
    check_blocks("all_gather", out, in);
    CudaDeviceScope scope(device());
    after_library_stream();
    nccl_check(ncclAllGather(in.raw_data(), out.raw_data(), static_cast<size_t>(in.numel()),
                             nccl_type("all_gather", in), comm_, stream_), "all_gather");
    done_request()->wait();
  }
  void reduce_scatter(const Tensor& in, Tensor& out) override {
    check_blocks("reduce_scatter", in, out);
    CudaDeviceScope scope(device());
    after_library_stream();
    nccl_check(ncclReduceScatter(in.raw_data(), out.raw_data(), static_cast<size_t>(out.numel()),
                                 nccl_type("reduce_scatter", out), ncclSum, comm_, stream_), "reduce_scatter");
    done_request()->wait();
  }
  void broadcast(Tensor& t, int root) override {
    check_comm_tensor("broadcast", "nccl", t, device());
    MN_CHECK(root >= 0 && root < size_, "broadcast (nccl): root ", root, " is not a rank of a world of size ", size_);
    CudaDeviceScope scope(device());
    after_library_stream();
    nccl_check(ncclBroadcast(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()), nccl_type("broadcast", t),
                             root, comm_, stream_), "broadcast");
    done_request()->wait();
  }
  void barrier() override {
    Tensor one = Tensor::zeros({1}, DType::F32, device());
    all_reduce(one, ReduceOp::Sum);
    synchronize(device());
  }
  [[noreturn]] void abort(int code) override {
    ncclCommAbort(comm_);
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
    return std::make_unique<NcclRequest>(done, comm_, device_);
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
