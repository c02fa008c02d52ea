// Internal: the raw CUDA GEMM launchers (kernels/cuda/gemm.cu) on device pointers,
// queued on mn::cuda::stream(). Same layout conventions as kernels/cpu/gemm.h.
// Included only by kernel sources that call them directly (matmul dispatch, the
// pairwise distances) and by the GEMM tests and benchmarks; op headers
// (kernels/<op>.h) never include it. Declared only in CUDA builds.
#pragma once
#include <cstdint>

#ifdef MN_WITH_CUDA
namespace mn::kernels {

template <typename T>
void gemm_cuda(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
               int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc);
// Streaming multiprocessors of the current device (cached per device).
int cuda_sm_count();

template <typename T>
void gemm_batched_cuda(bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K,
                       T alpha, const T* A, int64_t lda, int64_t stride_a, const T* B, int64_t ldb,
                       int64_t stride_b, T beta, T* C, int64_t ldc, int64_t stride_c);

}  // namespace mn::kernels
#endif
