// Host -> device copies that do not make the host wait (every Tensor::to and
// Tensor::from_host onto a GPU goes through here).
//
// A copy of up to kUploadStagedMax bytes is staged: the host copies the bytes
// into a page-locked (pinned) buffer, a copy stream moves them to a device
// staging buffer (overlapping whatever the library's stream is running: the
// previous step's kernels while the next batch is uploaded), and the library's
// stream waits for that copy (an event) and moves them into the destination, a
// device-to-device copy at device bandwidth. The destination comes from the
// caching allocator and is only touched on the library's stream, which keeps
// the allocator's one-stream design (runtime/allocator.h) intact; the staging
// buffers belong to the uploader. A ring of kUploadSlots staging pairs per
// device gives multiple buffering: a slot is reused only after the library's
// stream has consumed it (an event the copy stream waits for, no host wait),
// and the host waits only when it is a whole ring ahead of the copy stream.
//
// Larger copies (a data set uploaded once) go straight from pageable memory on
// the library's stream and wait for it, as before: staging them would double
// their memory for no overlap.
//
// upload_stats() counts both kinds, so a training step can be checked for
// waiting uploads.
#pragma once
#include <cstddef>
#include <cstdint>

namespace mn {

constexpr size_t kUploadStagedMax = size_t(16) << 20;  // 16 MiB
constexpr int kUploadSlots = 8;

struct UploadStats {
  uint64_t staged = 0;         // copies through the pinned ring (no host wait)
  uint64_t waited = 0;         // large copies that waited for the device
  uint64_t slot_waits = 0;     // staged copies whose slot was still in flight (the host waited)
  uint64_t staged_bytes = 0;
};
UploadStats upload_stats();

namespace cuda {
// Copies `bytes` from host memory `src` to device memory `dst` on `device`, as
// described above. `src` may be reused as soon as this returns.
void upload(void* dst, const void* src, size_t bytes, int device);
// The copy stream of `device` (for tests and tools/gpu_check).
void* upload_stream(int device);
}  // namespace cuda

}  // namespace mn
