// Internal pieces of the CPU GEMM shared by kernels/cpu/gemm.cpp (driver,
// packing, threading) and the intrinsic micro-kernels in kernels/cpu/gemm_avx2.cpp
// and kernels/cpu/gemm_avx512.cpp. Declarations and constants only: the AVX-512
// file is compiled with AVX-512 flags and must not share inline code.
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

// Tile of the portable and AVX2 kernels.
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

// Tile of the AVX-512 kernels.
template <typename T>
struct GemmTile512;
template <>
struct GemmTile512<float> {
  static constexpr int MR = 12, NR = 32;  // 24 zmm accumulators
};
template <>
struct GemmTile512<double> {
  static constexpr int MR = 12, NR = 16;  // 24 zmm accumulators
};

template <typename T>
using GemmMicroKernel = void (*)(int64_t kc, const T* Ap, const T* Bp, T* C, int64_t ldc, T alpha,
                                 T beta, int mr, int nr);

// Defined in gemm_avx2.cpp; call only when the AVX2 path is allowed (cpu_isa()).
void gemm_ukernel_avx2(int64_t kc, const float* Ap, const float* Bp, float* C, int64_t ldc,
                       float alpha, float beta, int mr, int nr);
void gemm_ukernel_avx2(int64_t kc, const double* Ap, const double* Bp, double* C, int64_t ldc,
                       double alpha, double beta, int mr, int nr);

// Defined in gemm_avx512.cpp; call only when cpu_isa() == CpuIsa::Avx512.
void gemm_ukernel_avx512(int64_t kc, const float* Ap, const float* Bp, float* C, int64_t ldc,
                         float alpha, float beta, int mr, int nr);
void gemm_ukernel_avx512(int64_t kc, const double* Ap, const double* Bp, double* C, int64_t ldc,
                         double alpha, double beta, int mr, int nr);

// A row source: writes elements [j0, j0 + n) of row r of a virtual matrix into dst.
// Lets a product read one operand without materialising it (a convolution's
// im2col matrix); called concurrently from several threads.
template <typename T>
struct GemmRows {
  void (*fill)(const void* ctx, int64_t r, int64_t j0, int64_t n, T* dst) = nullptr;
  const void* ctx = nullptr;
};

// C (M, N) = alpha * op(A) * B + beta * C with B (K, N) given row by row
// (defined in gemm.cpp; same blocking, kernels and ISA dispatch as gemm_cpu, so
// the result equals gemm_cpu on the materialised B bit for bit).
template <typename T>
void gemm_cpu_rows_b(bool trans_a, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                     int64_t lda, GemmRows<T> b_rows, T beta, T* C, int64_t ldc);
// C (M, N) = alpha * A * op(B) + beta * C with A (M, K) given row by row.
template <typename T>
void gemm_cpu_rows_a(GemmRows<T> a_rows, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha,
                     const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

}  // namespace mn::kernels::detail
