// Counter-based random numbers: Philox4x32-10 keyed by (seed, offset).
//
// A Generator holds a 64-bit seed and a 64-bit offset counted in 128-bit Philox
// blocks. Every fill consumes a whole number of blocks and advances the offset,
// so the same seed and the same sequence of calls give bit-identical numbers on
// the CPU and the GPU: both run the same __host__ __device__ Philox rounds
// (runtime/philox.h) and the same integer-only or correctly-rounded conversions.
//
// Element i of a fill uses block (offset + i / 4), lane i % 4 (float32 uniform,
// bernoulli, integers with a range below 2^32), or block (offset + i / 2) with
// two lanes (float64 uniform: 53 bits; integer ranges of 2^32 or more; the
// Box-Muller pair of a normal).
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/graph.h"
#include "runtime/tensor.h"

namespace mn {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0, uint64_t offset = 0) : seed_(seed), offset_(offset) {}
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) { seed_ = seed; offset_ = offset; }
  // Reserves `blocks` Philox blocks and returns the first one's offset.
  uint64_t advance(uint64_t blocks) {
    graph_unsafe("a random draw (its Philox offset would be frozen in the graph)");
    uint64_t o = offset_;
    offset_ += blocks;
    return o;
  }

  // ---- host scalars (each consumes one block) -----------------------------
  uint32_t next_u32();
  double next_uniform();                // [0, 1)
  int64_t next_int(int64_t low, int64_t high);  // [low, high), unbiased
  double next_normal();

 private:
  uint64_t seed_;
  uint64_t offset_;
};

// The process-wide default generator (seeded by manual_seed).
Generator& default_generator();
void manual_seed(uint64_t seed);

// ---- tensor fills (CPU or CUDA, float32/float64 unless stated) --------------
// Uniform in [low, high).
void uniform_(Tensor& t, double low, double high, Generator& g);
// Normal(mean, std).
void normal_(Tensor& t, double mean, double std, Generator& g);
// 1 with probability p, else 0 (any dtype).
void bernoulli_(Tensor& t, double p, Generator& g);
// Integers uniform in [low, high) (int32/int64 tensors).
void randint_(Tensor& t, int64_t low, int64_t high, Generator& g);

// ---- host-side sampling built on the generator ----------------------------
// A uniformly random permutation of 0..n-1 (Fisher-Yates).
std::vector<int64_t> randperm(int64_t n, Generator& g);
// k distinct values from 0..n-1, uniformly, in random order.
std::vector<int64_t> sample_without_replacement(int64_t n, int64_t k, Generator& g);
// Same, as an int64 tensor on `device`.
Tensor randperm_tensor(int64_t n, Generator& g, Device device = Device::cpu());

}  // namespace mn
