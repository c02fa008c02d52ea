// Inverted dropout with a counter-based (Philox) mask, CPU and CUDA.
//
// Mask convention (runtime/philox.h): element i of the tensor uses Philox block
// (offset + i / 4) of the key `seed`, lane i % 4, and is KEPT iff
// philox_uniform_float(lane) >= (float)p — the complement of bernoulli_(p) for
// the same (seed, offset). Both devices run the same integer Philox rounds and
// the same float compare, so the mask is bit-identical on the CPU and the GPU.
// Kept elements are y = x / T(1 - p) (a division, so a kept value is exactly
// x / (1 - p) rounded once), dropped ones are 0. The Tensor-level forward with a
// Generator reserves ceil(n / 4) blocks of it (Generator::advance).
//
// Backward: the forward stores the mask as uint8 (1 = kept), one byte per
// element, and the backward is gx = mask ? gy / (1 - p) : 0. (Regenerating from
// (seed, offset) would save that byte per element but costs the Philox rounds a
// second time; the byte is cheaper than the rounds on both devices.)
// Evaluation mode (handled by the caller, ag::dropout / nn::Dropout) is the identity.
#pragma once
#include <cstdint>

#include "runtime/rng.h"
#include "runtime/tensor.h"

namespace mn::kernels {

// x, y: (n); mask: (n) uint8, written. y[i] = mask[i] ? x[i] / (1 - p) : 0.
template <typename T>
void dropout_forward_cpu(int64_t n, const T* x, double p, uint64_t seed, uint64_t offset,
                         uint8_t* mask, T* y);
// gy, mask: (n) -> gx: (n) (overwritten)
template <typename T>
void dropout_backward_cpu(int64_t n, const T* gy, const uint8_t* mask, double p, T* gx);
#ifdef MN_WITH_CUDA
template <typename T>
void dropout_forward_cuda(int64_t n, const T* x, double p, uint64_t seed, uint64_t offset,
                          uint8_t* mask, T* y);
template <typename T>
void dropout_backward_cuda(int64_t n, const T* gy, const uint8_t* mask, double p, T* gx);
#endif

struct DropoutResult {
  Tensor y;     // like x
  Tensor mask;  // like x, uint8 (1 = kept)
  uint64_t seed = 0, offset = 0;
};
// p in [0, 1]. Explicit (seed, offset):
DropoutResult dropout_forward(const Tensor& x, double p, uint64_t seed, uint64_t offset);
// Draws from g: uses (g.seed(), g.advance(ceil(numel / 4))).
DropoutResult dropout_forward(const Tensor& x, double p, Generator& g);
Tensor dropout_backward(const Tensor& gy, const Tensor& mask, double p);

// The mask alone (uint8, shape `shape`, on `device`), for tests and references.
Tensor dropout_mask(const Shape& shape, double p, uint64_t seed, uint64_t offset, Device device);

}  // namespace mn::kernels
