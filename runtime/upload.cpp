// The staged, non-waiting host -> device copies of runtime/upload.h.
#include "runtime/upload.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "runtime/error.h"
#ifdef MN_WITH_CUDA
#include "runtime/cuda_check.h"
#include "runtime/device.h"
#endif

namespace mn {

namespace {
std::mutex g_upload_mu;
UploadStats g_upload_stats;
}  // namespace

UploadStats upload_stats() {
  std::lock_guard<std::mutex> lk(g_upload_mu);
  return g_upload_stats;
}

#ifdef MN_WITH_CUDA
namespace cuda {
namespace {

struct Slot {
  void* host = nullptr;  // pinned
  void* dev = nullptr;   // the device staging buffer
  size_t cap = 0;
  cudaEvent_t copied = nullptr;    // recorded on the copy stream after host -> staging
  cudaEvent_t consumed = nullptr;  // recorded on the library's stream after staging -> destination
};

struct Ring {
  cudaStream_t copy = nullptr;
  std::vector<Slot> slots;
  size_t next = 0;
};

constexpr int kMaxDevices = 64;
Ring g_rings[kMaxDevices];

Ring& ring_for(int device) {  // caller holds g_upload_mu, device is current
  Ring& r = g_rings[device];
  if (!r.copy) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&r.copy, cudaStreamNonBlocking));
    r.slots.resize(kUploadSlots);
    for (Slot& s : r.slots) {
      CUDA_CHECK(cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming));
      CUDA_CHECK(cudaEventCreateWithFlags(&s.consumed, cudaEventDisableTiming));
    }
  }
  return r;
}

void grow(Slot& s, size_t bytes) {
  // Both former uses must be over before the buffers go (rare: sizes settle).
  CUDA_CHECK(cudaEventSynchronize(s.copied));
  CUDA_CHECK(cudaEventSynchronize(s.consumed));
  if (s.host) CUDA_CHECK(cudaFreeHost(s.host));
  if (s.dev) CUDA_CHECK(cudaFree(s.dev));
  s.host = s.dev = nullptr;
  size_t cap = 4096;
  while (cap < bytes) cap *= 2;
  CUDA_CHECK(cudaMallocHost(&s.host, cap));
  CUDA_CHECK(cudaMalloc(&s.dev, cap));
  s.cap = cap;
}

}  // namespace

void* upload_stream(int device) {
  const CudaDeviceScope guard(Device::cuda(device));
  std::lock_guard<std::mutex> lk(g_upload_mu);
  return ring_for(device).copy;
}

void upload(void* dst, const void* src, size_t bytes, int device) {
  if (bytes == 0) return;
  MN_CHECK(device >= 0 && device < kMaxDevices, "upload: device ", device, " out of range");
  const CudaDeviceScope guard(Device::cuda(device));
  if (bytes > kUploadStagedMax) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()));
    CUDA_CHECK(cudaStreamSynchronize(stream()));  // src is pageable and the caller's
    std::lock_guard<std::mutex> lk(g_upload_mu);
    g_upload_stats.waited++;
    return;
  }
  std::lock_guard<std::mutex> lk(g_upload_mu);
  Ring& r = ring_for(device);
  Slot& s = r.slots[r.next];
  r.next = (r.next + 1) % r.slots.size();
  if (s.cap < bytes) {
    grow(s, bytes);
  } else {
    const cudaError_t q = cudaEventQuery(s.copied);
    if (q == cudaErrorNotReady) {
      (void)cudaGetLastError();  // "not ready" is a status, not an error: clear it (as c10 does)
      // The host is a whole ring ahead of the copy stream: wait for this slot's last copy.
      g_upload_stats.slot_waits++;
      CUDA_CHECK(cudaEventSynchronize(s.copied));
    } else {
      CUDA_CHECK(q);
    }
  }
  std::memcpy(s.host, src, bytes);
  // The staging buffer is rewritten only after the library's stream has read its last contents.
  CUDA_CHECK(cudaStreamWaitEvent(r.copy, s.consumed, 0));
  CUDA_CHECK(cudaMemcpyAsync(s.dev, s.host, bytes, cudaMemcpyHostToDevice, r.copy));
  CUDA_CHECK(cudaEventRecord(s.copied, r.copy));
  CUDA_CHECK(cudaStreamWaitEvent(stream(), s.copied, 0));
  CUDA_CHECK(cudaMemcpyAsync(dst, s.dev, bytes, cudaMemcpyDeviceToDevice, stream()));
  CUDA_CHECK(cudaEventRecord(s.consumed, stream()));
  g_upload_stats.staged++;
  g_upload_stats.staged_bytes += bytes;
}

}  // namespace cuda
#endif

}  // namespace mn
