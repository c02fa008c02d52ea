// The dense GEMM on the tensor-core implicit GEMM (kernels/cuda/mma_igemm.cuh): float32
// in memory, TF32 or BF16 products, FP32 accumulation. Both operands are copied into
// shared memory in their storage order (op(A) stored (M, K) is k-contiguous and read by
// ldmatrix; stored (K, M) it is m-contiguous and read by 32-bit loads; likewise B), with
// 16-byte cp.async when the pointers, leading dimensions, batch strides and contiguous
// extents are multiples of 4 floats, 4-byte copies otherwise. 128 x 128 x 32 block tiles,
// 4 warps of 64 x 64, 3 stages, two blocks per SM (TileBig). Batched over gridDim.z; a GEMM with few tiles and a long K
// is split by the caller (gemm_cuda_impl's split-K, a batched call over K slices).
#include <cuda_runtime.h>

#include <type_traits>

#include "kernels/cuda/mma.h"
#include "kernels/cuda/mma_igemm.cuh"
#include "runtime/cuda_check.h"

namespace mn::kernels {
namespace {
using namespace mma;
using Cfg = TileBig;

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

template <bool TA, bool TB, int V, MathKind MATH>
void launch_gemm(int batch, int M, int N, int K, float alpha, const float* A, int64_t lda, int64_t sa, const float* B,
                 int64_t ldb, int64_t sb, float beta, float* C, int64_t ldc, int64_t sc) {
  // op(A) stored (M, K) unless TA; op(B) stored (K, N) unless TB.
  using L = StageLayout<Cfg, !TA, TB>;
  DenseLoader<Cfg, typename L::ATile, V> la;
  la.p = A, la.ld = lda, la.x_ext = M;
  DenseLoader<Cfg, typename L::BTile, V> lb;
  lb.p = B, lb.ld = ldb, lb.x_ext = N;
  GemmEpilogue epi;
  epi.C = C, epi.ldc = ldc, epi.c_zstride = sc, epi.M = M, epi.N = N, epi.alpha = alpha, epi.beta = beta;
  launch_mma_igemm<Cfg, L, MATH>(la, lb, epi, M, N, K, ZArgs{0, sa, sb}, batch, nullptr,
                                 MATH == MathKind::BF16 ? "gemm_mma_bf16" : "gemm_mma_tf32");
}

template <int V, MathKind MATH>
void dispatch_transposes(bool ta, bool tb, int batch, int M, int N, int K, float alpha, const float* A, int64_t lda,
                         int64_t sa, const float* B, int64_t ldb, int64_t sb, float beta, float* C, int64_t ldc,
                         int64_t sc) {
  if (!ta && !tb) launch_gemm<false, false, V, MATH>(batch, M, N, K, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc);
  else if (!ta) launch_gemm<false, true, V, MATH>(batch, M, N, K, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc);
  else if (!tb) launch_gemm<true, false, V, MATH>(batch, M, N, K, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc);
  else launch_gemm<true, true, V, MATH>(batch, M, N, K, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc);
}

}  // namespace

void mma_gemm_cuda(Precision p, bool ta, bool tb, int64_t batch, int64_t M, int64_t N, int64_t K, float alpha,
                   const float* A, int64_t lda, int64_t sa, const float* B, int64_t ldb, int64_t sb, float beta,
                   float* C, int64_t ldc, int64_t sc) {
  const char* op = p == Precision::BF16 ? "gemm_mma_bf16" : "gemm_mma_tf32";
  MN_CHECK(p == Precision::TF32 || p == Precision::BF16, op, ": the tensor-core GEMM runs TF32 or BF16, not ",
           precision_name(p));
  MN_CHECK(batch >= 0 && batch <= 65535 && M >= 0 && N >= 0 && K >= 0 && M < (int64_t(1) << 31) &&
               N < (int64_t(1) << 31) && K < (int64_t(1) << 31),
           op, ": sizes out of range batch=", batch, " M=", M, " N=", N, " K=", K);
  if (batch == 0 || M == 0 || N == 0) return;
  check_tf32_device(op);
  // 16-byte copies: every row start and batch offset 16-byte aligned, and the contiguous
  // extent a multiple of 4 (a 4-float run is wholly inside or outside the matrix).
  const bool vec = aligned16(A) && aligned16(B) && lda % 4 == 0 && ldb % 4 == 0 && sa % 4 == 0 && sb % 4 == 0 &&
                   (ta ? M : K) % 4 == 0 && (tb ? K : N) % 4 == 0;
  const int b = int(batch), m = int(M), n = int(N), k = int(K);
  if (p == Precision::BF16) {
    if (vec) dispatch_transposes<4, MathKind::BF16>(ta, tb, b, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc);
    else dispatch_transposes<1, MathKind::BF16>(ta, tb, b, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc);
  } else {
    if (vec) dispatch_transposes<4, MathKind::TF32>(ta, tb, b, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc);
    else dispatch_transposes<1, MathKind::TF32>(ta, tb, b, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc);
  }
}

}  // namespace mn::kernels
