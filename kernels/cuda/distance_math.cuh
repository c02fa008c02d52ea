// Internal: the per-row distance primitives of the CUDA kernels, shared by the
// row / pairwise distances (kernels/cuda/distance.cu) and the fused losses
// (kernels/cuda/losses.cu): one warp per row, lanes stride over D, a butterfly
// (xor) shuffle reduction that leaves the sum in every lane. The CPU twin is
// kernels/cpu/distance_math.h.
#pragma once
#include <cstdint>

namespace mn::kernels::dist_math {

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// ||x - y||^2 of one row pair, every lane of the warp gets the sum.
template <typename T>
__device__ __forceinline__ T warp_sq_l2(const T* x, const T* y, int64_t D, int lane) {
  T s = T(0);
  for (int64_t j = lane; j < D; j += 32) {
    const T d = x[j] - y[j];
    s += d * d;
  }
  return warp_sum(s);
}

// sum |x - y| of one row pair, every lane of the warp gets the sum.
template <typename T>
__device__ __forceinline__ T warp_l1(const T* x, const T* y, int64_t D, int lane) {
  T s = T(0);
  for (int64_t j = lane; j < D; j += 32) s += fabs(x[j] - y[j]);
  return warp_sum(s);
}

template <typename T>
__device__ __forceinline__ T sgn(T v) {
  return v > T(0) ? T(1) : (v < T(0) ? T(-1) : T(0));
}

}  // namespace mn::kernels::dist_math
