// CUDA error reporting: throwing and non-throwing checks, the launch check,
// and the library's stream. Compiled only in CUDA builds.
#ifdef MN_WITH_CUDA
#include "runtime/cuda_check.h"

#include <cstdio>
#include <cstdlib>
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
}

cudaStream_t stream() {
  // The legacy default stream: every library kernel and copy is ordered on it.
  return cudaStreamLegacy;
}

}  // namespace mn::cuda
#endif
