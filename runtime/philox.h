// Philox4x32-10 (Salmon et al., SC'11) and the per-element transforms of the
// tensor fills, written once as __host__ __device__ code so that the CPU fills
// (runtime/rng.cpp) and the CUDA kernels (runtime/cuda/rng.cu) compute the very
// same bits. Also used directly by device kernels that draw their own numbers
// (dropout): see the Bernoulli convention below.
//
// Counter layout (see runtime/rng.h): the 128-bit Philox counter is
// (block low word, block high word, 0, 0) and the 64-bit key is the seed
// (low word, high word). One block gives four 32-bit lanes.
//   - float32 uniform, Bernoulli, integers with a range <= 2^32:
//       element i uses block (offset + i / 4), lane i % 4.
//   - float64 uniform, integers with a range > 2^32 (need 53 or 64 bits):
//       element i uses block (offset + i / 2), lanes (2 (i % 2), 2 (i % 2) + 1).
//   - normal (float32 and float64): element i uses block (offset + i / 2); the
//       block's lanes give two 53-bit uniforms and Box-Muller gives two normals,
//       element 2j taking the cosine one and element 2j + 1 the sine one.
// Bernoulli(p): element is 1 iff philox_uniform_float(lane) < (float)p, a
// float32 compare, so p is rounded to float32 first (p in (1 - 2^-25, 1) acts
// as 1). Dropout keeps element i iff philox_uniform_float(lane of i) >= p, the
// exact complement, so a dropout mask equals 1 - bernoulli_(p) for the same
// (seed, offset).
//
// Bit-identical floating point on both devices: every conversion is integer
// arithmetic or a single correctly rounded IEEE operation. The normal path needs
// log, sin and cos; libm and CUDA's versions differ by ULPs, so we use our own
// (philox_log, philox_sincos_2pi), written with +, -, *, / and sqrt only. On the
// device those are the explicit round-to-nearest intrinsics (__dadd_rn etc.),
// which nvcc never contracts into FMAs. On the host the plain operators are the
// IEEE operations, and every product goes through an empty asm barrier so that
// it cannot be contracted into an FMA even in a build with -march=native (GCC 12
// does contract there, and it changed the normals' bits in a check); the build
// must not use -ffast-math. tests/runtime/test_rng.cpp checks the values against
// libm and the CUDA parity test checks the bits against the CPU.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define MN_PHILOX_HD __host__ __device__ __forceinline__
#else
#define MN_PHILOX_HD inline
#endif

namespace mn {

struct Philox4 {
  uint32_t v[4];
};

namespace philox_detail {
constexpr uint32_t kM0 = 0xD2511F53u;  // multipliers of Philox4x32
constexpr uint32_t kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u;  // Weyl key increments (golden ratio, sqrt(3) - 1)
constexpr uint32_t kW1 = 0xBB67AE85u;

MN_PHILOX_HD uint32_t mulhi32(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
}

MN_PHILOX_HD uint64_t mulhi64(uint64_t a, uint64_t b) {
#ifdef __CUDA_ARCH__
  return __umul64hi(a, b);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
}
}  // namespace philox_detail

// The full Philox4x32-10 bijection: 128-bit counter c, 64-bit key k.
MN_PHILOX_HD Philox4 philox4x32_10_raw(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                        uint32_t k0, uint32_t k1) {
  using namespace philox_detail;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {  // the key is bumped between rounds (9 bumps for 10 rounds)
      k0 += kW0;
      k1 += kW1;
    }
    const uint32_t lo0 = kM0 * c0, hi0 = mulhi32(kM0, c0);
    const uint32_t lo1 = kM1 * c2, hi1 = mulhi32(kM1, c2);
    const uint32_t n0 = hi1 ^ c1 ^ k0;
    const uint32_t n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// Philox4x32-10 of counter = block (64-bit, low/high words; upper 64 bits zero),
// key = seed (64-bit, low/high words).
MN_PHILOX_HD Philox4 philox4x32_10(uint64_t seed, uint64_t block) {
  return philox4x32_10_raw(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u,
                           0u, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// [0, 1) with 24 random bits: (u >> 8) * 2^-24 (exact in float32).
MN_PHILOX_HD float philox_uniform_float(uint32_t u) {
  return static_cast<float>(u >> 8) * (1.0f / 16777216.0f);
}

// The 53-bit integer of two lanes: ((hi << 32) | lo) >> 11.
MN_PHILOX_HD uint64_t philox_bits53(uint32_t lo, uint32_t hi) {
  return ((static_cast<uint64_t>(hi) << 32) | lo) >> 11;
}

// [0, 1) with 53 random bits: philox_bits53(lo, hi) * 2^-53 (exact in float64).
MN_PHILOX_HD double philox_uniform_double(uint32_t lo, uint32_t hi) {
  return static_cast<double>(philox_bits53(lo, hi)) * (1.0 / 9007199254740992.0);
}

// ---- correctly rounded basic operations, never contracted into FMAs --------
namespace fp {
#ifdef __CUDA_ARCH__
MN_PHILOX_HD double add(double a, double b) { return __dadd_rn(a, b); }
MN_PHILOX_HD double sub(double a, double b) { return __dsub_rn(a, b); }
MN_PHILOX_HD double mul(double a, double b) { return __dmul_rn(a, b); }
MN_PHILOX_HD double div(double a, double b) { return __ddiv_rn(a, b); }
MN_PHILOX_HD double sqrt(double a) { return __dsqrt_rn(a); }
MN_PHILOX_HD uint64_t bits(double x) { return static_cast<uint64_t>(__double_as_longlong(x)); }
MN_PHILOX_HD double from_bits(uint64_t b) { return __longlong_as_double(static_cast<long long>(b)); }
MN_PHILOX_HD uint32_t bits_f(float x) { return static_cast<uint32_t>(__float_as_int(x)); }
MN_PHILOX_HD float from_bits_f(uint32_t b) { return __int_as_float(static_cast<int>(b)); }
#else
// Host: plain IEEE operations. A product is passed through an empty asm
// statement so the compiler cannot fuse it with a following add even where the
// target has FMA and contraction is on (e.g. -march=native, where GCC contracts
// by default); the asm emits no instruction.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define MN_PHILOX_OPAQUE(x) __asm__("" : "+x"(x))
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#define MN_PHILOX_OPAQUE(x) __asm__("" : "+w"(x))
#else
#define MN_PHILOX_OPAQUE(x) ((void)0)
#endif
MN_PHILOX_HD double add(double a, double b) { return a + b; }
MN_PHILOX_HD double sub(double a, double b) { return a - b; }
MN_PHILOX_HD double mul(double a, double b) {
  double r = a * b;
  MN_PHILOX_OPAQUE(r);
  return r;
}
MN_PHILOX_HD double div(double a, double b) { return a / b; }
MN_PHILOX_HD double sqrt(double a) { return std::sqrt(a); }  // correctly rounded (IEEE)
MN_PHILOX_HD uint64_t bits(double x) { uint64_t b; std::memcpy(&b, &x, 8); return b; }
MN_PHILOX_HD double from_bits(uint64_t b) { double x; std::memcpy(&x, &b, 8); return x; }
MN_PHILOX_HD uint32_t bits_f(float x) { uint32_t b; std::memcpy(&b, &x, 4); return b; }
MN_PHILOX_HD float from_bits_f(uint32_t b) { float x; std::memcpy(&x, &b, 4); return x; }
#endif

// The largest representable value below finite x (exact bit manipulation).
MN_PHILOX_HD double next_below(double x) {
  const uint64_t b = bits(x);
  if (x > 0.0) return from_bits(b - 1);
  if (x == 0.0) return from_bits(uint64_t{0x8000000000000001ull});
  return from_bits(b + 1);
}
MN_PHILOX_HD float next_below(float x) {
  const uint32_t b = bits_f(x);
  if (x > 0.0f) return from_bits_f(b - 1);
  if (x == 0.0f) return from_bits_f(0x80000001u);
  return from_bits_f(b + 1);
}
}  // namespace fp

// Natural logarithm of a positive, finite, normal double, to about 1 ulp, the
// same bits on the host and the device. x = m 2^e with m in [sqrt(1/2), sqrt(2));
// log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716, summed as an odd
// series up to s^23 (the next term is below 1e-19 relative); e ln 2 is added in
// two parts (Cody-Waite: ln2_hi has 21 trailing zero bits and |e| < 2^11, so
// e * ln2_hi is exact). Precondition: x normal (the callers pass x >= 2^-53).
MN_PHILOX_HD double philox_log(double x) {
  const uint64_t b = fp::bits(x);
  int e = static_cast<int>((b >> 52) & 0x7ff) - 1023;
  double m = fp::from_bits(uint64_t{(b & 0x000fffffffffffffull) | 0x3ff0000000000000ull});  // [1, 2)
  if (m > 1.4142135623730951) {
    m = fp::mul(m, 0.5);  // exact
    e += 1;
  }
  const double s = fp::div(fp::sub(m, 1.0), fp::add(m, 1.0));  // m - 1 exact (Sterbenz)
  const double z = fp::mul(s, s);
  // P(z) = sum_k z^k / (2k + 1), k = 0..11, Horner.
  double p = 1.0 / 23.0;
  p = fp::add(fp::mul(p, z), 1.0 / 21.0);
  p = fp::add(fp::mul(p, z), 1.0 / 19.0);
  p = fp::add(fp::mul(p, z), 1.0 / 17.0);
  p = fp::add(fp::mul(p, z), 1.0 / 15.0);
  p = fp::add(fp::mul(p, z), 1.0 / 13.0);
  p = fp::add(fp::mul(p, z), 1.0 / 11.0);
  p = fp::add(fp::mul(p, z), 1.0 / 9.0);
  p = fp::add(fp::mul(p, z), 1.0 / 7.0);
  p = fp::add(fp::mul(p, z), 1.0 / 5.0);
  p = fp::add(fp::mul(p, z), 1.0 / 3.0);
  // log m = 2s + 2s z P'(z) where P = 1 + z P'; adding the small part last keeps
  // the leading term 2s exact.
  const double two_s = fp::mul(2.0, s);
  const double tail = fp::mul(fp::mul(two_s, z), p);
  const double ln2_hi = 6.93147180369123816490e-01;  // 0x3FE62E42FEE00000
  const double ln2_lo = 1.90821492927058770002e-10;  // ln 2 - ln2_hi
  const double de = static_cast<double>(e);
  return fp::add(fp::mul(de, ln2_hi), fp::add(fp::add(fp::mul(de, ln2_lo), tail), two_s));
}

// sin and cos of 2 pi x / 2^53 for a 53-bit integer x (an angle of 2 pi u, u
// dyadic in [0, 1)). The reduction is exact integer arithmetic on x: quadrant
// q = round(4u) mod 4 and remainder r = x - q 2^51 in [-2^50, 2^50), so the
// reduced angle a = r pi / 2^52 lies in [-pi/4, pi/4] and is one rounding away
// from exact. Taylor series to a^19 / a^20 (next terms below 1e-19).
MN_PHILOX_HD void philox_sincos_2pi(uint64_t x53, double* s_out, double* c_out) {
  const uint64_t qfull = (x53 + (1ull << 50)) >> 51;  // 0..4
  const int64_t r = static_cast<int64_t>(x53) - static_cast<int64_t>(qfull << 51);
  const unsigned q = static_cast<unsigned>(qfull & 3u);
  const double pi_2p52 = 3.141592653589793 / 4503599627370496.0;  // pi / 2^52 (exact scaling)
  const double a = fp::mul(static_cast<double>(r), pi_2p52);
  const double z = fp::mul(a, a);
  // sin a = a (1 - z/3! + z^2/5! - ... - z^9/19!)
  double ps = -1.0 / 121645100408832000.0;  // -1/19!
  ps = fp::add(fp::mul(ps, z), 1.0 / 355687428096000.0);  // 1/17!
  ps = fp::add(fp::mul(ps, z), -1.0 / 1307674368000.0);   // 1/15!
  ps = fp::add(fp::mul(ps, z), 1.0 / 6227020800.0);       // 1/13!
  ps = fp::add(fp::mul(ps, z), -1.0 / 39916800.0);        // 1/11!
  ps = fp::add(fp::mul(ps, z), 1.0 / 362880.0);           // 1/9!
  ps = fp::add(fp::mul(ps, z), -1.0 / 5040.0);            // 1/7!
  ps = fp::add(fp::mul(ps, z), 1.0 / 120.0);              // 1/5!
  ps = fp::add(fp::mul(ps, z), -1.0 / 6.0);               // 1/3!
  const double sin_a = fp::add(a, fp::mul(fp::mul(a, z), ps));
  // cos a = 1 - z/2 + z^2/4! - ... + z^10/20!
  double pc = 1.0 / 2432902008176640000.0;                  // 1/20!
  pc = fp::add(fp::mul(pc, z), -1.0 / 6402373705728000.0);  // 1/18!
  pc = fp::add(fp::mul(pc, z), 1.0 / 20922789888000.0);     // 1/16!
  pc = fp::add(fp::mul(pc, z), -1.0 / 87178291200.0);       // 1/14!
  pc = fp::add(fp::mul(pc, z), 1.0 / 479001600.0);          // 1/12!
  pc = fp::add(fp::mul(pc, z), -1.0 / 3628800.0);           // 1/10!
  pc = fp::add(fp::mul(pc, z), 1.0 / 40320.0);              // 1/8!
  pc = fp::add(fp::mul(pc, z), -1.0 / 720.0);               // 1/6!
  pc = fp::add(fp::mul(pc, z), 1.0 / 24.0);                 // 1/4!
  // 1 - z/2 + z^2 pc: the 1 - z/2 part first keeps cos a accurate near a = pi/4.
  const double cos_a = fp::add(fp::sub(1.0, fp::mul(0.5, z)), fp::mul(fp::mul(z, z), pc));
  double s, c;
  switch (q) {
    case 0: s = sin_a; c = cos_a; break;
    case 1: s = cos_a; c = -sin_a; break;
    case 2: s = -sin_a; c = -cos_a; break;
    default: s = -cos_a; c = sin_a; break;
  }
  *s_out = s;
  *c_out = c;
}

// Two standard normals from one block (Box-Muller): u1 = (bits53(v0, v1) + 1) 2^-53
// in (0, 1], angle 2 pi bits53(v2, v3) 2^-53; z0 = r cos, z1 = r sin,
// r = sqrt(-2 log u1).
MN_PHILOX_HD void philox_box_muller(const Philox4& b, double* z0, double* z1) {
  const double u1 = static_cast<double>(philox_bits53(b.v[0], b.v[1]) + 1) *
                    (1.0 / 9007199254740992.0);  // exact
  const double r = fp::sqrt(fp::mul(-2.0, philox_log(u1)));
  double s, c;
  philox_sincos_2pi(philox_bits53(b.v[2], b.v[3]), &s, &c);
  *z0 = fp::mul(r, c);
  *z1 = fp::mul(r, s);
}

// ---- the fills, one Philox block at a time ---------------------------------
namespace rng_detail {

enum FillKind : int {
  kUniformF32 = 0,   // 4 elements per block, (float)(low + span * u24) clamped below high
  kUniformF64 = 1,   // 2 per block, low + span * u53 clamped below high
  kNormal = 2,       // 2 per block, mean + std * z (double), then converted to T
  kBernoulli = 3,    // 4 per block, u24 < (float)p
  kRandIntLane = 4,  // 4 per block, low + (lane * range) >> 32   (range <= 2^32)
  kRandIntPair = 5,  // 2 per block, low + (x64 * range) >> 64    (range > 2^32)
};

struct FillArgs {
  uint64_t seed = 0;
  uint64_t offset = 0;  // first block
  int64_t n = 0;        // elements
  int kind = kUniformF32;
  double a = 0.0;       // low (uniform) or mean (normal)
  double b = 0.0;       // span = high - low (uniform) or std (normal)
  double high = 0.0;    // uniform: the excluded upper bound
  float p = 0.0f;       // Bernoulli probability, rounded to float32
  uint64_t range = 0;   // randint: high - low
  int64_t ilow = 0;     // randint: low
};

MN_PHILOX_HD int elems_per_block(int kind) {
  return (kind == kUniformF32 || kind == kBernoulli || kind == kRandIntLane) ? 4 : 2;
}

// Writes the elements of block j (elements j * per .. j * per + per - 1, those < n).
template <typename T>
MN_PHILOX_HD void fill_block(T* out, const FillArgs& f, int64_t j) {
  const Philox4 r = philox4x32_10(f.seed, f.offset + static_cast<uint64_t>(j));
  const int per = elems_per_block(f.kind);
  const int64_t base = j * per;
  const int64_t left = f.n - base;
  const int cnt = left < per ? static_cast<int>(left) : per;
  switch (f.kind) {
    case kUniformF32: {
      const float hf = static_cast<float>(f.high);
      for (int k = 0; k < cnt; ++k) {
        const double u = static_cast<double>(philox_uniform_float(r.v[k]));
        float v = static_cast<float>(fp::add(f.a, fp::mul(f.b, u)));
        if (f.b > 0.0 && v >= hf) v = fp::next_below(hf);
        out[base + k] = static_cast<T>(v);
      }
      break;
    }
    case kUniformF64: {
      for (int k = 0; k < cnt; ++k) {
        const double u = philox_uniform_double(r.v[2 * k], r.v[2 * k + 1]);
        double v = fp::add(f.a, fp::mul(f.b, u));
        if (f.b > 0.0 && v >= f.high) v = fp::next_below(f.high);
        out[base + k] = static_cast<T>(v);
      }
      break;
    }
    case kNormal: {
      double z[2];
      philox_box_muller(r, &z[0], &z[1]);
      for (int k = 0; k < cnt; ++k) out[base + k] = static_cast<T>(fp::add(f.a, fp::mul(f.b, z[k])));
      break;
    }
    case kBernoulli: {
      for (int k = 0; k < cnt; ++k)
        out[base + k] = philox_uniform_float(r.v[k]) < f.p ? static_cast<T>(1) : static_cast<T>(0);
      break;
    }
    case kRandIntLane: {
      for (int k = 0; k < cnt; ++k) {
        const uint64_t off = (static_cast<uint64_t>(r.v[k]) * f.range) >> 32;
        out[base + k] = static_cast<T>(static_cast<int64_t>(static_cast<uint64_t>(f.ilow) + off));
      }
      break;
    }
    default: {  // kRandIntPair
      for (int k = 0; k < cnt; ++k) {
        const uint64_t x = (static_cast<uint64_t>(r.v[2 * k + 1]) << 32) | r.v[2 * k];
        const uint64_t off = philox_detail::mulhi64(x, f.range);
        out[base + k] = static_cast<T>(static_cast<int64_t>(static_cast<uint64_t>(f.ilow) + off));
      }
      break;
    }
  }
}

#ifdef MN_WITH_CUDA
// Launches fill_block over all blocks of `f` on mn::cuda::stream() of CUDA device
// `device` (runtime/cuda/rng.cu). Instantiated for float, double, int32_t,
// int64_t, uint8_t.
template <typename T>
void fill_cuda(T* out, const FillArgs& f, int device);
#endif

}  // namespace rng_detail
}  // namespace mn
