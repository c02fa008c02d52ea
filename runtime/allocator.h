// Memory: 64-byte aligned CPU buffers (large ones cached) and a CUDA caching allocator.
//
// The caching allocator keeps freed device blocks in per-size free lists and hands
// them out again, so the steady state of a training loop (the same sizes every
// step) calls neither cudaMalloc nor cudaFree. Sizes are rounded up to 512 bytes
// (blocks under 1 MiB) or 128 KiB (larger); a cached block serves a request of
// at least half its size. On an out-of-memory error the cache is released and the
// allocation retried once. Setting MN_CUDA_NO_CACHE=1 in the environment turns
// caching off (every free is a cudaFree), which is what compute-sanitizer needs
// to see use-after-free errors.
//
// One stream, by design: every kernel and copy of the library is queued on
// cuda::stream() (runtime/cuda_check.h), a fixed stream no caller can change, so
// a block freed on the host can be handed out again at once: any work that still
// reads it is queued before any work that writes it next. A second stream would
// need an event recorded on free (PyTorch's recordStream); there is no API that
// queues library work elsewhere, so none is needed. The uploader
// (runtime/upload.h) runs a copy stream of its own, but only into staging
// buffers it owns: the allocator's blocks it writes on the library's stream.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace mn {

// 64-byte aligned, never null (throws mn::Error on failure). cpu_free takes the
// nbytes the block was allocated with. Blocks of at least 1 MiB are rounded up to
// 64 KiB and, when freed, kept in a cache for the next request of the same rounded
// size, up to MN_CPU_CACHE_MB megabytes in all (default: a quarter of physical
// memory, at least 512; 0 turns the cache off, e.g. for valgrind or
// AddressSanitizer to see use-after-free). The cache holds only blocks that were
// freed, so it grows to a training step's working set and no further; the peak
// is reported by cpu_allocator_stats().str(). Smaller blocks go straight to the
// C library.
void* cpu_alloc(size_t nbytes);
void cpu_free(void* p, size_t nbytes) noexcept;

// MN_POISON=1 in the environment (a debugging aid): every CPU and CUDA allocation
// is filled with 0xFF bytes (NaN in every float and double, -1 in integers)
// before it is handed out, so a kernel that reads memory it never wrote (an
// uninitialised buffer, a tensor made with empty() and only partly filled) gives
// NaN or garbage where it used to get yesterday's values. The whole test suite
// passes with it on (CI's sanitizer stage runs it so).
bool poison_enabled();
void set_poison(bool on);  // the same from code (tests)

struct CpuAllocatorStats {
  size_t bytes_cached = 0;       // held in the cache, ready for reuse
  uint64_t requests = 0;         // allocations of cacheable size (>= 1 MiB)
  uint64_t cache_hits = 0;       // of those, served from the cache
  size_t bytes_in_use = 0;       // cacheable blocks handed out now
  size_t peak_bytes_in_use = 0;  // maximum of bytes_in_use since the last reset
  size_t peak_bytes_cached = 0;  // maximum of bytes_cached since the last reset
  uint64_t returned_to_os = 0;   // frees that did not fit under the limit
  std::string str() const;       // one line with every number, in MiB
};
CpuAllocatorStats cpu_allocator_stats();
void cpu_reset_peak_stats();
void cpu_empty_cache();                  // every cached block back to the C library
size_t cpu_cache_limit();
void set_cpu_cache_limit(size_t bytes);  // 0: no caching; a lower limit empties the cache

struct AllocatorStats {
  size_t bytes_in_use = 0;       // handed out to tensors now
  size_t peak_bytes_in_use = 0;  // maximum of bytes_in_use since the last reset
  size_t bytes_cached = 0;       // held in free lists, ready for reuse
  uint64_t device_allocs = 0;    // cudaMalloc calls made
  uint64_t device_frees = 0;     // cudaFree calls made
  uint64_t requests = 0;         // allocation requests served (cached or not)
  uint64_t cache_hits = 0;       // requests served from the cache
  std::string str() const;
};

namespace cuda {
// Device memory on `device` (the caller's current device is set by this call).
void* device_alloc(size_t nbytes, int device);
void device_free(void* p, int device) noexcept;
AllocatorStats allocator_stats();
void reset_peak_stats();
// Returns every cached block to the driver.
void empty_cache();
bool caching_enabled();
// Private pools (CUDA graphs, runtime/graph.h): while a thread's pool is set,
// its allocations come from that pool and its blocks return to it when freed
// (even with caching off), so addresses baked into a graph are never handed to
// other work. release_pool() makes the pool's blocks ordinary ones again.
int create_pool();
void release_pool(int pool);
int thread_pool();
void set_thread_pool(int pool);  // 0: the general cache
}  // namespace cuda

// Host<->device transfer accounting: every copy between devices goes through
// Tensor::to / copy_ and is counted here, so hidden transfers are visible.
// host_reads counts every read of a tensor's values by the host through
// Tensor::to_vector / to_double_vector / item, on any device: on a GPU each is
// a synchronisation, so a training step that should not wait for the device can
// be checked for them on the CPU too.
struct TransferStats {
  uint64_t h2d_copies = 0, d2h_copies = 0, d2d_copies = 0;
  uint64_t h2d_bytes = 0, d2h_bytes = 0;
  uint64_t host_reads = 0;
};
TransferStats transfer_stats();
void reset_transfer_stats();
namespace detail {
void count_transfer(bool to_device, bool from_device, size_t bytes);
void count_host_read();
}

}  // namespace mn
