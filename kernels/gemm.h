// Matrix multiplication: our own cache-blocked, vectorised, multithreaded CPU
// GEMM and our own tiled CUDA GEMM (no BLAS inside the library).
//
// Row-major C (M x N) = alpha * op(A) * op(B) + beta * C, where op(A) is M x K:
// A is stored (M x K, leading dimension lda) or, with trans_a, (K x M, lda);
// likewise op(B) is K x N from B stored (K x N, ldb) or, with trans_b, (N x K, ldb).
// beta == 0 overwrites C without reading it (NaNs in C do not propagate).
#pragma once
#include <cstdint>

#include "runtime/tensor.h"

namespace mn::kernels {

template <typename T>
void gemm_cpu(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
              int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

// `batch` independent GEMMs; matrix b of A starts at A + b * stride_a (likewise B, C).
template <typename T>
void gemm_batched_cpu(bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K,
                      T alpha, const T* A, int64_t lda, int64_t stride_a, const T* B, int64_t ldb,
                      int64_t stride_b, T beta, T* C, int64_t ldc, int64_t stride_c);

#ifdef MN_WITH_CUDA
// Device pointers; queued on mn::cuda::stream().
template <typename T>
void gemm_cuda(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
               int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc);
template <typename T>
void gemm_batched_cuda(bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K,
                       T alpha, const T* A, int64_t lda, int64_t stride_a, const T* B, int64_t ldb,
                       int64_t stride_b, T beta, T* C, int64_t ldc, int64_t stride_c);
#endif

// Tensor level: a (M, K) or (B, M, K) [or transposed per flag] times b; returns
// a new contiguous (M, N) or (B, M, N) tensor. Same device and float dtype.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);

}  // namespace mn::kernels
