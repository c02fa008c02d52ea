// The seeded Philox generator: host scalar draws, the default generator, tensor
// fills on the CPU (dispatching to runtime/cuda/rng.cu for CUDA tensors) and the
// host-side sampling built on top (permutations, sampling without replacement).
//
// Every fill computes element i from its own (seed, block, lane) alone
// (runtime/philox.h), so the result depends neither on the device nor on the
// number of CPU threads, and each fill advances the generator by the number of
// blocks it used.
#include "runtime/rng.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "runtime/dispatch.h"
#include "runtime/parallel.h"
#include "runtime/philox.h"

namespace mn {

using rng_detail::FillArgs;

// ---- host scalars -------------------------------------------------------------

uint32_t Generator::next_u32() { return philox4x32_10(seed_, advance(1)).v[0]; }

double Generator::next_uniform() {
  const Philox4 r = philox4x32_10(seed_, advance(1));
  return philox_uniform_double(r.v[0], r.v[1]);
}

// Lemire's multiply-shift with rejection: x * range is a 128-bit number whose high
// word is the candidate; candidates whose low word falls in the first
// (2^64 mod range) values are rejected, which leaves every result with exactly
// floor(2^64 / range) preimages. Each attempt consumes one block.
int64_t Generator::next_int(int64_t low, int64_t high) {
  MN_CHECK(low < high, "Generator::next_int: empty range [", low, ", ", high, ")");
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  const uint64_t threshold = (0 - range) % range;  // 2^64 mod range
  for (;;) {
    const Philox4 r = philox4x32_10(seed_, advance(1));
    const uint64_t x = (static_cast<uint64_t>(r.v[1]) << 32) | r.v[0];
    const unsigned __int128 m = static_cast<unsigned __int128>(x) * range;
    if (static_cast<uint64_t>(m) < threshold) continue;
    return static_cast<int64_t>(static_cast<uint64_t>(low) + static_cast<uint64_t>(m >> 64));
  }
}

double Generator::next_normal() {
  double z0, z1;
  philox_box_muller(philox4x32_10(seed_, advance(1)), &z0, &z1);
  return z0;
}

// Fixed, documented default seed so that runs without manual_seed are reproducible.
Generator& default_generator() {
  static Generator g(0x5eed5eed5eed5eedull, 0);
  return g;
}

void manual_seed(uint64_t seed) { default_generator().set_state(seed, 0); }

// ---- tensor fills -------------------------------------------------------------

namespace {

template <typename T>
void fill_typed(const Tensor& dst, const FillArgs& f, int64_t nblocks) {
  T* out = dst.data<T>();
  if (dst.is_cuda()) {
    MN_CUDA_BRANCH("rng_fill", dst.device(), dst.dtype(),
                   rng_detail::fill_cuda<T>(out, f, dst.device().index));
    return;
  }
  // About 16 K elements per chunk: a Philox block costs ~40 integer ops.
  parallel_for(0, nblocks, 4096, [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) rng_detail::fill_block<T>(out, f, j);
  });
}

// Validates the device, reserves the blocks, fills a contiguous tensor (t itself,
// or a temporary copied back into a non-contiguous t).
void run_fill(Tensor& t, FillArgs f, const char* op, Generator& g) {
  MN_CHECK(t.defined(), op, ": undefined tensor");
  if (t.is_cuda()) check_cuda_usable(op, t);
  const int64_t n = t.numel();
  const int per = rng_detail::elems_per_block(f.kind);
  const int64_t nblocks = (n + per - 1) / per;
  f.seed = g.seed();
  f.offset = g.advance(static_cast<uint64_t>(nblocks));
  f.n = n;
  if (n == 0) return;
  Tensor dst = t.is_contiguous() ? t : Tensor::empty(t.shape(), t.dtype(), t.device());
  MN_DISPATCH_ALL(t.dtype(), op, [&] { fill_typed<scalar_t>(dst, f, nblocks); });
  if (!dst.shares_storage(t)) t.copy_(dst);
}

}  // namespace

void uniform_(Tensor& t, double low, double high, Generator& g) {
  MN_CHECK(t.defined(), "uniform_: undefined tensor");
  check_floating("uniform_", t);
  MN_CHECK(std::isfinite(low) && std::isfinite(high) && low <= high,
           "uniform_: need finite low <= high, got [", low, ", ", high, ") for ", t.desc());
  FillArgs f;
  f.kind = t.dtype() == DType::F32 ? rng_detail::kUniformF32 : rng_detail::kUniformF64;
  f.a = low;
  f.b = high - low;
  MN_CHECK(std::isfinite(f.b), "uniform_: high - low overflows: [", low, ", ", high, ")");
  f.high = high;
  run_fill(t, f, "uniform_", g);
}

void normal_(Tensor& t, double mean, double std, Generator& g) {
  MN_CHECK(t.defined(), "normal_: undefined tensor");
  check_floating("normal_", t);
  MN_CHECK(std::isfinite(mean) && std::isfinite(std) && std >= 0.0,
           "normal_: need finite mean and std >= 0, got mean=", mean, " std=", std);
  FillArgs f;
  f.kind = rng_detail::kNormal;
  f.a = mean;
  f.b = std;
  run_fill(t, f, "normal_", g);
}

void bernoulli_(Tensor& t, double p, Generator& g) {
  MN_CHECK(p >= 0.0 && p <= 1.0, "bernoulli_: p must be in [0, 1], got ", p);
  FillArgs f;
  f.kind = rng_detail::kBernoulli;
  f.p = static_cast<float>(p);  // the float32 compare of philox.h
  run_fill(t, f, "bernoulli_", g);
}

void randint_(Tensor& t, int64_t low, int64_t high, Generator& g) {
  MN_CHECK(t.defined(), "randint_: undefined tensor");
  MN_CHECK(t.dtype() == DType::I32 || t.dtype() == DType::I64, "randint_: tensor ", t.desc(),
           " must be int32 or int64");
  MN_CHECK(low < high, "randint_: empty range [", low, ", ", high, ")");
  if (t.dtype() == DType::I32)
    MN_CHECK(low >= INT32_MIN && high - 1 <= INT32_MAX, "randint_: range [", low, ", ", high,
             ") does not fit int32");
  FillArgs f;
  f.range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  // Ranges up to 2^32 use one 32-bit lane per element: (lane * range) >> 32 has
  // bias below range / 2^32 in relative probability (2.3e-7 for range 1000);
  // wider ranges take 64 bits (two lanes), bias below range / 2^64.
  f.kind = f.range <= (1ull << 32) ? rng_detail::kRandIntLane : rng_detail::kRandIntPair;
  f.ilow = low;
  run_fill(t, f, "randint_", g);
}

// ---- host-side sampling ---------------------------------------------------------

std::vector<int64_t> randperm(int64_t n, Generator& g) {
  MN_CHECK(n >= 0, "randperm: n must be >= 0, got ", n);
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), int64_t{0});
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[g.next_int(0, i + 1)]);
  return p;
}

// Partial Fisher-Yates: step i swaps position i with a uniform position in [i, n).
// When k is small next to n the untouched identity positions are not stored
// (a hash map holds only the displaced ones); both paths consume the generator
// identically and return the same values.
std::vector<int64_t> sample_without_replacement(int64_t n, int64_t k, Generator& g) {
  MN_CHECK(n >= 0 && k >= 0 && k <= n, "sample_without_replacement: need 0 <= k <= n, got n=", n,
           " k=", k);
  std::vector<int64_t> out(static_cast<size_t>(k));
  if (k * 4 >= n) {
    std::vector<int64_t> p(static_cast<size_t>(n));
    std::iota(p.begin(), p.end(), int64_t{0});
    for (int64_t i = 0; i < k; ++i) {
      std::swap(p[i], p[g.next_int(i, n)]);
      out[i] = p[i];
    }
    return out;
  }
  std::unordered_map<int64_t, int64_t> moved;  // position -> value, where not identity
  moved.reserve(static_cast<size_t>(2 * k));
  auto at = [&](int64_t pos) {
    auto it = moved.find(pos);
    return it == moved.end() ? pos : it->second;
  };
  for (int64_t i = 0; i < k; ++i) {
    const int64_t j = g.next_int(i, n);
    const int64_t vi = at(i), vj = at(j);
    moved[j] = vi;
    out[i] = vj;  // position i is never read again
  }
  return out;
}

Tensor randperm_tensor(int64_t n, Generator& g, Device device) {
  return Tensor::from_vector<int64_t>(randperm(n, g), Shape{n}, device);
}

}  // namespace mn
