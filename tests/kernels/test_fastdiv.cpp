// FastDiv (kernels/fastdiv.h), the multiply-shift division of the convolution
// index decodes, against `/` and `%`: every divisor up to 5,000 on the numerators
// near 0, near multiples of the divisor and near 2^31, and the divisors near
// powers of two and near 2^31 on random numerators. The device uses the same code
// with __umulhi (its parity is covered by the convolution parity tests).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/fastdiv.h"
#include "runtime/error.h"

using mn::kernels::FastDiv;

namespace {
::testing::AssertionResult same(const FastDiv& f, uint32_t n) {
  uint32_t q = 0, r = 0;
  f.divmod(n, q, r);
  if (q == n / f.d && r == n % f.d) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << n << " / " << f.d << ": got " << q << " r " << r
                                       << ", expected " << n / f.d << " r " << n % f.d;
}
}  // namespace

TEST(FastDiv, SmallDivisorsOnBoundaryNumerators) {
  const uint32_t top = (uint32_t(1) << 31) - 1;
  for (uint32_t d = 1; d <= 5000; ++d) {
    const FastDiv f(d);
    for (uint32_t n = 0; n < 3 * d + 3; ++n) ASSERT_TRUE(same(f, n));
    for (uint32_t k : {1000u, 65536u, 1u << 20}) {
      const uint64_t base = uint64_t(k) * d;
      for (int e = -2; e <= 2; ++e) {
        if (base + e <= top) {
          ASSERT_TRUE(same(f, uint32_t(base + e)));
        }
      }
    }
    for (uint32_t n = top - 3 * d; n < top; n += d / 3 + 1) ASSERT_TRUE(same(f, n));
    ASSERT_TRUE(same(f, top));
  }
}

TEST(FastDiv, LargeDivisorsOnRandomNumerators) {
  std::mt19937_64 rng(5);
  std::vector<uint32_t> divisors;
  for (int s = 1; s < 31; ++s)
    for (int e = -2; e <= 2; ++e) divisors.push_back(uint32_t((uint64_t(1) << s) + e));
  for (uint32_t e = 1; e <= 5; ++e) divisors.push_back((uint32_t(1) << 31) - e);
  const uint32_t top = (uint32_t(1) << 31) - 1;
  for (uint32_t d : divisors) {
    if (d == 0 || d > top) continue;
    const FastDiv f(d);
    for (int i = 0; i < 20000; ++i) ASSERT_TRUE(same(f, uint32_t(rng() % (uint64_t(top) + 1))));
    ASSERT_TRUE(same(f, top));
    ASSERT_TRUE(same(f, d - 1));
    ASSERT_TRUE(same(f, d));
  }
}

TEST(FastDiv, SignedDivmodAndBadDivisors) {
  const FastDiv f(7);
  int r = -1;
  EXPECT_EQ(f.divmod(50, r), 7);
  EXPECT_EQ(r, 1);
  EXPECT_THROW(FastDiv(0), mn::Error);
  EXPECT_THROW(FastDiv(int64_t(1) << 31), mn::Error);
}
