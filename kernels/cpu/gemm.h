// Internal: the raw CPU GEMM launcher (kernels/cpu/gemm*.cpp) on host pointers.
// Included only by kernel sources (.cpp) that call it directly -- the Tensor-level
// matmul, the pairwise distances, conv2d's im2col path -- and by the GEMM tests
// and benchmarks. Op headers (kernels/<op>.h) never include it (a layering test
// checks this); everything else uses the public kernels/gemm.h.
//
// Row-major C (M x N) = alpha * op(A) * op(B) + beta * C, where op(A) is M x K:
// A is stored (M x K, leading dimension lda) or, with trans_a, (K x M, lda);
// likewise op(B) is K x N from B stored (K x N, ldb) or, with trans_b, (N x K, ldb).
// beta == 0 overwrites C without reading it (NaNs in C do not propagate).
// Variants: kernels/gemm_config.h.
#pragma once
#include <cstdint>

namespace mn::kernels {

template <typename T>
void gemm_cpu(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
              int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

// `batch` independent GEMMs; matrix b of A starts at A + b * stride_a (likewise B, C).
template <typename T>
void gemm_batched_cpu(bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K,
                      T alpha, const T* A, int64_t lda, int64_t stride_a, const T* B, int64_t ldb,
                      int64_t stride_b, T beta, T* C, int64_t ldc, int64_t stride_c);

}  // namespace mn::kernels
