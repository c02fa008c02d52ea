// Internal: the per-row distance primitives of the CPU kernels, written once and
// shared by the row distances (kernels/cpu/distance.cpp), the pairwise L1 matrix
// and the fused losses (kernels/cpu/losses.cpp), so a loss's d(a, p) and
// row_distance(a, p) are the same number bit for bit. The CUDA twin is
// kernels/cuda/distance_math.cuh. Included only by kernel sources.
#pragma once
#include <cmath>
#include <cstdint>

namespace mn::kernels::dist_math {

// ||x - y||^2 over D values with 8 partial sums: the loop vectorises without
// -ffast-math, and the summation order is fixed (independent of threads).
template <typename T>
inline T row_sq_l2(const T* x, const T* y, int64_t D) {
  T acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= D; j += 8)
    for (int u = 0; u < 8; ++u) {
      T d = x[j + u] - y[j + u];
      acc[u] += d * d;
    }
  T s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; j < D; ++j) {
    T d = x[j] - y[j];
    s += d * d;
  }
  return s;
}

// sum |x - y| over D values, same blocking as row_sq_l2.
template <typename T>
inline T row_l1(const T* x, const T* y, int64_t D) {
  T acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= D; j += 8)
    for (int u = 0; u < 8; ++u) acc[u] += std::abs(x[j + u] - y[j + u]);
  T s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; j < D; ++j) s += std::abs(x[j] - y[j]);
  return s;
}

// sign with sign(0) = 0: the L1 subgradient used at equal coordinates.
template <typename T>
inline T sgn(T v) {
  return v > T(0) ? T(1) : (v < T(0) ? T(-1) : T(0));
}

}  // namespace mn::kernels::dist_math
