// CPU row-block copy used by concat/stack (kernels/join.h): memcpy per row,
// rows spread over the thread pool.
#include <algorithm>
#include <cstring>

#include "kernels/join.h"
#include "runtime/parallel.h"

namespace mn::kernels {

template <typename E>
void copy_rows_cpu(const E* src, int64_t rows, int64_t row_len, E* dst, int64_t dst_stride) {
  const int64_t grain = std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(row_len, 1));
  parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      std::memcpy(dst + r * dst_stride, src + r * row_len, sizeof(E) * row_len);
  });
}

template void copy_rows_cpu<uint8_t>(const uint8_t*, int64_t, int64_t, uint8_t*, int64_t);
template void copy_rows_cpu<uint32_t>(const uint32_t*, int64_t, int64_t, uint32_t*, int64_t);
template void copy_rows_cpu<uint64_t>(const uint64_t*, int64_t, int64_t, uint64_t*, int64_t);

}  // namespace mn::kernels
