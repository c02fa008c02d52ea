// libFuzzer target: IDX files, plain or gzip, through the same path as
// read_idx(); a parsed array is also fed to the label/image pairing checks.
#include "data/idx.h"
#include "fuzz/fuzz_common.h"

MN_FUZZ_TARGET({
  std::vector<uint8_t> raw(data, data + size);
  mn::data::IdxArray a = mn::data::parse_idx(mn::data::gunzip_if_gzip(std::move(raw), "fuzz.idx"), "fuzz.idx");
  size_t count = 1;
  for (int64_t d : a.dims) count *= static_cast<size_t>(d);
  if (count != a.data.size()) __builtin_trap();
})
