// Internal pieces of the CPU GEMM shared by kernels/cpu/gemm.cpp (driver,
// packing, threading) and kernels/cpu/gemm_avx2.cpp (intrinsic micro-kernels).
//
// Packed layouts (zero-padded to full slivers, 64-byte aligned):
//   A sliver: MR rows x kc, stored k-major: Ap[k * MR + i]
//   B sliver: kc x NR cols, stored k-major: Bp[k * NR + j]
// A micro-kernel computes the MR x NR product of one A and one B sliver and
// writes C[i*ldc + j] = alpha * acc + beta * C for i < mr, j < nr; beta == 0
// never reads C.
#pragma once
#include <cstdint>

namespace mn::kernels::detail {

template <typename T>
struct GemmTile;
template <>
struct GemmTile<float> {
  static constexpr int MR = 6, NR = 16;  // 12 ymm accumulators
};
template <>
struct GemmTile<double> {
  static constexpr int MR = 6, NR = 8;  // 12 ymm accumulators
};

template <typename T>
using GemmMicroKernel = void (*)(int64_t kc, const T* Ap, const T* Bp, T* C, int64_t ldc, T alpha,
                                 T beta, int mr, int nr);

// Defined in gemm_avx2.cpp; call only when cpu_has_avx2_fma().
void gemm_ukernel_avx2(int64_t kc, const float* Ap, const float* Bp, float* C, int64_t ldc,
                       float alpha, float beta, int mr, int nr);
void gemm_ukernel_avx2(int64_t kc, const double* Ap, const double* Bp, double* C, int64_t ldc,
                       double alpha, double beta, int mr, int nr);

}  // namespace mn::kernels::detail
