// Shared benchmark helpers: CUDA-event timing of work queued on the library's
// stream (Google Benchmark's manual time), and a guard that turns an exception
// thrown by one benchmark (a CUDA/cuDNN/cuBLAS error, a failed MN_CHECK) into
// SkipWithError instead of std::terminate, so the remaining benchmarks of the
// binary still run and the JSON output is complete.
#pragma once
#include <benchmark/benchmark.h>

#include <exception>
#include <string>

#ifdef MN_WITH_CUDA
#include <cuda_runtime.h>

#include "runtime/cuda_check.h"
#endif

namespace mn::bench {

// Runs body(); an exception skips the benchmark with its message. Use as the
// whole body of a GPU benchmark: `guard(state, [&] { ... });` (a `return` inside
// the lambda leaves the benchmark). Safe inside the timing loop: Google Benchmark
// accepts SkipWithError after the loop was left early.
template <typename F>
void guard(benchmark::State& state, F&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    state.SkipWithError((std::string("exception: ") + e.what()).c_str());
  }
}

#ifdef MN_WITH_CUDA
// Seconds of device time taken by the work f() queues on mn::cuda::stream().
// seconds(f, reps) runs f reps times between the two events and returns the
// mean per call: use it for kernels of a few microseconds, where one call per
// event pair would mostly measure the launch latency.
class EventTimer {
 public:
  EventTimer() {
    CUDA_CHECK(cudaEventCreate(&a_));
    CUDA_CHECK(cudaEventCreate(&b_));
  }
  ~EventTimer() {
    CUDA_CHECK_NOTHROW(cudaEventDestroy(a_));
    CUDA_CHECK_NOTHROW(cudaEventDestroy(b_));
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  template <typename F>
  double seconds(F&& f, int reps = 1) {
    CUDA_CHECK(cudaEventRecord(a_, cuda::stream()));
    for (int r = 0; r < reps; ++r) f();
    CUDA_CHECK(cudaEventRecord(b_, cuda::stream()));
    CUDA_CHECK(cudaEventSynchronize(b_));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a_, b_));
    return ms * 1e-3 / reps;
  }

 private:
  cudaEvent_t a_, b_;
};

// Bytes that certainly evict the L2 cache: twice its size (at least 8 MiB).
inline size_t l2_flush_bytes() {
  int dev = 0, l2 = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  const size_t b = 2 * size_t(l2);
  return b < (size_t(8) << 20) ? (size_t(8) << 20) : b;
}
#endif

}  // namespace mn::bench
