// The CUDA caching allocator (steady state makes no cudaMalloc) and the CPU
// thread pool.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <cmath>
#include <cstring>
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
    cpu_free(p, n);
  }
}

// MN_POISON (set_poison): every block, fresh or from the cache, is handed out
// full of 0xFF bytes, so a read of memory nobody wrote gives NaN.
TEST(CpuAlloc, PoisonFillsFreshAndReusedBlocks) {
  test::PoisonScope poison(true);
  for (size_t n : {size_t(7), size_t(4096), (size_t(2) << 20) + 5}) {
    for (int round = 0; round < 2; ++round) {  // the second big block comes from the cache
      auto* p = static_cast<unsigned char*>(cpu_alloc(n));
      EXPECT_EQ(p[0], 0xFF);
      EXPECT_EQ(p[n / 2], 0xFF);
      EXPECT_EQ(p[n - 1], 0xFF);
      std::memset(p, 0, n);  // what the next owner must not see
      cpu_free(p, n);
    }
  }
  Tensor f = Tensor::empty({1000}, DType::F32);
  for (float v : f.to_vector<float>()) ASSERT_TRUE(std::isnan(v));
  Tensor i = Tensor::empty({10}, DType::I64);
  for (int64_t v : i.to_vector<int64_t>()) ASSERT_EQ(v, -1);
  // Zero-filled constructors are unaffected.
  for (double v : Tensor::zeros({100}, DType::F64).to_vector<double>()) ASSERT_EQ(v, 0.0);
}

TEST(CudaAllocator, PoisonFillsDeviceBlocks) {
  MN_SKIP_IF_NO_CUDA();
  test::PoisonScope poison(true);
  for (int round = 0; round < 2; ++round) {  // fresh, then (when caching) reused
    Tensor t = Tensor::empty({3000}, DType::F32, Device::cuda());
    for (float v : t.to_vector<float>()) ASSERT_TRUE(std::isnan(v));
    t.zero_();
  }
  for (float v : Tensor::zeros({300}, DType::F32, Device::cuda()).to_vector<float>()) ASSERT_EQ(v, 0.0f);
}

// Large CPU blocks are reused: a loop of the same sizes allocates fresh memory
// only in its first round; small blocks and a zero limit bypass the cache.
TEST(CpuAlloc, LargeBlocksAreReusedWithinTheLimit) {
  const size_t saved = cpu_cache_limit();
  set_cpu_cache_limit(size_t(64) << 20);
  cpu_empty_cache();
  const size_t big = (size_t(3) << 20) + 123;  // rounded up to a 64 KiB multiple
  void* first = cpu_alloc(big);
  std::memset(first, 1, big);
  cpu_free(first, big);
  const CpuAllocatorStats s0 = cpu_allocator_stats();
  EXPECT_EQ(s0.bytes_cached, (big + 65535) / 65536 * 65536);
  for (int round = 0; round < 5; ++round) {
    void* p = cpu_alloc(big);
    EXPECT_EQ(p, first) << "round " << round;  // the one cached block comes back
    cpu_free(p, big);
  }
  const CpuAllocatorStats s1 = cpu_allocator_stats();
  EXPECT_EQ(s1.cache_hits - s0.cache_hits, 5u);
  EXPECT_EQ(s1.requests - s0.requests, 5u);
  // Another size is not served from this block; small blocks never touch the cache.
  void* other = cpu_alloc(size_t(2) << 20);
  EXPECT_NE(other, first);
  void* small = cpu_alloc(1000);
  cpu_free(small, 1000);
  EXPECT_EQ(cpu_allocator_stats().requests - s1.requests, 1u);
  cpu_free(other, size_t(2) << 20);
  // The limit caps what is kept: with room for one 3 MiB block, the second is freed.
  set_cpu_cache_limit(size_t(4) << 20);  // lower than what is cached: empties the cache
  EXPECT_EQ(cpu_allocator_stats().bytes_cached, 0u);
  void* a = cpu_alloc(big);
  void* b = cpu_alloc(big);
  cpu_free(a, big);
  cpu_free(b, big);
  EXPECT_EQ(cpu_allocator_stats().bytes_cached, (big + 65535) / 65536 * 65536);
  set_cpu_cache_limit(0);  // off
  EXPECT_EQ(cpu_allocator_stats().bytes_cached, 0u);
  void* c = cpu_alloc(big);
  cpu_free(c, big);
  EXPECT_EQ(cpu_allocator_stats().bytes_cached, 0u);
  set_cpu_cache_limit(saved);
}

// Tensors go through the cache: a training-like loop of the same shapes reuses
// its blocks, and every reused block holds what the new tensor is given.
TEST(CpuAlloc, TensorsReuseCachedBlocks) {
  const size_t saved = cpu_cache_limit();
  set_cpu_cache_limit(size_t(256) << 20);
  cpu_empty_cache();
  const CpuAllocatorStats s0 = cpu_allocator_stats();
  for (int step = 0; step < 4; ++step) {
    Tensor x = Tensor::full({512, 1024}, float(step));  // 2 MiB
    Tensor y = Tensor::zeros({512, 1024});
    for (float v : x.to_vector<float>()) ASSERT_EQ(v, float(step));
    for (float v : y.to_vector<float>()) ASSERT_EQ(v, 0.f);
  }
  const CpuAllocatorStats s1 = cpu_allocator_stats();
  EXPECT_GE(s1.cache_hits - s0.cache_hits, 6u);  // steps 1..3 reuse both blocks
  set_cpu_cache_limit(saved);
}

// The default limit is sized to the machine (a quarter of physical memory, at
// least 512 MiB) unless MN_CPU_CACHE_MB says otherwise; in-use and peak bytes of
// the cacheable blocks are tracked, and the report names the override.
TEST(CpuAlloc, TracksPeakUseAndReportsIt) {
  if (std::getenv("MN_CPU_CACHE_MB") == nullptr) {
    EXPECT_GE(cpu_cache_limit(), size_t(512) << 20);
  }
  const size_t saved = cpu_cache_limit();
  set_cpu_cache_limit(size_t(64) << 20);
  cpu_reset_peak_stats();
  const CpuAllocatorStats s0 = cpu_allocator_stats();
  const size_t n = size_t(3) << 20;
  void* a = cpu_alloc(n);
  void* b = cpu_alloc(n);
  const CpuAllocatorStats s1 = cpu_allocator_stats();
  EXPECT_EQ(s1.bytes_in_use, s0.bytes_in_use + 2 * n);
  EXPECT_GE(s1.peak_bytes_in_use, s0.bytes_in_use + 2 * n);
  cpu_free(a, n);
  cpu_free(b, n);
  const CpuAllocatorStats s2 = cpu_allocator_stats();
  EXPECT_EQ(s2.bytes_in_use, s0.bytes_in_use);
  EXPECT_EQ(s2.peak_bytes_in_use, s1.peak_bytes_in_use);
  EXPECT_GE(s2.peak_bytes_cached, 2 * n);
  EXPECT_NE(s2.str().find("MN_CPU_CACHE_MB"), std::string::npos) << s2.str();
  // Over the limit: the block goes back to the C library and is counted.
  set_cpu_cache_limit(0);
  void* c = cpu_alloc(n);
  cpu_free(c, n);
  EXPECT_EQ(cpu_allocator_stats().returned_to_os, s2.returned_to_os + 1);
  set_cpu_cache_limit(saved);
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

// The first region after the pool (re)starts its workers runs on all of them: a
// worker that started after the region was published used to wait for the next
// one, so a study made of one long region ran on one core. Each chunk waits
// (up to 2 s) until both have started; run serially, the first would time out.
TEST(Parallel, FirstRegionAfterStartingTheWorkersUsesThemAll) {
  for (int round = 0; round < 20; ++round) {
    set_num_threads(1);
    set_num_threads(2);  // fresh workers, then at once one region of two chunks
    std::atomic<int> started{0};
    std::atomic<int> timed_out{0};
    parallel_for(0, 2, 1, [&](int64_t, int64_t) {
      ++started;
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (started.load() < 2)
        if (std::chrono::steady_clock::now() > until) {
          ++timed_out;
          break;
        }
    });
    ASSERT_EQ(timed_out.load(), 0) << "round " << round << ": the two chunks did not run at the same time";
  }
  set_num_threads(2);
}

// Exceptions in consecutive regions, and a region after a pause long enough for
// the workers to stop spinning and sleep: every region still completes.
TEST(Parallel, ExceptionsAndSleepingWorkers) {
  set_num_threads(3);
  for (int it = 0; it < 200; ++it) {
    EXPECT_THROW(parallel_for(0, 12, 1, [&](int64_t b, int64_t) {
                   if (b == it % 12) throw std::runtime_error("boom");
                 }),
                 std::runtime_error);
  }
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // workers fall asleep
    std::atomic<int64_t> sum{0};
    parallel_for(0, 1000, 10, [&](int64_t b, int64_t e) { sum += e - b; });
    EXPECT_EQ(sum.load(), 1000);
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

// MN_TEST_SHAPES=small (tests/common/test_util.h) drops the full-size cases of
// the GPU parity tests, for the slow compute-sanitizer tools.
TEST(TestShapes, SmallDropsOnlyTheFullSizeCases) {
  const char* old = std::getenv("MN_TEST_SHAPES");
  const std::string saved = old ? old : "";
  const std::vector<Shape> shapes = {{150, 64, 48, 48}, {150, 4096}, {1, 1, 7, 5}, {1001, 1000}};
  setenv("MN_TEST_SHAPES", "small", 1);
  EXPECT_FALSE(test::full_size_shapes());
  EXPECT_EQ(test::sized(shapes), (std::vector<Shape>{{150, 4096}, {1, 1, 7, 5}}));
  unsetenv("MN_TEST_SHAPES");
  EXPECT_TRUE(test::full_size_shapes());
  EXPECT_EQ(test::sized(shapes), shapes);
  if (old) setenv("MN_TEST_SHAPES", saved.c_str(), 1);
}
