// CPU aligned allocation, the CUDA caching allocator and transfer accounting.
// See runtime/allocator.h for the caching policy.
#include "runtime/allocator.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <sstream>
#include <unordered_map>
#include <vector>
#include <cstdio>

#include "runtime/device.h"
#include "runtime/error.h"
#ifdef MN_WITH_CUDA
#include "runtime/cuda_check.h"
#endif

namespace mn {

namespace {
constexpr size_t kCpuCacheMin = size_t(1) << 20, kCpuCacheQuantum = size_t(64) << 10;

size_t env_size_mb(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const unsigned long long mb = std::strtoull(v, &end, 10);
  if (end && *end == '\0' && *v != '-') return size_t(mb) << 20;
  std::fprintf(stderr, "[mn] %s='%s' is not a whole number of megabytes: using %zu\n", name, v,
               fallback >> 20);
  return fallback;
}

// Default cache limit: a quarter of physical memory (at least 512 MiB). The cache
// only ever holds blocks a step has freed, so in a training loop it settles at
// the step's working set instead of this limit; a fixed 512 MiB was too small
// from 16 Koch triplets up, where ~390 MB were handed back to the C library and
// page-faulted again every step (first touch costs ~6 ms per MB on the VM).
size_t default_cpu_cache_limit() {
  size_t bytes = size_t(512) << 20;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) bytes = std::max(bytes, size_t(pages) * size_t(page) / 4);
  return bytes;
}

// Freed CPU blocks of at least 1 MiB, by size (rounded up to 64 KiB), for exact
// reuse: a training step asks for the same sizes every time, and fresh pages cost
// a fault and a clear each (about 8 % of a CPU demo step before this cache).
struct CpuCache {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;
  size_t limit = env_size_mb("MN_CPU_CACHE_MB", default_cpu_cache_limit());
  CpuAllocatorStats stats;

  void add_in_use(size_t size) {  // caller holds mu
    stats.bytes_in_use += size;
    stats.peak_bytes_in_use = std::max(stats.peak_bytes_in_use, stats.bytes_in_use);
  }

  void release() {  // caller holds mu
    for (auto& [size, blocks] : free_blocks)
      for (void* p : blocks) std::free(p);
    free_blocks.clear();
    stats.bytes_cached = 0;
  }
};

CpuCache& cpu_cache() {
  static CpuCache* c = new CpuCache();  // never destroyed: tensors may be freed at exit
  return *c;
}

size_t cpu_block_size(size_t nbytes) {
  if (nbytes == 0) nbytes = 64;
  return nbytes >= kCpuCacheMin ? (nbytes + kCpuCacheQuantum - 1) / kCpuCacheQuantum * kCpuCacheQuantum
                                : (nbytes + 63) / 64 * 64;
}
}  // namespace

namespace {
std::atomic<bool>& poison_flag() {
  static std::atomic<bool> on{[] {
    const char* v = std::getenv("MN_POISON");
    return v && *v && std::string(v) != "0";
  }()};
  return on;
}
}  // namespace

bool poison_enabled() { return poison_flag().load(std::memory_order_relaxed); }
void set_poison(bool on) { poison_flag().store(on, std::memory_order_relaxed); }

namespace {
void* cpu_alloc_unpoisoned(size_t nbytes);
}  // namespace

void* cpu_alloc(size_t nbytes) {
  void* p = cpu_alloc_unpoisoned(nbytes);
  if (poison_enabled()) std::memset(p, 0xFF, nbytes);  // every float and double a NaN
  return p;
}

namespace {
void* cpu_alloc_unpoisoned(size_t nbytes) {
  const size_t size = cpu_block_size(nbytes);
  if (size >= kCpuCacheMin) {
    CpuCache& c = cpu_cache();
    std::lock_guard<std::mutex> lk(c.mu);
    c.stats.requests++;
    auto it = c.free_blocks.find(size);
    if (it != c.free_blocks.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      c.stats.bytes_cached -= size;
      c.stats.cache_hits++;
      c.add_in_use(size);
      return p;
    }
  }
  void* p = std::aligned_alloc(64, size);
  if (!p && size >= kCpuCacheMin) {  // give the cached blocks back, then try again
    CpuCache& c = cpu_cache();
    std::lock_guard<std::mutex> lk(c.mu);
    c.release();
    p = std::aligned_alloc(64, size);
  }
  if (!p) MN_THROW("cpu_alloc: out of host memory allocating ", nbytes, " bytes");
  if (size >= kCpuCacheMin) {
    CpuCache& c = cpu_cache();
    std::lock_guard<std::mutex> lk(c.mu);
    c.add_in_use(size);
  }
  return p;
}
}  // namespace

void cpu_free(void* p, size_t nbytes) noexcept {
  if (!p) return;
  const size_t size = cpu_block_size(nbytes);
  if (size >= kCpuCacheMin) {
    CpuCache& c = cpu_cache();
    std::lock_guard<std::mutex> lk(c.mu);
    c.stats.bytes_in_use -= std::min(c.stats.bytes_in_use, size);
    if (c.stats.bytes_cached + size <= c.limit) {
      c.free_blocks[size].push_back(p);
      c.stats.bytes_cached += size;
      c.stats.peak_bytes_cached = std::max(c.stats.peak_bytes_cached, c.stats.bytes_cached);
      return;
    }
    c.stats.returned_to_os++;
  }
  std::free(p);
}

CpuAllocatorStats cpu_allocator_stats() {
  CpuCache& c = cpu_cache();
  std::lock_guard<std::mutex> lk(c.mu);
  return c.stats;
}

void cpu_empty_cache() {
  CpuCache& c = cpu_cache();
  std::lock_guard<std::mutex> lk(c.mu);
  c.release();
}

size_t cpu_cache_limit() {
  CpuCache& c = cpu_cache();
  std::lock_guard<std::mutex> lk(c.mu);
  return c.limit;
}

void set_cpu_cache_limit(size_t bytes) {
  CpuCache& c = cpu_cache();
  std::lock_guard<std::mutex> lk(c.mu);
  c.limit = bytes;
  if (c.stats.bytes_cached > bytes) c.release();
}

void cpu_reset_peak_stats() {
  CpuCache& c = cpu_cache();
  std::lock_guard<std::mutex> lk(c.mu);
  c.stats.peak_bytes_in_use = c.stats.bytes_in_use;
  c.stats.peak_bytes_cached = c.stats.bytes_cached;
}

std::string CpuAllocatorStats::str() const {
  std::ostringstream os;
  os << "CPU blocks >= 1 MiB: in use " << (bytes_in_use >> 20) << " MiB (peak "
     << (peak_bytes_in_use >> 20) << " MiB), cached " << (bytes_cached >> 20) << " MiB (peak "
     << (peak_bytes_cached >> 20) << " MiB, limit " << (cpu_cache_limit() >> 20)
     << " MiB: MN_CPU_CACHE_MB), requests " << requests << " (" << cache_hits
     << " from cache), frees past the limit " << returned_to_os;
  return os.str();
}

std::string AllocatorStats::str() const {
  std::ostringstream os;
  os << "in use " << bytes_in_use << " B, peak " << peak_bytes_in_use << " B, cached "
     << bytes_cached << " B, cudaMalloc calls " << device_allocs << ", cudaFree calls "
     << device_frees << ", requests " << requests << " (" << cache_hits << " from cache)";
  return os.str();
}

namespace {
std::mutex g_transfer_mu;
TransferStats g_transfer;
}  // namespace

TransferStats transfer_stats() {
  std::lock_guard<std::mutex> lk(g_transfer_mu);
  return g_transfer;
}
void reset_transfer_stats() {
  std::lock_guard<std::mutex> lk(g_transfer_mu);
  g_transfer = {};
}
namespace detail {
void count_transfer(bool to_device, bool from_device, size_t bytes) {
  std::lock_guard<std::mutex> lk(g_transfer_mu);
  if (to_device && from_device) {
    g_transfer.d2d_copies++;
  } else if (to_device) {
    g_transfer.h2d_copies++;
    g_transfer.h2d_bytes += bytes;
  } else if (from_device) {
    g_transfer.d2h_copies++;
    g_transfer.d2h_bytes += bytes;
  }
}
void count_host_read() {
  std::lock_guard<std::mutex> lk(g_transfer_mu);
  g_transfer.host_reads++;
}
}  // namespace detail

namespace cuda {
namespace {

[[maybe_unused]] size_t round_size(size_t n) {  // used by the CUDA allocator only
  if (n == 0) n = 1;
  const size_t small = 512, large = 128 * 1024;
  size_t q = n < (1u << 20) ? small : large;
  return (n + q - 1) / q * q;
}

bool env_no_cache() {
  const char* v = std::getenv("MN_CUDA_NO_CACHE");
  return v && std::string(v) != "0";
}

// The memory pool this thread allocates from: 0, the general cache, or a CUDA
// graph's private pool while it is being captured (runtime/graph.h).
thread_local int tl_pool = 0;

struct LiveBlock {
  size_t size = 0;
  int pool = 0;
};

struct CachingAllocator {
  std::mutex mu;
  // Free blocks by (pool, device, size) -> pointers.
  std::map<std::tuple<int, int, size_t>, std::vector<void*>> free_blocks;
  // Live blocks: pointer -> rounded size and pool.
  std::unordered_map<void*, LiveBlock> live;
  std::set<int> pools;  // the private pools in use (0 is never in it)
  int next_pool = 1;
  AllocatorStats stats;
  bool caching = !env_no_cache();

#ifdef MN_WITH_CUDA
  void* raw_malloc(size_t size, int device) {
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, size);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      release_cached(device);
      e = cudaMalloc(&p, size);
    }
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      MN_THROW("cuda allocator: cudaMalloc of ", size, " bytes on cuda:", device, " failed: ",
               cudaGetErrorString(e), " (", stats.str(), ")");
    }
    stats.device_allocs++;
    return p;
  }

  // Caller holds mu. The general cache's free blocks (of `device`, or all for
  // -1) back to the driver; a private pool's stay (its graph may replay).
  void release_cached(int device) {
    for (auto it = free_blocks.begin(); it != free_blocks.end();) {
      const auto [pool, dev, size] = it->first;
      if (pool != 0 || (device >= 0 && dev != device)) {
        ++it;
        continue;
      }
      for (void* p : it->second) {
        CUDA_CHECK_NOTHROW(cudaFree(p));
        stats.device_frees++;
        stats.bytes_cached -= size;
      }
      it = free_blocks.erase(it);
    }
  }
#endif
};

CachingAllocator& alloc() {
  static CachingAllocator* a = new CachingAllocator();  // never destroyed: frees may run at exit
  return *a;
}

}  // namespace

void* device_alloc(size_t nbytes, int device) {
#ifdef MN_WITH_CUDA
  const mn::CudaDeviceScope guard(mn::Device::cuda(device));  // the caller's current device is left as it was
  auto& A = alloc();
  size_t size = round_size(nbytes);
  std::lock_guard<std::mutex> lk(A.mu);
  A.stats.requests++;
  void* p = nullptr;
  const int pool = tl_pool;
  if (A.caching || pool != 0) {
    // Exact size first, then the smallest cached block of at most twice the size.
    auto it = A.free_blocks.lower_bound({pool, device, size});
    if (it != A.free_blocks.end() && std::get<0>(it->first) == pool && std::get<1>(it->first) == device &&
        std::get<2>(it->first) <= 2 * size) {
      p = it->second.back();
      it->second.pop_back();
      size = std::get<2>(it->first);
      A.stats.bytes_cached -= size;
      A.stats.cache_hits++;
      if (it->second.empty()) A.free_blocks.erase(it);
    }
  }
  if (!p) p = A.raw_malloc(size, device);
  // Queued on the library's stream (captured into a CUDA graph while capturing, so
  // each replay poisons the block where the step allocates it).
  if (poison_enabled()) CUDA_CHECK(cudaMemsetAsync(p, 0xFF, nbytes, cuda::stream()));
  A.live[p] = {size, pool};
  A.stats.bytes_in_use += size;
  if (A.stats.bytes_in_use > A.stats.peak_bytes_in_use) A.stats.peak_bytes_in_use = A.stats.bytes_in_use;
  return p;
#else
  (void)nbytes;
  MN_THROW("device_alloc: cuda:", device, " memory requested but this build has no CUDA");
#endif
}

void device_free(void* p, int device) noexcept {
#ifdef MN_WITH_CUDA
  if (!p) return;
  auto& A = alloc();
  std::lock_guard<std::mutex> lk(A.mu);
  auto it = A.live.find(p);
  if (it == A.live.end()) {
    std::fprintf(stderr, "[mn] cuda allocator: free of unknown pointer %p ignored\n", p);
    return;
  }
  const size_t size = it->second.size;
  int pool = it->second.pool;
  A.live.erase(it);
  A.stats.bytes_in_use -= size;
  if (pool != 0 && !A.pools.count(pool)) pool = 0;  // its graph is gone: an ordinary block
  // A live graph's block stays in its pool even without caching: the graph
  // writes it on every replay.
  if (A.caching || pool != 0) {
    A.free_blocks[{pool, device, size}].push_back(p);
    A.stats.bytes_cached += size;
  } else {
    CUDA_CHECK_NOTHROW(cudaFree(p));
    A.stats.device_frees++;
  }
#else
  (void)p;
  (void)device;
#endif
}

AllocatorStats allocator_stats() {
  auto& A = alloc();
  std::lock_guard<std::mutex> lk(A.mu);
  return A.stats;
}

void reset_peak_stats() {
  auto& A = alloc();
  std::lock_guard<std::mutex> lk(A.mu);
  A.stats.peak_bytes_in_use = A.stats.bytes_in_use;
}

void empty_cache() {
#ifdef MN_WITH_CUDA
  auto& A = alloc();
  std::lock_guard<std::mutex> lk(A.mu);
  A.release_cached(-1);
#endif
}

bool caching_enabled() { return alloc().caching; }

int create_pool() {
  auto& A = alloc();
  std::lock_guard<std::mutex> lk(A.mu);
  const int id = A.next_pool++;
  A.pools.insert(id);
  return id;
}

void release_pool(int pool) {
#ifdef MN_WITH_CUDA
  if (pool == 0) return;
  auto& A = alloc();
  std::lock_guard<std::mutex> lk(A.mu);
  A.pools.erase(pool);
  // Its free blocks become ordinary ones. Work queued on the library's stream
  // after the graph's last replay runs after it, so reuse needs no wait.
  for (auto it = A.free_blocks.begin(); it != A.free_blocks.end();) {
    const auto [pl, dev, size] = it->first;
    if (pl != pool) {
      ++it;
      continue;
    }
    for (void* p : it->second) {
      if (A.caching) {
        A.free_blocks[{0, dev, size}].push_back(p);
      } else {
        CUDA_CHECK_NOTHROW(cudaFree(p));
        A.stats.device_frees++;
        A.stats.bytes_cached -= size;
      }
    }
    it = A.free_blocks.erase(it);
  }
#else
  (void)pool;
#endif
}

int thread_pool() { return tl_pool; }
void set_thread_pool(int pool) { tl_pool = pool; }

}  // namespace cuda
}  // namespace mn
