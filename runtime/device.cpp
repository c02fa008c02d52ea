// Run-time device discovery. The driver is asked lazily, once; any failure
// (no driver, no device, a CPU-only build) means "no CUDA devices".
#include "runtime/device.h"

#include <mutex>

#include "runtime/error.h"
#ifdef MN_WITH_CUDA
#include "runtime/cuda_check.h"
#endif

namespace mn {

bool cuda_compiled() {
#ifdef MN_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count() {
#ifdef MN_WITH_CUDA
  static int count = [] {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // clear the sticky "no device/driver" error
      return 0;
    }
    return n;
  }();
  return count;
#else
  return 0;
#endif
}

bool cuda_available() { return cuda_device_count() > 0; }

namespace {
class CudaDeviceCalls final : public DeviceCalls {
 public:
  int count() override { return cuda_device_count(); }
  void set_current(int index) override {
#ifdef MN_WITH_CUDA
    CUDA_CHECK(cudaSetDevice(index));
#else
    MN_THROW("set_current: cuda:", index, " requested but this build has no CUDA");
#endif
  }
};
}  // namespace

DeviceCalls& cuda_device_calls() {
  static CudaDeviceCalls calls;
  return calls;
}

int bind_local_rank_device(int local_rank, int local_size, DeviceCalls& calls) {
  const int n = calls.count();
  MN_CHECK(n > 0, "data-parallel rank (local rank ", local_rank, "): no CUDA device is visible to this process ",
           "(CUDA_VISIBLE_DEVICES empty? no driver?); run with --device cpu or give each rank a GPU");
  // One visible GPU per rank (Slurm --gpus-per-task, or CUDA_VISIBLE_DEVICES set per rank): it is ours.
  const int index = n == 1 ? 0 : local_rank;
  MN_CHECK(index < n && (n == 1 || local_size <= n), "data-parallel rank: local rank ", local_rank, " of ",
           local_size > 0 ? std::to_string(local_size) : std::string("?"), " ranks on this node, but the node shows ",
           n, " CUDA device(s) to each of them: NCCL needs one GPU per rank; start at most ", n,
           " ranks per node (mpirun --map-by ppr:", n, ":node, srun --ntasks-per-node=", n, ")");
  calls.set_current(index);
  return index;
}

std::string device_name(Device d) {
  if (d.is_cpu()) return "cpu";
#ifdef MN_WITH_CUDA
  MN_CHECK(d.index < cuda_device_count(), "device_name: ", d.str(), " does not exist (",
           cuda_device_count(), " CUDA devices)");
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, d.index));
  return prop.name;
#else
  MN_THROW("device_name: ", d.str(), " requested but this build has no CUDA");
#endif
}

std::string cuda_driver_version() {
#ifdef MN_WITH_CUDA
  int v = 0;
  if (cudaDriverGetVersion(&v) != cudaSuccess || v == 0) return "";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
#else
  return "";
#endif
}

Device parse_device(const std::string& s) {
  if (s == "cpu") return Device::cpu();
  if (s == "cuda") return Device::cuda(0);
  if (s.rfind("cuda:", 0) == 0) {
    try {
      size_t used = 0;
      int idx = std::stoi(s.substr(5), &used);
      if (used == s.size() - 5 && idx >= 0) return Device::cuda(idx);
    } catch (const std::exception&) {
    }
  }
  MN_THROW("parse_device: '", s, "' is not a device (expected cpu, cuda or cuda:N)");
}

int cuda_current_device() {
#ifdef MN_WITH_CUDA
  if (cuda_device_count() == 0) return -1;
  int cur = -1;
  CUDA_CHECK(cudaGetDevice(&cur));
  return cur;
#else
  return -1;
#endif
}

CudaDeviceScope::CudaDeviceScope(Device d) {
#ifdef MN_WITH_CUDA
  // No such device (or none at all): nothing to switch to; the op's own check
  // (check_cuda_usable) then names the op, the device and the cause.
  if (!d.is_cuda() || d.index < 0 || d.index >= cuda_device_count()) return;
  int cur = 0;
  CUDA_CHECK(cudaGetDevice(&cur));
  if (cur != d.index) {
    CUDA_CHECK(cudaSetDevice(d.index));
    saved_ = cur;
  }
#else
  (void)d;
#endif
}

CudaDeviceScope::~CudaDeviceScope() {
#ifdef MN_WITH_CUDA
  if (saved_ >= 0) CUDA_CHECK_NOTHROW(cudaSetDevice(saved_));
#endif
}

void synchronize(Device d) {
  if (d.is_cpu()) return;
#ifdef MN_WITH_CUDA
  const CudaDeviceScope guard(d);
  CUDA_CHECK(cudaDeviceSynchronize());
  cuda::check_device_report();
#else
  MN_THROW("synchronize: ", d.str(), " requested but this build has no CUDA");
#endif
}

}  // namespace mn
