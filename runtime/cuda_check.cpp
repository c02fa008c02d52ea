// CUDA error reporting: throwing and non-throwing checks, the launch check,
// and the library's stream. Compiled only in CUDA builds.
#ifdef MN_WITH_CUDA
#include "runtime/cuda_check.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace mn::cuda {

void throw_cuda_error(cudaError_t e, const char* expr, const char* file, int line) {
  throw CudaError(std::string("CUDA error ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                      ") in `" + expr + "`",
                  file, line);
}

void report_cuda_error(cudaError_t e, const char* expr, const char* file, int line) noexcept {
  std::fprintf(stderr, "[mn] CUDA error %s (%s) in `%s` at %s:%d (not thrown: destructor)\n",
               cudaGetErrorName(e), cudaGetErrorString(e), expr, file, line);
}

bool debug_sync_enabled() {
#ifdef MN_CUDA_DEBUG_SYNC
  return true;
#else
  static const bool on = [] {
    const char* v = std::getenv("MN_CUDA_SYNC");
    return v && std::string(v) != "0";
  }();
  return on;
#endif
}

void check_launch(const char* kernel, const char* file, int line) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess && debug_sync_enabled()) e = cudaStreamSynchronize(stream());
  if (e != cudaSuccess) {
    throw CudaError(std::string("CUDA error ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                        ") launching kernel " + kernel,
                    file, line);
  }
  if (debug_sync_enabled()) check_device_report();
}

const char* device_op_name(DeviceOp op) {
  switch (op) {
    case DeviceOp::IndexSelect: return "index_select";
    case DeviceOp::IndexAdd: return "index_add";
    case DeviceOp::Gather: return "gather";
    case DeviceOp::ScatterAdd: return "scatter_add";
    case DeviceOp::LossIndex: return "a loss over an index list (triplet_loss_indexed, contrastive_loss_indexed or their gradient)";
    case DeviceOp::MinerCapacity:
      return "mine_triplets into a fixed capacity (MinerParams::capacity; the index is the number of triplets "
             "mined, the bound the capacity: give triplet_capacity() of the batch's class sizes)";
    case DeviceOp::None: break;
  }
  return "a CUDA kernel";
}

namespace {
constexpr int kMaxDevices = 64;
std::mutex g_report_mu;
DeviceReport* g_reports[kMaxDevices] = {};
}  // namespace

DeviceReport* device_report() {
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  MN_CHECK(dev >= 0 && dev < kMaxDevices, "device_report: CUDA device ", dev, " beyond ", kMaxDevices);
  std::lock_guard<std::mutex> lk(g_report_mu);
  if (!g_reports[dev]) {
    // Allocated once per device for the process's lifetime (24 bytes; never freed,
    // so no kernel can outlive it).
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, sizeof(DeviceReport)));
    CUDA_CHECK(cudaMemset(p, 0, sizeof(DeviceReport)));
    g_reports[dev] = static_cast<DeviceReport*>(p);
  }
  return g_reports[dev];
}

void check_device_report() {
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  DeviceReport* r = nullptr;
  {
    std::lock_guard<std::mutex> lk(g_report_mu);
    r = dev >= 0 && dev < kMaxDevices ? g_reports[dev] : nullptr;
  }
  if (!r) return;  // no kernel of this device has used it yet
  DeviceReport h{};
  CUDA_CHECK(cudaMemcpyAsync(&h, r, sizeof h, cudaMemcpyDeviceToHost, stream()));
  CUDA_CHECK(cudaStreamSynchronize(stream()));
  if (h.flag == 0) return;
  CUDA_CHECK(cudaMemsetAsync(r, 0, sizeof(DeviceReport), stream()));
  MN_THROW(device_op_name(static_cast<DeviceOp>(h.op)), " (cuda:", dev, "): index ", h.index,
           " is out of range [0, ", h.bound, "); the bad element was skipped (the output holds 0 "
           "there), and this is reported at the next synchronisation point, so the op that "
           "failed may be some calls back (set MN_CUDA_SYNC=1 to report it at the op)");
}

namespace {
thread_local cudaStream_t tl_capture_stream = nullptr;
}

cudaStream_t stream() {
  // The legacy default stream: every library kernel and copy is ordered on it;
  // while this thread captures a CUDA graph, the capture's stream (runtime/graph.h).
  return tl_capture_stream ? tl_capture_stream : cudaStreamLegacy;
}

void set_capture_stream(cudaStream_t s) { tl_capture_stream = s; }

}  // namespace mn::cuda
#endif
