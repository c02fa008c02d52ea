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
//   4 TensorCoreMma  float only: our mma.sync kernel (kernels/cuda/mma_gemm.cu: cp.async
//            pipeline, ldmatrix, TF32 m16n8k8 or BF16 m16n8k16). Tiled runs it whenever
//            matmul_precision() is TF32 or BF16 (TF32 on variant 3 instead when
//            CudaSpeedups::tc_mma is off).
//   3 TensorCoreTF32  float only (double runs Tiled). 128x128 block tile, BK = 16,
//            256 threads = 8 warps in a 2 (m) x 4 (n) grid, each warp a 64x32
//            sub-tile of 4 x 2 WMMA m16n16k8 TF32 fragments with float
//            accumulators. Operand tiles are staged in shared memory in their
//            storage order (so every global read runs along the contiguous
//            dimension, float4 when VEC) and rounded to TF32 on the way in; the
//            transpose is absorbed by the fragment layout (row_major/col_major).
//            Double buffered like Tiled (registers hold the next k-tile). The
//            epilogue stores each accumulator fragment to a per-warp 16x16
//            shared scratch and applies alpha/beta with bounds checks. Chosen
//            for float when selected explicitly, or for TF32 with the mma.sync
//            kernels switched off; needs compute capability >= 8.0 (checked on the host;
//            the kernel body is compiled only for sm_80+).
// Split-K (Tiled and TensorCoreTF32, unbatched calls; CudaSpeedups in
// kernels/gemm_config.h): a GEMM whose 128x128 tiles cannot fill the GPU once and whose
// K is long (the Koch dense layer's forward, 150 x 4096 outputs = 64 tiles, K = 9216)
// runs as one batched launch over s slices of K into a scratch buffer, then
// gemm_sum_splits adds the slices in a fixed order (deterministic, no atomics).
// beta == 0 never reads C.
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/gemm.h"
#include "kernels/cuda/mma.h"
#include "kernels/gemm_config.h"
#include "kernels/mma_layout.h"
#include "runtime/cuda_check.h"
#include "runtime/tensor.h"

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

// ---- variant 3: TF32 tensor cores (WMMA) -----------------------------------------
namespace tc {
constexpr int BM = 128, BN = 128, BK = 16, THREADS = 256;
constexpr int WM = 64, WN = 32;            // warp tile; warps form a 2 x 4 grid
constexpr int FM = WM / 16, FN = WN / 16;  // 4 x 2 accumulator fragments per warp
constexpr int LDE = 16 + 4;                // per-warp 16x16 epilogue scratch, ldm 20
static_assert(2 * FM * 16 == BM && 4 * FN * 16 == BN && THREADS == 8 * 32 && LDE % 4 == 0,
              "8 warps in a 2 x 4 grid cover the block tile");

// An operand tile in shared memory keeps the operand's storage order: OUTER rows
// of INNER contiguous elements with row stride LD. KMAJOR: stored (k, m|n), 16
// rows of 128; otherwise (m|n, k), 128 rows of 16. The pads keep LD a multiple of
// 4 floats (WMMA's ldm rule for 32-bit types) and spread the fragment reads over
// the banks (with the m16n8k8 register layout, where a load touches 8 rows x 4
// columns at once, LD = 20 and 136 put those 32 elements on distinct banks; WMMA
// does not document its layout). Every fragment pointer is 32-byte aligned: the tile base is
// (the buffers are multiples of 8 floats), and the offset x0 * LD + kk (x0 a
// multiple of 16, kk of 8) or kk * LD + x0 is a multiple of 8 floats.
template <bool KMAJOR>
struct Tile {
  static constexpr int OUTER = KMAJOR ? BK : 128, INNER = KMAJOR ? 128 : BK;
  static constexpr int LD = INNER + (KMAJOR ? 8 : 4);
  static constexpr int SIZE = OUTER * LD;  // floats per buffer
  static_assert(LD % 4 == 0 && SIZE % 8 == 0, "WMMA ldm / 32-byte alignment");
  // Element (x, k) of the 128 x 16 block (x = m or n).
  __device__ static const float* at(const float* S, int x, int k) {
    return KMAJOR ? S + k * LD + x : S + x * LD + k;
  }
};

// One thread's 8 elements of an operand tile, global -> registers -> shared (as
// TF32); outside the matrix the elements are 0. Non-VEC: the thread owns column
// c = tid % INNER of rows r0 + STEP i (i < 8), so a warp reads consecutive
// addresses; VEC: float4 at columns c..c+3 of rows r0 + STEP i (i < 2).
// o0/oext: the tile's first outer index and the matrix extent along it; i0/iext
// likewise for the contiguous (inner) dimension.
template <bool KMAJOR, bool VEC>
struct TcLoader {
  using S = Tile<KMAJOR>;
  static constexpr int W = VEC ? 4 : 1;                 // elements per access
  static constexpr int PER_ROW = S::INNER / W;          // threads per tile row
  static constexpr int STEP = THREADS / PER_ROW;        // rows between a thread's accesses
  static constexpr int N = S::OUTER / STEP;             // accesses per thread
  static_assert(N * W == 8, "8 elements per thread");
  int r0, c;
  float v[8];
  __device__ explicit TcLoader(int tid) : r0(tid / PER_ROW), c((tid % PER_ROW) * W) {}
  __device__ void load(const float* __restrict__ P, int64_t ld, int o0, int oext, int i0,
                       int iext) {
    const int in = i0 + c;
    const float* p = P + int64_t(o0 + r0) * ld + in;
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const bool ok = o0 + r0 + STEP * i < oext && in < iext;
      if constexpr (VEC) {
        // iext % 4 == 0 under VEC, so a float4 is wholly inside or outside.
        float4 f = make_float4(0.f, 0.f, 0.f, 0.f);
        if (ok) f = *reinterpret_cast<const float4*>(p + int64_t(STEP * i) * ld);
        v[4 * i] = f.x, v[4 * i + 1] = f.y, v[4 * i + 2] = f.z, v[4 * i + 3] = f.w;
      } else {
        v[i] = ok ? p[int64_t(STEP * i) * ld] : 0.f;
      }
    }
  }
  __device__ void store(float* T) const {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      float* t = T + (r0 + STEP * i) * S::LD + c;
      if constexpr (VEC) {
        float4 f;
        f.x = nvcuda::wmma::__float_to_tf32(v[4 * i]);
        f.y = nvcuda::wmma::__float_to_tf32(v[4 * i + 1]);
        f.z = nvcuda::wmma::__float_to_tf32(v[4 * i + 2]);
        f.w = nvcuda::wmma::__float_to_tf32(v[4 * i + 3]);
        *reinterpret_cast<float4*>(t) = f;  // LD and c are multiples of 4: 16-byte aligned
      } else {
        *t = nvcuda::wmma::__float_to_tf32(v[i]);
      }
    }
  }
};
}  // namespace tc

// op(A) is stored (K, M) when TA, op(B) is stored (K, N) when !TB: those tiles are
// k-major. A k-major A tile is op(A) in column-major order, a k-major B tile is
// op(B) in row-major order.
template <bool TA, bool TB, bool VEC>
__global__ void __launch_bounds__(tc::THREADS, 1)
    gemm_tf32_kernel(int M, int N, int K, float alpha, const float* __restrict__ A, int64_t lda,
                     int64_t sa, const float* __restrict__ B, int64_t ldb, int64_t sb, float beta,
                     float* __restrict__ C, int64_t ldc, int64_t sc) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  namespace wmma = nvcuda::wmma;
  using TileA = tc::Tile<TA>;
  using TileB = tc::Tile<!TB>;
  using LayoutA = std::conditional_t<TA, wmma::col_major, wmma::row_major>;
  using LayoutB = std::conditional_t<TB, wmma::col_major, wmma::row_major>;
  // [A buffer 0 | A buffer 1 | B buffer 0 | B buffer 1]; after the main loop the
  // first 8 * 16 * LDE floats are reused as the warps' epilogue scratch.
  __shared__ __align__(32) float smem[2 * TileA::SIZE + 2 * TileB::SIZE];
  static_assert(8 * 16 * tc::LDE <= 2 * TileA::SIZE + 2 * TileB::SIZE, "epilogue scratch");
  float* As = smem;
  float* Bs = smem + 2 * TileA::SIZE;

  A += blockIdx.z * sa;
  B += blockIdx.z * sb;
  C += blockIdx.z * sc;
  const int m0 = blockIdx.y * tc::BM, n0 = blockIdx.x * tc::BN;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / 4, wn = warp % 4;  // warp sub-tile rows wm*64, cols wn*32

  tc::TcLoader<TA, VEC> la(tid);
  tc::TcLoader<!TB, VEC> lb(tid);
  // (outer, inner) of each stored operand: k-major tiles have k outer.
  auto load = [&](int k0) {
    if constexpr (TA) la.load(A, lda, k0, K, m0, M);
    else la.load(A, lda, m0, M, k0, K);
    if constexpr (!TB) lb.load(B, ldb, k0, K, n0, N);
    else lb.load(B, ldb, n0, N, k0, K);
  };

  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[tc::FM][tc::FN];
#pragma unroll
  for (int i = 0; i < tc::FM; ++i)
#pragma unroll
    for (int j = 0; j < tc::FN; ++j) wmma::fill_fragment(acc[i][j], 0.f);

  const int ktiles = (K + tc::BK - 1) / tc::BK;
  if (ktiles > 0) {
    load(0);
    la.store(As);
    lb.store(Bs);
  }
  __syncthreads();

  for (int kt = 0; kt < ktiles; ++kt) {
    const int cur = kt & 1;
    const bool more = kt + 1 < ktiles;
    if (more) load((kt + 1) * tc::BK);  // global -> registers, overlapping the MMAs
    const float* Ac = As + cur * TileA::SIZE;
    const float* Bc = Bs + cur * TileB::SIZE;
#pragma unroll
    for (int kk = 0; kk < tc::BK; kk += 8) {
      wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, LayoutA> fa[tc::FM];
      wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, LayoutB> fb[tc::FN];
#pragma unroll
      for (int i = 0; i < tc::FM; ++i)
        wmma::load_matrix_sync(fa[i], TileA::at(Ac, wm * tc::WM + 16 * i, kk), TileA::LD);
#pragma unroll
      for (int j = 0; j < tc::FN; ++j)
        wmma::load_matrix_sync(fb[j], TileB::at(Bc, wn * tc::WN + 16 * j, kk), TileB::LD);
#pragma unroll
      for (int i = 0; i < tc::FM; ++i)
#pragma unroll
        for (int j = 0; j < tc::FN; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    if (more) {  // the other buffer was last read in iteration kt-1, before the barrier
      la.store(As + (cur ^ 1) * TileA::SIZE);
      lb.store(Bs + (cur ^ 1) * TileB::SIZE);
    }
    __syncthreads();
  }

  // Epilogue (all tile reads finished at the last barrier): each warp stages one
  // 16x16 fragment at a time; lane covers column lane % 16, rows lane / 16 + 2 t.
  float* scratch = smem + warp * 16 * tc::LDE;
  const int lc = lane % 16, lr = lane / 16;
#pragma unroll
  for (int i = 0; i < tc::FM; ++i) {
#pragma unroll
    for (int j = 0; j < tc::FN; ++j) {
      wmma::store_matrix_sync(scratch, acc[i][j], tc::LDE, wmma::mem_row_major);
      __syncwarp();
      const int col = n0 + wn * tc::WN + 16 * j + lc;
#pragma unroll
      for (int t = 0; t < 8; ++t) {
        const int r = lr + 2 * t, row = m0 + wm * tc::WM + 16 * i + r;
        if (row < M && col < N) {
          const float v = scratch[r * tc::LDE + lc];
          float& c = C[int64_t(row) * ldc + col];
          c = beta == 0.f ? alpha * v : alpha * v + beta * c;
        }
      }
      __syncwarp();  // the next store_matrix_sync overwrites the scratch
    }
  }
#else
  __trap();  // unreachable: the host refuses devices below sm_80 (check_tf32_device)
#endif
}

// Calls launch(TA, TB) with the transposes as compile-time constants
// (std::bool_constant), for the kernels templated on them.
template <typename F>
void with_transposes(bool ta, bool tb, F&& launch) {
  using T0 = std::false_type;
  using T1 = std::true_type;
  if (!ta && !tb) launch(T0{}, T0{});
  else if (!ta) launch(T0{}, T1{});
  else if (!tb) launch(T1{}, T0{});
  else launch(T1{}, T1{});
}

template <bool VEC>
void launch_tf32(bool ta, bool tb, dim3 grid, int M, int N, int K, float alpha, const float* A,
                 int64_t lda, int64_t sa, const float* B, int64_t ldb, int64_t sb, float beta,
                 float* C, int64_t ldc, int64_t sc) {
  with_transposes(ta, tb, [&](auto TA, auto TB) {
    gemm_tf32_kernel<decltype(TA)::value, decltype(TB)::value, VEC>
        <<<grid, tc::THREADS, 0, mn::cuda::stream()>>>(M, N, K, alpha, A, lda, sa, B, ldb, sb, beta, C,
                                                       ldc, sc);
    CUDA_CHECK_LAUNCH("gemm_tf32_kernel");
  });
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

template <typename T, bool VEC>
void launch_tiled(bool ta, bool tb, dim3 grid, int M, int N, int K, T alpha, const T* A,
                  int64_t lda, int64_t sa, const T* B, int64_t ldb, int64_t sb, T beta, T* C,
                  int64_t ldc, int64_t sc) {
  with_transposes(ta, tb, [&](auto TA, auto TB) {
    gemm_tiled_kernel<T, decltype(TA)::value, decltype(TB)::value, VEC>
        <<<grid, THREADS, 0, mn::cuda::stream()>>>(M, N, K, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc);
    CUDA_CHECK_LAUNCH("gemm_tiled_kernel");
  });
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


// How many K-slices a single GEMM runs as (1: no split): mma::dense_split_k over a wave of
// SMs x blocks_per_sm (2 for the mma.sync kernel, whose 128-thread blocks fit two to an
// SM). Koch's dense layer at 150 rows: the forward (64 tiles, K 9216) 4 slices = 256
// blocks, 0.97 of a wave of 264; the backward-data (144 tiles, K 4096) 8 slices, 5 waves
// of 512-deep slices instead of 144 blocks of 4096 (0.55 of a wave).
int64_t split_k_count(int64_t M, int64_t N, int64_t K, int blocks_per_sm) {
  return mma::dense_split_k(M, N, K, int64_t(cuda_sm_count()) * std::max(1, blocks_per_sm));
}

// C = sum over s of part[s] (+ beta * C), summed in a fixed order (deterministic);
// beta == 0 never reads C.
template <typename T>
__global__ void gemm_sum_splits(const T* __restrict__ part, int s, int N, int64_t mn, T beta,
                                T* __restrict__ C, int64_t ldc) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < mn;
       i += int64_t(gridDim.x) * blockDim.x) {
    T acc = part[i];
    for (int b = 1; b < s; ++b) acc += part[int64_t(b) * mn + i];
    T& c = C[(i / N) * ldc + i % N];
    c = beta == T(0) ? acc : acc + beta * c;
  }
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
  // The precision only ever changes float, never inside an Fp32Scope (distances, miners,
  // losses), and never the Naive oracle. Tiled follows matmul_precision(); the
  // tensor-core variants force TF32 (or BF16 when that is the precision).
  Precision prec = Precision::FP32;
  if (std::is_same<T, float>::value && !fp32_forced()) {
    if (variant == CudaGemmVariant::TensorCoreTF32) prec = Precision::TF32;
    else if (variant == CudaGemmVariant::TensorCoreMma)
      prec = matmul_precision() == Precision::BF16 ? Precision::BF16 : Precision::TF32;
    else if (variant == CudaGemmVariant::Tiled) prec = matmul_precision();
  }
  // TF32 on the older WMMA kernel when asked for by name or with the mma.sync kernels off.
  const bool tf32 = prec == Precision::TF32 && (variant == CudaGemmVariant::TensorCoreTF32 ||
                                                (variant == CudaGemmVariant::Tiled && !cuda_speedups().tc_mma));
  const bool mma = prec != Precision::FP32 && !tf32;
  if (tf32) check_tf32_device(op);
  if (batch == 1 && variant != CudaGemmVariant::Naive && cuda_speedups().split_k) {
    if (const int64_t s = split_k_count(M, N, K, mma ? 2 : 1); s > 1) {
      // Split-K (CudaSpeedups in kernels/gemm_config.h): s GEMMs over K / s each, as one
      // batched launch into a scratch buffer (alpha applied there), then a fixed-order sum.
      const int64_t kc = K / s;
      int dev = 0;
      CUDA_CHECK(cudaGetDevice(&dev));
      Tensor part = Tensor::empty({s, M, N}, dtype_of<T>, Device::cuda(dev));
      gemm_cuda_impl<T>(op, ta, tb, s, M, N, kc, alpha, A, lda, ta ? kc * lda : kc, B, ldb,
                        tb ? kc : kc * ldb, T(0), part.template data<T>(), N, M * N);
      gemm_sum_splits<T><<<mn::cuda::grid_for(M * N), 256, 0, mn::cuda::stream()>>>(
          part.template data<T>(), int(s), int(N), M * N, beta, C, ldc);
      CUDA_CHECK_LAUNCH("gemm_sum_splits");
      return;
    }
  }
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
    } else if (mma) {
      if constexpr (std::is_same<T, float>::value)
        mma_gemm_cuda(prec, ta, tb, nb, M, N, K, alpha, Ab, lda, sa, Bb, ldb, sb, beta, Cb, ldc, sc);
    } else if (tf32) {
      if constexpr (std::is_same<T, float>::value) {
        const dim3 grid(static_cast<unsigned>((N + tc::BN - 1) / tc::BN),
                        static_cast<unsigned>((M + tc::BM - 1) / tc::BM), nb);
        MN_CHECK(grid.y <= 65535, op, ": M=", M, " too large for one launch");
        if (vec)
          launch_tf32<true>(ta, tb, grid, int(M), int(N), int(K), alpha, Ab, lda, sa, Bb, ldb, sb,
                            beta, Cb, ldc, sc);
        else
          launch_tf32<false>(ta, tb, grid, int(M), int(N), int(K), alpha, Ab, lda, sa, Bb, ldb, sb,
                             beta, Cb, ldc, sc);
      }
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

int cuda_sm_count() {
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  static std::atomic<int> cache[64] = {};
  int n = dev >= 0 && dev < 64 ? cache[dev].load() : 0;
  if (n == 0) {
    CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    if (dev >= 0 && dev < 64) cache[dev].store(n);
  }
  return n;
}

void check_tf32_device(const char* op) {
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  // Compute capability as major * 10 + minor, 0 = not asked yet (devices >= 64 are not cached).
  static std::atomic<int> cache[64] = {};
  int cc = dev >= 0 && dev < 64 ? cache[dev].load() : 0;
  if (cc == 0) {
    int major = 0, minor = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    cc = major * 10 + minor;
    if (dev >= 0 && dev < 64) cache[dev].store(cc);
  }
  MN_CHECK(cc >= 80, op,
           ": the TF32 tensor-core kernels need compute capability >= 8.0, but CUDA device ", dev,
           " is ", cc / 10, ".", cc % 10,
           "; turn TF32 off (set_allow_tf32(false), MN_ALLOW_TF32 unset)"
           " or select another GEMM variant");
}

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
