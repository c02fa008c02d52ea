// CUDA GEMM: C = alpha * op(A) * op(B) + beta * C, row-major, float and double,
// batched over gridDim.z (matrix b at A + b*stride_a, likewise B and C).
//
// Variants (kernels/gemm_config.h, CudaGemmVariant):
//   1 Naive  one thread per C element, a plain dot product over K: the GPU oracle.
//   2 Tiled  (default) 128x128 block tile, BK = 8, 256 threads, each thread owns
//            an 8x8 register tile (two 4x4 quadrants 64 rows/cols apart, so the
//            fragment reads are conflict-free float4s). Shared memory is double
//            buffered: the next k-tile is fetched from global memory into registers
//            while the current one is multiplied, then stored to the other buffer,
//            one __syncthreads per k-tile. Tiles are stored k-major (As[k][m],
//            Bs[k][n]); operands whose contiguous dimension is k are transposed on
//            the way into shared memory. Float loads/stores are float4 when the
//            pointers, leading dimensions and the contiguous extents allow it
//            (VEC); otherwise every element is bounds-checked (edge tiles, odd
//            sizes, double).
// beta == 0 never reads C.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/gemm.h"
#include "kernels/gemm_config.h"
#include "runtime/cuda_check.h"

namespace mn::kernels {
namespace {

// ---- variant 1: naive ----------------------------------------------------------
template <typename T>
__global__ void gemm_naive_kernel(bool ta, bool tb, int M, int N, int K, T alpha, const T* A,
                                  int64_t lda, int64_t sa, const T* B, int64_t ldb, int64_t sb,
                                  T beta, T* C, int64_t ldc, int64_t sc) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  const int i = blockIdx.y * blockDim.y + threadIdx.y;
  if (i >= M || j >= N) return;
  A += blockIdx.z * sa;
  B += blockIdx.z * sb;
  C += blockIdx.z * sc;
  T acc = 0;
  for (int k = 0; k < K; ++k) {
    const T a = ta ? A[int64_t(k) * lda + i] : A[int64_t(i) * lda + k];
    const T b = tb ? B[int64_t(j) * ldb + k] : B[int64_t(k) * ldb + j];
    acc += a * b;
  }
  T& c = C[int64_t(i) * ldc + j];
  c = beta == T(0) ? alpha * acc : alpha * acc + beta * c;
}

// ---- variant 2: tiled -------------------------------------------------------------
constexpr int BM = 128, BN = 128, BK = 8, PAD = 4, THREADS = 256;

template <typename T>
__device__ __forceinline__ void lds4(const T* p, T* out) {
#pragma unroll
  for (int i = 0; i < 4; ++i) out[i] = p[i];
}
template <>
__device__ __forceinline__ void lds4<float>(const float* p, float* out) {
  const float4 v = *reinterpret_cast<const float4*>(p);
  out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
}

// One thread's share (4 elements) of a 128 x 8 tile of op(A) or 8 x 128 tile of op(B).
// `KMAJOR`: the operand is stored with the tile's 128-long dimension contiguous
// (trans A, or plain B), so 32 threads cover one k row with 4 consecutive elements
// each. Otherwise k is contiguous: 2 threads per row, 4 consecutive k each.
template <typename T, bool KMAJOR, bool VEC>
struct TileLoader {
  int r, c;  // KMAJOR: r = k row (0..7), c = first of 4 columns; else r = row, c = first k
  __device__ explicit TileLoader(int tid) {
    if (KMAJOR) {
      r = tid / 32, c = (tid % 32) * 4;
    } else {
      r = tid / 2, c = (tid % 2) * 4;
    }
  }
  // P points at the operand, `outer` = first index of the 128-long dimension (m0 or n0),
  // `extent` its size (M or N), k0 the tile's first k.
  __device__ void load(const T* P, int64_t ld, int outer, int extent, int k0, int K,
                       T (&v)[4]) const {
    if (KMAJOR) {
      const int k = k0 + r, x = outer + c;
      const T* p = P + int64_t(k) * ld + x;
      if constexpr (VEC) {
        if (k < K && x < extent) {
          const float4 f = *reinterpret_cast<const float4*>(p);
          v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
        } else {
          v[0] = v[1] = v[2] = v[3] = T(0);
        }
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) v[i] = (k < K && x + i < extent) ? p[i] : T(0);
      }
    } else {
      const int x = outer + r, k = k0 + c;
      const T* p = P + int64_t(x) * ld + k;
      if constexpr (VEC) {
        if (x < extent && k < K) {
          const float4 f = *reinterpret_cast<const float4*>(p);
          v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
        } else {
          v[0] = v[1] = v[2] = v[3] = T(0);
        }
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) v[i] = (x < extent && k + i < K) ? p[i] : T(0);
      }
    }
  }
  // Into a k-major tile S[k][outer] with row stride BM + PAD.
  __device__ void store(T (*S)[BM + PAD], const T (&v)[4]) const {
    if (KMAJOR) {
#pragma unroll
      for (int i = 0; i < 4; ++i) S[r][c + i] = v[i];
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i) S[c + i][r] = v[i];
    }
  }
};

template <typename T, bool TA, bool TB, bool VEC>
__global__ void __launch_bounds__(THREADS)
    gemm_tiled_kernel(int M, int N, int K, T alpha, const T* __restrict__ A, int64_t lda,
                      int64_t sa, const T* __restrict__ B, int64_t ldb, int64_t sb, T beta,
                      T* __restrict__ C, int64_t ldc, int64_t sc) {
  static_assert(!VEC || std::is_same<T, float>::value, "VEC path is float only");
  __shared__ __align__(16) T As[2][BK][BM + PAD];  // (k, m)
  __shared__ __align__(16) T Bs[2][BK][BN + PAD];  // (k, n)

  A += blockIdx.z * sa;
  B += blockIdx.z * sb;
  C += blockIdx.z * sc;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;

  // op(A) tile is k-major in memory when A is stored (K, M); op(B) when B is (K, N).
  const TileLoader<T, TA, VEC> la(tid);
  const TileLoader<T, !TB, VEC> lb(tid);
  T va[4], vb[4];

  T acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = T(0);

  const int ktiles = (K + BK - 1) / BK;
  if (ktiles > 0) {
    la.load(A, lda, m0, M, 0, K, va);
    lb.load(B, ldb, n0, N, 0, K, vb);
    la.store(As[0], va);
    lb.store(Bs[0], vb);
  }
  __syncthreads();

  for (int kt = 0; kt < ktiles; ++kt) {
    const int cur = kt & 1;
    const bool more = kt + 1 < ktiles;
    if (more) {  // global -> registers for the next tile, overlapping the math below
      la.load(A, lda, m0, M, (kt + 1) * BK, K, va);
      lb.load(B, ldb, n0, N, (kt + 1) * BK, K, vb);
    }
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      T a[8], b[8];
      lds4(&As[cur][k][ty * 4], a);
      lds4(&As[cur][k][64 + ty * 4], a + 4);
      lds4(&Bs[cur][k][tx * 4], b);
      lds4(&Bs[cur][k][64 + tx * 4], b + 4);
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
    }
    if (more) {  // the other buffer was last read in iteration kt-1, before the barrier
      la.store(As[cur ^ 1], va);
      lb.store(Bs[cur ^ 1], vb);
    }
    __syncthreads();
  }

  // Epilogue: rows ty*4+i and 64+ty*4+i, columns tx*4+j and 64+tx*4+j.
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int row = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
    if (row >= M) continue;
    T* crow = C + int64_t(row) * ldc;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int col = n0 + h * 64 + tx * 4;
      const T* r = acc[i] + h * 4;
      if constexpr (VEC) {
        if (col < N) {  // N % 4 == 0, so all four columns are in range
          float4* p = reinterpret_cast<float4*>(crow + col);
          float4 o;
          if (beta == T(0)) {
            o = make_float4(alpha * r[0], alpha * r[1], alpha * r[2], alpha * r[3]);
          } else {
            const float4 c = *p;
            o = make_float4(alpha * r[0] + beta * c.x, alpha * r[1] + beta * c.y,
                            alpha * r[2] + beta * c.z, alpha * r[3] + beta * c.w);
          }
          *p = o;
        }
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (col + j < N) {
            T& c = crow[col + j];
            c = beta == T(0) ? alpha * r[j] : alpha * r[j] + beta * c;
          }
        }
      }
    }
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

template <typename T, bool VEC>
void launch_tiled(bool ta, bool tb, dim3 grid, int M, int N, int K, T alpha, const T* A,
                  int64_t lda, int64_t sa, const T* B, int64_t ldb, int64_t sb, T beta, T* C,
                  int64_t ldc, int64_t sc) {
  cudaStream_t s = mn::cuda::stream();
#define MN_GEMM_LAUNCH(TA, TB)                                                              \
  gemm_tiled_kernel<T, TA, TB, VEC>                                                         \
      <<<grid, THREADS, 0, s>>>(M, N, K, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc); \
  CUDA_CHECK_LAUNCH("gemm_tiled_kernel")
  if (!ta && !tb) {
    MN_GEMM_LAUNCH(false, false);
  } else if (!ta && tb) {
    MN_GEMM_LAUNCH(false, true);
  } else if (ta && !tb) {
    MN_GEMM_LAUNCH(true, false);
  } else {
    MN_GEMM_LAUNCH(true, true);
  }
#undef MN_GEMM_LAUNCH
}

// The float4 path needs 16-byte aligned rows and contiguous extents that are
// multiples of 4 (so a float4 is entirely inside or entirely outside the matrix).
template <typename T>
bool can_vectorise(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda,
                   int64_t sa, const T* B, int64_t ldb, int64_t sb, const T* C, int64_t ldc,
                   int64_t sc) {
  if (!std::is_same<T, float>::value) return false;
  if (!aligned16(A) || !aligned16(B) || !aligned16(C)) return false;
  if (lda % 4 || ldb % 4 || ldc % 4 || sa % 4 || sb % 4 || sc % 4) return false;
  if ((ta ? M : K) % 4) return false;
  if ((tb ? K : N) % 4) return false;
  return N % 4 == 0;
}

template <typename T>
void gemm_cuda_impl(const char* op, bool ta, bool tb, int64_t batch, int64_t M, int64_t N,
                    int64_t K, T alpha, const T* A, int64_t lda, int64_t sa, const T* B,
                    int64_t ldb, int64_t sb, T beta, T* C, int64_t ldc, int64_t sc) {
  MN_CHECK(batch >= 0 && M >= 0 && N >= 0 && K >= 0, op, ": negative size batch=", batch,
           " M=", M, " N=", N, " K=", K);
  MN_CHECK(M < (int64_t(1) << 31) && N < (int64_t(1) << 31) && K < (int64_t(1) << 31), op,
           ": sizes must fit in int32 (M=", M, " N=", N, " K=", K, ")");
  MN_CHECK(lda >= std::max<int64_t>(1, ta ? M : K), op, ": lda=", lda, " too small");
  MN_CHECK(ldb >= std::max<int64_t>(1, tb ? K : N), op, ": ldb=", ldb, " too small");
  MN_CHECK(ldc >= std::max<int64_t>(1, N), op, ": ldc=", ldc, " < N=", N);
  if (batch == 0 || M == 0 || N == 0) return;
  const CudaGemmVariant variant = cuda_gemm_variant();
  const bool vec = can_vectorise(ta, tb, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc);
  constexpr int64_t kMaxZ = 65535;
  for (int64_t b0 = 0; b0 < batch; b0 += kMaxZ) {
    const unsigned nb = static_cast<unsigned>(std::min(kMaxZ, batch - b0));
    const T* Ab = A + b0 * sa;
    const T* Bb = B + b0 * sb;
    T* Cb = C + b0 * sc;
    if (variant == CudaGemmVariant::Naive) {
      const dim3 block(16, 16);
      const dim3 grid(static_cast<unsigned>((N + 15) / 16), static_cast<unsigned>((M + 15) / 16),
                      nb);
      MN_CHECK(grid.y <= 65535, op, ": M=", M, " too large for the naive kernel");
      gemm_naive_kernel<T><<<grid, block, 0, mn::cuda::stream()>>>(
          ta, tb, int(M), int(N), int(K), alpha, Ab, lda, sa, Bb, ldb, sb, beta, Cb, ldc, sc);
      CUDA_CHECK_LAUNCH("gemm_naive_kernel");
    } else {
      const dim3 grid(static_cast<unsigned>((N + BN - 1) / BN),
                      static_cast<unsigned>((M + BM - 1) / BM), nb);
      MN_CHECK(grid.y <= 65535, op, ": M=", M, " too large for one launch");
      if (vec) {
        if constexpr (std::is_same<T, float>::value)
          launch_tiled<T, true>(ta, tb, grid, int(M), int(N), int(K), alpha, Ab, lda, sa, Bb, ldb,
                                sb, beta, Cb, ldc, sc);
      } else {
        launch_tiled<T, false>(ta, tb, grid, int(M), int(N), int(K), alpha, Ab, lda, sa, Bb, ldb,
                               sb, beta, Cb, ldc, sc);
      }
    }
  }
}

}  // namespace

template <typename T>
void gemm_cuda(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
               int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  gemm_cuda_impl<T>("gemm_cuda", trans_a, trans_b, 1, M, N, K, alpha, A, lda, 0, B, ldb, 0, beta,
                    C, ldc, 0);
}

template <typename T>
void gemm_batched_cuda(bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K,
                       T alpha, const T* A, int64_t lda, int64_t stride_a, const T* B, int64_t ldb,
                       int64_t stride_b, T beta, T* C, int64_t ldc, int64_t stride_c) {
  gemm_cuda_impl<T>("gemm_batched_cuda", trans_a, trans_b, batch, M, N, K, alpha, A, lda,
                    stride_a, B, ldb, stride_b, beta, C, ldc, stride_c);
}

#define MN_INSTANTIATE_GEMM_CUDA(T)                                                             \
  template void gemm_cuda<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t,      \
                             const T*, int64_t, T, T*, int64_t);                               \
  template void gemm_batched_cuda<T>(bool, bool, int64_t, int64_t, int64_t, int64_t, T,        \
                                     const T*, int64_t, int64_t, const T*, int64_t, int64_t, T, \
                                     T*, int64_t, int64_t);
MN_INSTANTIATE_GEMM_CUDA(float)
MN_INSTANTIATE_GEMM_CUDA(double)
#undef MN_INSTANTIATE_GEMM_CUDA

}  // namespace mn::kernels
