// Division of non-negative 32-bit integers by a run-time constant with one
// multiply-high, an add and a shift (Granlund & Montgomery, "Division by invariant
// integers using multiplication", 1994; the form PyTorch's IntDivider uses). The
// implicit-GEMM convolutions decode every gathered element's (channel, row, column)
// from a flat index; a hardware-less 32-bit `/` is about 20 instructions on a GPU,
// this is 3. Host and device; exact for 0 <= n < 2^31 and 1 <= d < 2^31 (tested
// exhaustively near every boundary in tests/kernels/test_fastdiv.cpp).
#pragma once
#include <cstdint>

#include "runtime/error.h"

#if defined(__CUDACC__)
#define MN_HOST_DEVICE __host__ __device__
#else
#define MN_HOST_DEVICE
#endif

namespace mn::kernels {

struct FastDiv {
  uint32_t d = 1;      // the divisor
  uint32_t magic = 1;  // m: n / d = (umulhi(n, m) + n) >> shift
  uint32_t shift = 0;

  FastDiv() = default;
  explicit FastDiv(int64_t divisor) {
    MN_CHECK(divisor >= 1 && divisor < (int64_t(1) << 31), "FastDiv: divisor ", divisor,
             " outside [1, 2^31)");
    d = static_cast<uint32_t>(divisor);
    shift = 0;
    while ((uint64_t(1) << shift) < d) ++shift;  // smallest shift with 2^shift >= d
    const uint64_t m = ((uint64_t(1) << 32) * ((uint64_t(1) << shift) - d)) / d + 1;
    magic = static_cast<uint32_t>(m);  // < 2^32 for every d >= 1
  }

  MN_HOST_DEVICE uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t t = __umulhi(n, magic);
#else
    const uint32_t t = static_cast<uint32_t>((uint64_t(n) * magic) >> 32);
#endif
    return (t + n) >> shift;  // t + n < 2^32 for n < 2^31
  }
  // q = n / d, r = n - q d.
  MN_HOST_DEVICE void divmod(uint32_t n, uint32_t& q, uint32_t& r) const {
    q = div(n);
    r = n - q * d;
  }
  MN_HOST_DEVICE int divmod(int n, int& r) const {
    const uint32_t q = div(static_cast<uint32_t>(n));
    r = n - static_cast<int>(q * d);
    return static_cast<int>(q);
  }
};

}  // namespace mn::kernels
