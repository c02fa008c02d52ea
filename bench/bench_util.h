// Shared benchmark helpers: CUDA-event timing of work queued on the library's
// stream (Google Benchmark's manual time).
#pragma once
#ifdef MN_WITH_CUDA
#include <cuda_runtime.h>

#include "runtime/cuda_check.h"

namespace mn::bench {

// Seconds of device time taken by the work f() queues on mn::cuda::stream().
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
  double seconds(F&& f) {
    CUDA_CHECK(cudaEventRecord(a_, cuda::stream()));
    f();
    CUDA_CHECK(cudaEventRecord(b_, cuda::stream()));
    CUDA_CHECK(cudaEventSynchronize(b_));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a_, b_));
    return ms * 1e-3;
  }

 private:
  cudaEvent_t a_, b_;
};

}  // namespace mn::bench
#endif
