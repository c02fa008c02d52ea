// The CUDA caching allocator (steady state makes no cudaMalloc) and the CPU
// thread pool.
#include <gtest/gtest.h>

#include <atomic>
#include <numeric>

#include "runtime/allocator.h"
#include "runtime/parallel.h"
#include "runtime/tensor.h"
#include "tests/common/test_util.h"

using namespace mn;

TEST(CpuAlloc, AlignedTo64) {
  for (size_t n : {1, 3, 64, 1000, 4097}) {
    void* p = cpu_alloc(n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    cpu_free(p);
  }
}

TEST(Parallel, CoversRangeExactlyOnce) {
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    std::vector<std::atomic<int>> hits(10007);
    parallel_for(0, 10007, 100, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
  set_num_threads(2);
}

TEST(Parallel, PropagatesExceptionsAndNests) {
  EXPECT_THROW(parallel_for(0, 1000, 1, [](int64_t b, int64_t) {
                 if (b > 500) throw std::runtime_error("boom");
               }),
               std::runtime_error);
  std::atomic<int64_t> sum{0};
  parallel_for(0, 8, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      parallel_for(0, 10, 1, [&](int64_t b2, int64_t e2) { sum += (e2 - b2); });
  });
  EXPECT_EQ(sum.load(), 80);
}

// Many back-to-back tiny regions on an oversubscribed pool: a worker woken late
// for one region must never run a chunk of the next (twice), and no chunk may
// still be running when parallel_for returns. (Stress test: the race it guards
// against has a narrow window, so it can pass by luck on a broken pool.)
TEST(Parallel, BackToBackRegionsRunEachChunkOnceAndFinish) {
  set_num_threads(6);
  for (int it = 0; it < 5000; ++it) {
    const int64_t n = 2 + it % 7;
    std::vector<std::atomic<int>> hits(n);
    std::atomic<int> running{0};
    parallel_for(0, n, 1, [&](int64_t b, int64_t e) {
      running++;
      for (int64_t i = b; i < e; ++i) hits[i]++;
      running--;
    });
    ASSERT_EQ(running.load(), 0) << "iteration " << it;
    for (auto& h : hits) ASSERT_EQ(h.load(), 1) << "iteration " << it;
  }
  set_num_threads(2);
}

TEST(CudaAllocator, SteadyStateMakesNoDeviceAllocations) {
  MN_SKIP_IF_NO_CUDA();
  if (!cuda::caching_enabled()) GTEST_SKIP() << "MN_CUDA_NO_CACHE set: caching disabled";
  auto step = [] {
    Tensor a = Tensor::ones({256, 256}, DType::F32, Device::cuda());
    Tensor b = Tensor::zeros({1000}, DType::F64, Device::cuda());
    Tensor c = a.transpose(0, 1).contiguous();
    b.fill_(3);
    synchronize(Device::cuda());
  };
  step();  // warm-up fills the cache
  uint64_t before = cuda::allocator_stats().device_allocs;
  for (int i = 0; i < 20; ++i) step();
  AllocatorStats s = cuda::allocator_stats();
  EXPECT_EQ(s.device_allocs, before) << s.str();
  EXPECT_GT(s.cache_hits, 0u);
  EXPECT_GE(s.peak_bytes_in_use, 256u * 256u * 4u);
}

TEST(CudaAllocator, StatisticsTrackInUseAndCache) {
  MN_SKIP_IF_NO_CUDA();
  size_t base = cuda::allocator_stats().bytes_in_use;
  {
    Tensor a = Tensor::empty({1 << 20}, DType::F32, Device::cuda());
    EXPECT_GE(cuda::allocator_stats().bytes_in_use, base + (4u << 20));
  }
  EXPECT_EQ(cuda::allocator_stats().bytes_in_use, base);
  if (cuda::caching_enabled()) {
    EXPECT_GE(cuda::allocator_stats().bytes_cached, 4u << 20);
  }
  cuda::empty_cache();
  EXPECT_EQ(cuda::allocator_stats().bytes_cached, 0u);
}
