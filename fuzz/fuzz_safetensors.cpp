// libFuzzer target: safetensors header (JSON) and body through the public
// nn::read_safetensors(path). nn/checkpoint.* reads only from a path and is
// owned elsewhere, so each input is written to an in-memory file (memfd) and
// read back through /proc/self/fd: no disk traffic, one descriptor reused.
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "fuzz/fuzz_common.h"
#include "nn/checkpoint.h"

namespace {
int memfd() {
  static const int fd = ::memfd_create("mn_fuzz_safetensors", 0);
  return fd;
}
}  // namespace

MN_FUZZ_TARGET({
  const int fd = memfd();
  if (fd < 0 || ::ftruncate(fd, 0) != 0) __builtin_trap();
  size_t put = 0;
  while (put < size) {
    const ssize_t k = ::pwrite(fd, data + put, size - put, static_cast<off_t>(put));
    if (k <= 0) __builtin_trap();
    put += static_cast<size_t>(k);
  }
  mn::nn::SafetensorsFile f = mn::nn::read_safetensors("/proc/self/fd/" + std::to_string(fd));
  for (const auto& kv : f.tensors)
    if (!kv.second.defined()) __builtin_trap();
})
