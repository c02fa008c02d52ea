// Where a tensor's bytes live (CPU or CUDA:n) and run-time device discovery.
// Nothing here touches the driver at start-up: the first query does, and a
// machine without a GPU or without a driver simply reports no CUDA devices.
#pragma once
#include <string>

namespace mn {

enum class DeviceKind : uint8_t { CPU, CUDA };

struct Device {
  DeviceKind kind = DeviceKind::CPU;
  int index = 0;

  static Device cpu() { return {DeviceKind::CPU, 0}; }
  static Device cuda(int i = 0) { return {DeviceKind::CUDA, i}; }
  bool is_cpu() const { return kind == DeviceKind::CPU; }
  bool is_cuda() const { return kind == DeviceKind::CUDA; }
  bool operator==(const Device& o) const { return kind == o.kind && (is_cpu() || index == o.index); }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
};

// True when this build has the CUDA kernels compiled in.
bool cuda_compiled();
// Number of usable CUDA devices (0 without a GPU, a driver, or a CUDA build).
int cuda_device_count();
// cuda_compiled() && cuda_device_count() > 0.
bool cuda_available();
// "NVIDIA H100 80GB HBM3" etc.; "cpu" for the CPU.
std::string device_name(Device d);
// The CUDA driver's version as "major.minor" (cudaDriverGetVersion), "" without a
// driver or in a build without CUDA.
std::string cuda_driver_version();
// Parses "cpu", "cuda", "cuda:1".
Device parse_device(const std::string& s);
// Blocks until all work queued on the device is done (no-op on the CPU). Also the
// point where device-side error reports (a bad index) are raised as mn::Error.
void synchronize(Device d);

// The calling thread's current CUDA device; -1 when there is none (no CUDA build,
// driver or device).
int cuda_current_device();

// The device calls that bind a process to its GPU, behind an interface so that the
// binding logic is tested without a GPU (the tests pass a fake device count).
class DeviceCalls {
 public:
  virtual ~DeviceCalls() = default;
  virtual int count() = 0;                 // visible CUDA devices
  virtual void set_current(int index) = 0;  // cudaSetDevice
};
// The CUDA runtime's (count() 0 in a build without CUDA or a machine without a GPU).
DeviceCalls& cuda_device_calls();

// A data-parallel rank's GPU, bound once before any other CUDA work: local_rank's
// device (device 0 when the launcher shows each rank one GPU through
// CUDA_VISIBLE_DEVICES) is made current, so this process's primary context, streams,
// allocations and NCCL communicator are all on it and none is created on another
// rank's GPU (CudaDeviceScope restores to it, not to device 0). Throws naming the
// local rank, the node's ranks and its GPUs when they do not fit one GPU per rank
// (NCCL's requirement). Returns the device index.
int bind_local_rank_device(int local_rank, int local_size, DeviceCalls& calls);

// Makes a CUDA device current for a scope and restores the caller's device on exit
// (c10::cuda::CUDAGuard's role). Every CUDA entry point of the library runs inside
// one for the device of the tensors it touches (runtime/dispatch.h's
// MN_CUDA_BRANCH), so kernels launch and memory is allocated on the tensors' device
// whatever device the caller has current. No-op for the CPU.
class CudaDeviceScope {
 public:
  explicit CudaDeviceScope(Device d);
  ~CudaDeviceScope();
  CudaDeviceScope(const CudaDeviceScope&) = delete;
  CudaDeviceScope& operator=(const CudaDeviceScope&) = delete;

 private:
  int saved_ = -1;  // the device to restore; -1: nothing to restore
};

}  // namespace mn
