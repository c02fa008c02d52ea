// CUDA error checking that throws (mn::CudaError with the expression, CUDA's
// error name and message, file and line). Include only from files that are
// compiled with CUDA (.cu, or .cpp guarded by MN_WITH_CUDA).
//
//   CUDA_CHECK(cudaMemcpy(...));          // after every runtime call
//   my_kernel<<<g, b, 0, s>>>(...);
//   CUDA_CHECK_LAUNCH("my_kernel");       // after every launch
//   CUDA_CHECK_NOTHROW(cudaFree(p));      // in destructors: reports, never throws
//
// With MN_CUDA_DEBUG_SYNC defined at build time, or MN_CUDA_SYNC=1 in the
// environment, CUDA_CHECK_LAUNCH also synchronises so an asynchronous error is
// reported at the kernel that caused it.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/error.h"

namespace mn::cuda {
[[noreturn]] void throw_cuda_error(cudaError_t e, const char* expr, const char* file, int line);
void report_cuda_error(cudaError_t e, const char* expr, const char* file, int line) noexcept;
void check_launch(const char* kernel, const char* file, int line);
bool debug_sync_enabled();

// The stream all of the library's work is queued on. Work is ordered on it, which
// is what makes reuse of cached blocks safe without events.
cudaStream_t stream();
// While this thread captures a CUDA graph, stream() returns `s` (nullptr: back to
// the library's stream). For runtime/graph.cpp only.
void set_capture_stream(cudaStream_t s);

// Device-side error reports. A kernel that finds a bad index (an index tensor
// pointing outside the tensor it indexes) records the first one in a small
// per-device record and skips the element (nothing is read or written out of
// bounds), without synchronising; the host looks at the record at its next
// synchronisation point (every device-to-host copy, mn::synchronize) and throws
// mn::Error naming the op, the index and the bound. The record is then cleared.
enum class DeviceOp : int { None = 0, IndexSelect, IndexAdd, Gather, ScatterAdd, LossIndex, MinerCapacity };
const char* device_op_name(DeviceOp op);
struct DeviceReport {
  int flag;         // 0: nothing reported
  int op;           // DeviceOp
  long long index;  // the bad index
  long long bound;  // valid indices are [0, bound)
};
// The current device's record (device memory, allocated on first use).
DeviceReport* device_report();
// Reads the current device's record (after synchronising the library's stream) and
// throws when a kernel reported an error since the last check. Cheap: 24 bytes.
void check_device_report();

// Grid size for a grid-stride loop over n elements.
inline unsigned grid_for(int64_t n, int threads = 256, int max_blocks = 65535 * 8) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > max_blocks) b = max_blocks;
  return static_cast<unsigned>(b);
}
}  // namespace mn::cuda

#ifdef __CUDACC__
namespace mn::cuda {
// In a kernel: records the first bad index of the launch's device (see DeviceReport).
__device__ inline void report_bad_index(DeviceReport* r, DeviceOp op, long long index, long long bound) {
  if (atomicCAS(&r->flag, 0, 1) == 0) {
    r->op = static_cast<int>(op);
    r->index = index;
    r->bound = bound;
    __threadfence();
  }
}
}  // namespace mn::cuda
#endif

#define CUDA_CHECK(expr)                                                   \
  do {                                                                     \
    cudaError_t mn_cuda_err_ = (expr);                                     \
    if (mn_cuda_err_ != cudaSuccess)                                       \
      ::mn::cuda::throw_cuda_error(mn_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)

#define CUDA_CHECK_NOTHROW(expr)                                                \
  do {                                                                          \
    cudaError_t mn_cuda_err_ = (expr);                                          \
    if (mn_cuda_err_ != cudaSuccess)                                            \
      ::mn::cuda::report_cuda_error(mn_cuda_err_, #expr, __FILE__, __LINE__);   \
  } while (0)

#define CUDA_CHECK_LAUNCH(kernel_name) ::mn::cuda::check_launch(kernel_name, __FILE__, __LINE__)
