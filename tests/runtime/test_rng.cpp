// Tests of the Philox generator (runtime/philox.h, runtime/rng.h): Random123
// known-answer vectors, our own log/sin/cos against libm, the element-to-counter
// convention, independence from the thread count, distribution statistics,
// permutations and sampling, and CPU-vs-CUDA bit equality.
//
// Statistical thresholds: every statistic is compared with its exact expectation
// at 5 standard errors (two-sided p ~ 6e-7 per check for a correct generator),
// or at a stated critical value; the seeds are fixed, so the tests are
// deterministic, and the thresholds are wide enough that a fixed seed passing is
// not luck while a wrong mean/variance/rate (e.g. a scale off by 1 %) fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <set>

#include "runtime/parallel.h"
#include "runtime/philox.h"
#include "runtime/rng.h"
#include "tests/common/test_util.h"

namespace mn {
namespace {

// Byte-for-byte equality of two tensors (any devices), with the first mismatch.
::testing::AssertionResult bits_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << "shape/dtype differ: " << a.desc() << " vs " << b.desc();
  Tensor ca = a.cpu().contiguous(), cb = b.cpu().contiguous();
  const size_t es = dtype_size(a.dtype());
  const auto* pa = static_cast<const unsigned char*>(ca.raw_data());
  const auto* pb = static_cast<const unsigned char*>(cb.raw_data());
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (std::memcmp(pa + i * es, pb + i * es, es) != 0) {
      return ::testing::AssertionFailure()
             << "first mismatch at element " << i << ": " << ca.to_double_vector()[i] << " vs "
             << cb.to_double_vector()[i];
    }
  }
  return ::testing::AssertionSuccess();
}

struct Moments {
  double mean = 0, var = 0, skew = 0, exkurt = 0;
};
Moments moments(const std::vector<double>& x) {
  Moments m;
  const double n = static_cast<double>(x.size());
  for (double v : x) m.mean += v;
  m.mean /= n;
  double m2 = 0, m3 = 0, m4 = 0;
  for (double v : x) {
    const double d = v - m.mean, d2 = d * d;
    m2 += d2;
    m3 += d2 * d;
    m4 += d2 * d2;
  }
  m2 /= n;
  m3 /= n;
  m4 /= n;
  m.var = m2 * n / (n - 1);
  m.skew = m3 / std::pow(m2, 1.5);
  m.exkurt = m4 / (m2 * m2) - 3.0;
  return m;
}

// Restores the thread count when a test changes it.
struct ThreadGuard {
  int saved = num_threads();
  ~ThreadGuard() { set_num_threads(saved); }
};

// ---- Philox itself ------------------------------------------------------------

// Random123's kat_vectors for philox4x32 with 10 rounds (counter words 0..3,
// key words 0..1 -> output words 0..3).
TEST(RngPhilox, Random123KnownAnswers) {
  struct Kat {
    uint32_t c[4], k[2], out[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
       {0xffffffffu, 0xffffffffu},
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
       {0xa4093822u, 0x299f31d0u},
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const Kat& k : kats) {
    const Philox4 r = philox4x32_10_raw(k.c[0], k.c[1], k.c[2], k.c[3], k.k[0], k.k[1]);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(r.v[i], k.out[i]) << "lane " << i;
  }
  const Philox4 z = philox4x32_10(0, 0);
  EXPECT_EQ(z.v[0], 0x6627e8d5u);
  EXPECT_EQ(z.v[3], 0x9b00dbd8u);
}

TEST(RngPhilox, SeedAndBlockWordOrder) {
  const uint64_t seed = 0x0123456789abcdefull, block = 0xfedcba9876543210ull;
  const Philox4 a = philox4x32_10(seed, block);
  const Philox4 b = philox4x32_10_raw(0x76543210u, 0xfedcba98u, 0, 0, 0x89abcdefu, 0x01234567u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(a.v[i], b.v[i]);
}

TEST(RngPhilox, UniformConversions) {
  EXPECT_EQ(philox_uniform_float(0u), 0.0f);
  EXPECT_EQ(philox_uniform_float(0xffffffffu), 1.0f - std::ldexp(1.0f, -24));
  EXPECT_EQ(philox_uniform_float(0x80000000u), 0.5f);
  EXPECT_EQ(philox_uniform_double(0u, 0u), 0.0);
  EXPECT_EQ(philox_uniform_double(0xffffffffu, 0xffffffffu), 1.0 - std::ldexp(1.0, -53));
  EXPECT_EQ(philox_uniform_double(0u, 0x80000000u), 0.5);
  // The low 11 bits of the 64-bit word are the ones dropped.
  EXPECT_EQ(philox_uniform_double(0x7ffu, 0u), 0.0);
  EXPECT_EQ(philox_uniform_double(0x800u, 0u), std::ldexp(1.0, -53));
}

// ---- our log / sin / cos against libm ------------------------------------------

// philox_log is ~1 ulp; libm's log is < 1 ulp: 1e-15 relative is ~4.5 ulp.
TEST(RngMath, LogMatchesLibm) {
  std::vector<double> xs;
  Generator g(11);
  for (int i = 0; i < 200000; ++i) xs.push_back(1.0 - g.next_uniform());  // (0, 1]
  for (int i = 0; i < 200000; ++i)
    xs.push_back(std::ldexp(1.0 + g.next_uniform(), static_cast<int>(g.next_int(-1000, 1000))));
  for (int k = 1; k < 3000; ++k) xs.push_back(1.0 - k * std::ldexp(1.0, -53));  // log near 0
  for (int k = 1; k < 3000; ++k) xs.push_back(1.0 + k * std::ldexp(1.0, -52));
  xs.push_back(std::ldexp(1.0, -53));
  xs.push_back(std::sqrt(0.5));
  xs.push_back(std::sqrt(2.0));
  double worst = 0, worst_x = 0;
  for (double x : xs) {
    const double ref = std::log(x);
    if (ref == 0.0) {
      EXPECT_EQ(philox_log(x), 0.0);
      continue;
    }
    const double rel = std::fabs(philox_log(x) - ref) / std::fabs(ref);
    if (rel > worst) worst = rel, worst_x = x;
  }
  EXPECT_LE(worst, 1e-15) << "at x = " << worst_x;
}

// sin/cos(2 pi x / 2^53) against long-double libm (its own error ~1e-19 here).
// Values are in [-1, 1], so 1e-15 absolute is ~9 ulp of 1; near the reduced
// zeros the relative accuracy is checked separately against sin/cos of the
// reduced angle (libm's error on an exact small argument is < 1 ulp).
TEST(RngMath, SinCosMatchLibm) {
  const long double two_pi = 6.283185307179586476925286766559005768L;
  Generator g(12);
  double worst_s = 0, worst_c = 0;
  for (int i = 0; i < 300000; ++i) {
    const uint64_t x = philox_bits53(g.next_u32(), g.next_u32());
    double s, c;
    philox_sincos_2pi(x, &s, &c);
    const long double th = two_pi * static_cast<long double>(x) / 9007199254740992.0L;
    worst_s = std::max(worst_s, static_cast<double>(std::fabs(s - std::sin(th))));
    worst_c = std::max(worst_c, static_cast<double>(std::fabs(c - std::cos(th))));
  }
  EXPECT_LE(worst_s, 1e-15);
  EXPECT_LE(worst_c, 1e-15);
  // Exact quadrant points.
  double s, c;
  philox_sincos_2pi(0, &s, &c);
  EXPECT_EQ(s, 0.0);
  EXPECT_EQ(c, 1.0);
  philox_sincos_2pi(1ull << 51, &s, &c);  // pi / 2
  EXPECT_EQ(s, 1.0);
  EXPECT_EQ(c, 0.0);
  philox_sincos_2pi(1ull << 52, &s, &c);  // pi
  EXPECT_EQ(s, 0.0);
  EXPECT_EQ(c, -1.0);
  // Near the zeros of sin and cos: relative to sin/cos of the reduced angle a.
  const double pi_2p52 = 3.141592653589793 / 4503599627370496.0;
  for (int64_t d = -5000; d <= 5000; d += 7) {
    for (uint64_t q = 0; q < 4; ++q) {
      const uint64_t x = ((q << 51) + static_cast<uint64_t>(d + (1ll << 53))) & ((1ull << 53) - 1);
      philox_sincos_2pi(x, &s, &c);
      const double a = static_cast<double>(d) * pi_2p52;
      const double ref_s[4] = {std::sin(a), std::cos(a), -std::sin(a), -std::cos(a)};
      const double ref_c[4] = {std::cos(a), -std::sin(a), -std::cos(a), std::sin(a)};
      if (d != 0) {
        EXPECT_LE(std::fabs(s - ref_s[q]), 1e-15 * std::fabs(ref_s[q])) << "q=" << q << " d=" << d;
        EXPECT_LE(std::fabs(c - ref_c[q]), 1e-15 * std::fabs(ref_c[q])) << "q=" << q << " d=" << d;
      }
    }
  }
}

// ---- the element-to-counter convention (rng.h / philox.h), by direct loops ------

TEST(RngFill, UniformFloatConvention) {
  const uint64_t seed = 77, off = 5;
  Generator g(seed, off);
  Tensor t = Tensor::empty({11}, DType::F32);
  uniform_(t, -1.0, 3.0, g);
  EXPECT_EQ(g.offset(), off + 3);  // ceil(11 / 4) blocks
  auto v = t.to_vector<float>();
  for (int64_t i = 0; i < 11; ++i) {
    const uint32_t lane = philox4x32_10(seed, off + i / 4).v[i % 4];
    const float ref = static_cast<float>(-1.0 + 4.0 * ((lane >> 8) / 16777216.0));
    EXPECT_EQ(v[i], ref) << i;
  }
}

TEST(RngFill, UniformDoubleConvention) {
  const uint64_t seed = 78, off = 2;
  Generator g(seed, off);
  Tensor t = Tensor::empty({7}, DType::F64);
  uniform_(t, 2.0, 2.5, g);
  EXPECT_EQ(g.offset(), off + 4);  // ceil(7 / 2) blocks of two 53-bit numbers
  auto v = t.to_vector<double>();
  for (int64_t i = 0; i < 7; ++i) {
    const Philox4 r = philox4x32_10(seed, off + i / 2);
    const uint64_t w = (static_cast<uint64_t>(r.v[2 * (i % 2) + 1]) << 32) | r.v[2 * (i % 2)];
    EXPECT_EQ(v[i], 2.0 + 0.5 * std::ldexp(static_cast<double>(w >> 11), -53)) << i;
  }
}

// Normal: element i from block off + i / 2 by Box-Muller, computed here with libm;
// libm and our functions agree to ~1e-15, so 1e-13 absolute on values of size ~3.
TEST(RngFill, NormalConventionAgainstLibmBoxMuller) {
  const uint64_t seed = 79, off = 0;
  Generator g(seed, off);
  Tensor t = Tensor::empty({9}, DType::F64);
  normal_(t, 1.0, 2.0, g);
  EXPECT_EQ(g.offset(), off + 5);
  auto v = t.to_vector<double>();
  const double pi = 3.14159265358979323846;
  for (int64_t i = 0; i < 9; ++i) {
    const Philox4 r = philox4x32_10(seed, off + i / 2);
    const double u1 = (static_cast<double>(philox_bits53(r.v[0], r.v[1])) + 1.0) * std::ldexp(1.0, -53);
    const double u2 = static_cast<double>(philox_bits53(r.v[2], r.v[3])) * std::ldexp(1.0, -53);
    const double rad = std::sqrt(-2.0 * std::log(u1));
    const double z = (i % 2 == 0) ? rad * std::cos(2 * pi * u2) : rad * std::sin(2 * pi * u2);
    EXPECT_NEAR(v[i], 1.0 + 2.0 * z, 1e-13) << i;
  }
  // Generator::next_normal is the cosine normal of its block.
  Generator h(seed, 0), k(seed, 0);
  Tensor std_normal = Tensor::empty({1}, DType::F64);
  normal_(std_normal, 0.0, 1.0, k);
  EXPECT_EQ(h.next_normal(), std_normal.item());
}

TEST(RngFill, BernoulliAndRandintConvention) {
  const uint64_t seed = 80;
  Generator g(seed, 0);
  Tensor b = Tensor::empty({10}, DType::U8);
  bernoulli_(b, 0.3, g);
  EXPECT_EQ(g.offset(), 3u);
  auto bv = b.to_vector<uint8_t>();
  for (int64_t i = 0; i < 10; ++i) {
    const uint32_t lane = philox4x32_10(seed, i / 4).v[i % 4];
    EXPECT_EQ(bv[i], ((lane >> 8) * std::ldexp(1.0, -24) < static_cast<double>(0.3f)) ? 1 : 0);
  }
  Tensor r = Tensor::empty({6}, DType::I32);
  randint_(r, -5, 9, g);
  EXPECT_EQ(g.offset(), 5u);
  auto rv = r.to_vector<int32_t>();
  for (int64_t i = 0; i < 6; ++i) {
    const uint64_t lane = philox4x32_10(seed, 3 + i / 4).v[i % 4];
    EXPECT_EQ(rv[i], -5 + static_cast<int32_t>((lane * 14) >> 32));
  }
}

TEST(RngFill, ThreadCountIndependent) {
  ThreadGuard guard;
  const int64_t n = 100003;
  auto fill_all = [&](int threads) {
    set_num_threads(threads);
    Generator g(2024, 3);
    std::vector<Tensor> out;
    for (DType dt : {DType::F32, DType::F64}) {
      Tensor u = Tensor::empty({n}, dt), z = Tensor::empty({n}, dt);
      uniform_(u, -2, 5, g);
      normal_(z, 0.5, 3, g);
      out.push_back(u);
      out.push_back(z);
    }
    Tensor b = Tensor::empty({n}, DType::F32), i32 = Tensor::empty({n}, DType::I32),
           i64 = Tensor::empty({n}, DType::I64);
    bernoulli_(b, 0.25, g);
    randint_(i32, -100, 100, g);
    randint_(i64, 0, int64_t{1} << 40, g);
    out.insert(out.end(), {b, i32, i64});
    return out;
  };
  auto one = fill_all(1), two = fill_all(2);
  ASSERT_EQ(one.size(), two.size());
  for (size_t k = 0; k < one.size(); ++k) EXPECT_TRUE(bits_equal(one[k], two[k])) << "fill " << k;
}

TEST(RngFill, OffsetAdvancesAndSeedReproduces) {
  Generator g(5);
  Tensor a = Tensor::empty({100}, DType::F32), b = Tensor::empty({100}, DType::F32);
  uniform_(a, 0, 1, g);
  EXPECT_EQ(g.offset(), 25u);
  uniform_(b, 0, 1, g);
  EXPECT_EQ(g.offset(), 50u);
  EXPECT_FALSE(bits_equal(a, b));
  normal_(b, 0, 1, g);
  EXPECT_EQ(g.offset(), 100u);
  Tensor w = Tensor::empty({100}, DType::I64);
  randint_(w, 0, int64_t{1} << 40, g);  // two lanes per element
  EXPECT_EQ(g.offset(), 150u);

  manual_seed(99);
  Tensor c = Tensor::empty({33}, DType::F64), d = Tensor::empty({33}, DType::F64);
  normal_(c, 0, 1, default_generator());
  manual_seed(99);
  normal_(d, 0, 1, default_generator());
  EXPECT_TRUE(bits_equal(c, d));
  EXPECT_EQ(default_generator().offset(), 17u);
  manual_seed(100);
  normal_(d, 0, 1, default_generator());
  EXPECT_FALSE(bits_equal(c, d));
}

TEST(RngFill, NonContiguousFillsInLogicalOrder) {
  Generator g1(31), g2(31);
  Tensor c = Tensor::empty({6, 4}, DType::F32);
  uniform_(c, 0, 1, g1);
  Tensor base = Tensor::empty({4, 6}, DType::F32);
  Tensor v = base.t();  // (6, 4) view, not contiguous
  ASSERT_FALSE(v.is_contiguous());
  uniform_(v, 0, 1, g2);
  EXPECT_TRUE(bits_equal(c, v));
  EXPECT_EQ(g1.offset(), g2.offset());
}

TEST(RngFill, EmptyTensorConsumesNothing) {
  Generator g(1, 7);
  Tensor e = Tensor::empty({0, 3}, DType::F32);
  uniform_(e, 0, 1, g);
  normal_(e, 0, 1, g);
  EXPECT_EQ(g.offset(), 7u);
}

TEST(RngFill, ArgumentErrors) {
  Generator g(1);
  Tensor f = Tensor::empty({4}, DType::F32), i = Tensor::empty({4}, DType::I32);
  EXPECT_THROW(uniform_(i, 0, 1, g), Error);
  EXPECT_THROW(normal_(i, 0, 1, g), Error);
  EXPECT_THROW(uniform_(f, 2, 1, g), Error);
  EXPECT_THROW(normal_(f, 0, -1, g), Error);
  EXPECT_THROW(bernoulli_(f, 1.5, g), Error);
  EXPECT_THROW(randint_(f, 0, 3, g), Error);
  EXPECT_THROW(randint_(i, 3, 3, g), Error);
  EXPECT_THROW(randint_(i, 0, int64_t{1} << 40, g), Error);
  EXPECT_THROW(g.next_int(5, 5), Error);
  EXPECT_THROW(sample_without_replacement(3, 4, g), Error);
  EXPECT_THROW(randperm(-1, g), Error);
}

// ---- distributions ----------------------------------------------------------------

TEST(RngStats, UniformMomentsAndHistogram) {
  const int64_t n = 1000000;
  const double lo = -2.0, hi = 3.0, w = hi - lo;
  for (DType dt : {DType::F32, DType::F64}) {
    Generator g(101);
    Tensor t = Tensor::empty({n}, dt);
    uniform_(t, lo, hi, g);
    auto x = t.to_double_vector();
    EXPECT_GE(*std::min_element(x.begin(), x.end()), lo);
    EXPECT_LT(*std::max_element(x.begin(), x.end()), hi);
    const Moments m = moments(x);
    // se(mean) = sqrt(w^2/12 / n); se(var) = sqrt((w^4/80 - (w^2/12)^2) / n).
    EXPECT_NEAR(m.mean, (lo + hi) / 2, 5 * std::sqrt(w * w / 12 / n));
    EXPECT_NEAR(m.var, w * w / 12, 5 * std::sqrt((std::pow(w, 4) / 80 - std::pow(w * w / 12, 2)) / n));
    // Chi-square over 64 equal bins, 63 degrees of freedom: mean 63, sd sqrt(126);
    // 63 + 5 sd = 119.
    std::vector<int64_t> bins(64, 0);
    for (double v : x) bins[std::min<int64_t>(63, static_cast<int64_t>((v - lo) / w * 64))]++;
    double chi2 = 0;
    for (int64_t c : bins) chi2 += (c - n / 64.0) * (c - n / 64.0) / (n / 64.0);
    EXPECT_LT(chi2, 119.0) << dtype_name(dt);
  }
}

// Standard normal CDF.
double phi(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

TEST(RngStats, NormalMomentsAndKolmogorovSmirnov) {
  const int64_t n = 1000000;
  const double mu = 1.5, sigma = 2.0;
  for (DType dt : {DType::F32, DType::F64}) {
    Generator g(202);
    Tensor t = Tensor::empty({n}, dt);
    normal_(t, mu, sigma, g);
    auto x = t.to_double_vector();
    const Moments m = moments(x);
    // se(mean) = sigma/sqrt(n); se(var) = sigma^2 sqrt(2/n); se(skew) = sqrt(6/n);
    // se(excess kurtosis) = sqrt(24/n).
    EXPECT_NEAR(m.mean, mu, 5 * sigma / std::sqrt(n));
    EXPECT_NEAR(m.var, sigma * sigma, 5 * sigma * sigma * std::sqrt(2.0 / n));
    EXPECT_NEAR(m.skew, 0.0, 5 * std::sqrt(6.0 / n));
    EXPECT_NEAR(m.exkurt, 0.0, 5 * std::sqrt(24.0 / n));
    // Kolmogorov-Smirnov on the even elements (cosine normals) and the odd ones
    // (sine normals) separately: sqrt(n) D < 1.95 (the 0.1 % critical value).
    for (int parity = 0; parity < 2; ++parity) {
      std::vector<double> s;
      for (int64_t i = parity; i < n; i += 2) s.push_back((x[i] - mu) / sigma);
      std::sort(s.begin(), s.end());
      const double k = static_cast<double>(s.size());
      double d = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        const double f = phi(s[i]);
        d = std::max({d, f - i / k, (i + 1) / k - f});
      }
      EXPECT_LT(std::sqrt(k) * d, 1.95) << dtype_name(dt) << " parity " << parity;
    }
    // Pairs from one block are independent: correlation of (x[2j], x[2j+1]) ~ 0,
    // se = 1/sqrt(n/2).
    double c = 0;
    for (int64_t i = 0; i + 1 < n; i += 2) c += (x[i] - mu) * (x[i + 1] - mu);
    c /= (n / 2) * sigma * sigma;
    EXPECT_NEAR(c, 0.0, 5 / std::sqrt(n / 2.0));
  }
}

// The rate within 5 sigma, sigma = sqrt(p (1 - p) / n): several rates and dtypes
// are checked, so a 1.96-sigma bound (5 % false alarms each) would not be sound.
TEST(RngStats, BernoulliRate) {
  const int64_t n = 1000000;
  for (double p : {0.1, 0.5, 0.9}) {
    for (DType dt : {DType::F32, DType::F64, DType::I32, DType::U8}) {
      Generator g(303);
      Tensor t = Tensor::empty({n}, dt);
      bernoulli_(t, p, g);
      auto x = t.to_double_vector();
      int64_t ones = 0;
      for (double v : x) {
        ASSERT_TRUE(v == 0.0 || v == 1.0);
        ones += v == 1.0;
      }
      EXPECT_NEAR(static_cast<double>(ones) / n, p, 5 * std::sqrt(p * (1 - p) / n))
          << "p=" << p << " " << dtype_name(dt);
    }
  }
  Generator g(1);
  Tensor t = Tensor::empty({1000}, DType::F32);
  bernoulli_(t, 0.0, g);
  for (double v : t.to_double_vector()) EXPECT_EQ(v, 0.0);
  bernoulli_(t, 1.0, g);
  for (double v : t.to_double_vector()) EXPECT_EQ(v, 1.0);
}

TEST(RngStats, RandintRangeAndUniformity) {
  const int64_t n = 1000000, lo = -3, hi = 7, k = hi - lo;
  for (DType dt : {DType::I32, DType::I64}) {
    Generator g(404);
    Tensor t = Tensor::empty({n}, dt);
    randint_(t, lo, hi, g);
    std::vector<int64_t> count(k, 0);
    for (double v : t.to_double_vector()) {
      ASSERT_GE(v, lo);
      ASSERT_LT(v, hi);
      count[static_cast<int64_t>(v) - lo]++;
    }
    // Each value: binomial(n, 1/k), sd = sqrt(n (1/k)(1 - 1/k)).
    const double sd = std::sqrt(n * (1.0 / k) * (1 - 1.0 / k));
    for (int64_t c : count) EXPECT_NEAR(static_cast<double>(c), n / static_cast<double>(k), 5 * sd);
  }
  // A wide int64 range (two lanes per element): all in range, mean in the middle.
  Generator g(405);
  const int64_t wide = int64_t{3} << 40;
  Tensor t = Tensor::empty({200000}, DType::I64);
  randint_(t, -wide, wide, g);
  auto v = t.to_vector<int64_t>();
  double mean = 0;
  for (int64_t x : v) {
    ASSERT_GE(x, -wide);
    ASSERT_LT(x, wide);
    mean += static_cast<double>(x) / wide;
  }
  mean /= v.size();
  EXPECT_NEAR(mean, 0.0, 5 * std::sqrt(1.0 / 3.0 / v.size()));  // U(-1,1): var 1/3
  // The full int64 range does not overflow.
  Tensor full = Tensor::empty({1000}, DType::I64);
  randint_(full, INT64_MIN, INT64_MAX, g);
  for (int64_t x : full.to_vector<int64_t>()) EXPECT_LT(x, INT64_MAX);
}

TEST(RngStats, NextIntUnbiasedWithRejection) {
  // Small range: counts of 0, 1, 2 within 5 sd of n / 3.
  Generator g(505);
  const int n = 300000;
  int64_t c[3] = {0, 0, 0};
  for (int i = 0; i < n; ++i) c[g.next_int(0, 3)]++;
  for (int64_t x : c) EXPECT_NEAR(static_cast<double>(x), n / 3.0, 5 * std::sqrt(n * 2.0 / 9.0));
  // range R = 3 * 2^62: 2^64 = R + 2^62, so plain multiply-shift (no rejection)
  // would give the values v with (v - low) % 3 == 0 two preimages and the others
  // one, i.e. probability 1/2 instead of 1/3 for that residue. With rejection
  // (threshold 2^64 mod R = 2^62, a quarter of the attempts rejected, each
  // attempt one block) every residue has probability 1/3.
  Generator h(506);
  const int m = 30000;
  const int64_t lo = INT64_MIN, hi = int64_t{1} << 62;
  int64_t res[3] = {0, 0, 0};
  for (int i = 0; i < m; ++i) {
    const int64_t v = h.next_int(lo, hi);
    ASSERT_LT(v, hi);
    res[(static_cast<uint64_t>(v) - static_cast<uint64_t>(lo)) % 3]++;
  }
  for (int64_t r : res)
    EXPECT_NEAR(static_cast<double>(r) / m, 1.0 / 3, 5 * std::sqrt(2.0 / 9 / m));
  // Attempts are geometric with success 3/4: about 4/3 blocks per draw.
  EXPECT_GT(h.offset(), static_cast<uint64_t>(1.25 * m));
  EXPECT_LT(h.offset(), static_cast<uint64_t>(1.42 * m));
  // next_uniform in [0, 1).
  for (int i = 0; i < 1000; ++i) {
    const double u = g.next_uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
}

// ---- permutations and sampling -------------------------------------------------------

TEST(RngSampling, RandpermIsUniformPermutation) {
  Generator g(606);
  for (int64_t n : {0, 1, 2, 1000}) {
    auto p = randperm(n, g);
    ASSERT_EQ(static_cast<int64_t>(p.size()), n);
    std::sort(p.begin(), p.end());
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(p[i], i);
  }
  // All 6 permutations of 3 equally likely: binomial(N, 1/6) counts within 5 sd.
  std::map<std::vector<int64_t>, int> count;
  const int trials = 60000;
  for (int i = 0; i < trials; ++i) count[randperm(3, g)]++;
  EXPECT_EQ(count.size(), 6u);
  for (const auto& kv : count)
    EXPECT_NEAR(kv.second, trials / 6.0, 5 * std::sqrt(trials * (1.0 / 6) * (5.0 / 6)));
  Tensor t = randperm_tensor(50, g);
  EXPECT_EQ(t.dtype(), DType::I64);
  auto v = t.to_vector<int64_t>();
  std::sort(v.begin(), v.end());
  for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(v[i], i);
}

TEST(RngSampling, SampleWithoutReplacementDistinctAndUniform) {
  Generator g(707);
  // Dense path (4k >= n) and sparse path (4k < n).
  for (auto nk : {std::pair<int64_t, int64_t>{20, 6}, {100, 5}, {1000000, 50}, {10, 10}, {10, 0}}) {
    auto s = sample_without_replacement(nk.first, nk.second, g);
    ASSERT_EQ(static_cast<int64_t>(s.size()), nk.second);
    std::set<int64_t> distinct(s.begin(), s.end());
    EXPECT_EQ(static_cast<int64_t>(distinct.size()), nk.second);
    for (int64_t v : s) {
      EXPECT_GE(v, 0);
      EXPECT_LT(v, nk.first);
    }
  }
  // Inclusion frequency of each value is k / n; also the first position alone is
  // uniform (random order). Both paths.
  for (auto nk : {std::pair<int64_t, int64_t>{20, 6}, {100, 5}}) {
    const int64_t n = nk.first, k = nk.second;
    const int trials = 40000;
    std::vector<int> inc(n, 0), first(n, 0);
    for (int t = 0; t < trials; ++t) {
      auto s = sample_without_replacement(n, k, g);
      for (int64_t v : s) inc[v]++;
      first[s[0]]++;
    }
    const double p = static_cast<double>(k) / n, q = 1.0 / n;
    for (int64_t v = 0; v < n; ++v) {
      EXPECT_NEAR(inc[v], trials * p, 5 * std::sqrt(trials * p * (1 - p))) << "n=" << n;
      EXPECT_NEAR(first[v], trials * q, 5 * std::sqrt(trials * q * (1 - q))) << "n=" << n;
    }
  }
}

// ---- CPU vs CUDA ----------------------------------------------------------------------

TEST(RngCuda, FillsBitIdenticalToCpu) {
  MN_SKIP_IF_NO_CUDA();
  const int64_t n = 1000003;  // odd: partial last block
  auto run = [&](Device dev) {
    Generator g(0xabcdef, 17);
    std::vector<Tensor> out;
    for (DType dt : {DType::F32, DType::F64}) {
      Tensor u = Tensor::empty({n}, dt, dev), z = Tensor::empty({n}, dt, dev);
      uniform_(u, -0.5, 2.0, g);
      normal_(z, 0.25, 1.5, g);
      out.push_back(u);
      out.push_back(z);
    }
    for (DType dt : {DType::F32, DType::F64, DType::I32, DType::I64, DType::U8}) {
      Tensor b = Tensor::empty({n}, dt, dev);
      bernoulli_(b, 0.37, g);
      out.push_back(b);
    }
    Tensor i32 = Tensor::empty({n}, DType::I32, dev), i64 = Tensor::empty({n}, DType::I64, dev),
           wide = Tensor::empty({n}, DType::I64, dev);
    randint_(i32, -1000, 12345, g);
    randint_(i64, 0, 7, g);
    randint_(wide, INT64_MIN, INT64_MAX, g);
    out.insert(out.end(), {i32, i64, wide});
    // Non-contiguous destination.
    Tensor base = Tensor::empty({64, 33}, DType::F32, dev);
    Tensor v = base.t();
    normal_(v, 0, 1, g);
    out.push_back(v.contiguous());
    out.push_back(Tensor::full({1}, static_cast<double>(g.offset()), DType::F64));
    return out;
  };
  auto cpu = run(Device::cpu()), gpu = run(Device::cuda(0));
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t k = 0; k < cpu.size(); ++k) {
    EXPECT_TRUE(gpu[k].is_cuda() || k + 1 == cpu.size());
    EXPECT_TRUE(bits_equal(cpu[k], gpu[k])) << "fill " << k << " " << cpu[k].desc();
  }
}

TEST(RngCuda, RandpermTensorOnDevice) {
  MN_SKIP_IF_NO_CUDA();
  Generator a(9), b(9);
  Tensor c = randperm_tensor(1000, a), d = randperm_tensor(1000, b, Device::cuda(0));
  EXPECT_TRUE(d.is_cuda());
  EXPECT_TRUE(bits_equal(c, d));
}

}  // namespace
}  // namespace mn
