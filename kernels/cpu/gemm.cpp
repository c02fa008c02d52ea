// CPU GEMM: C = alpha * op(A) * op(B) + beta * C, row-major, float and double.
//
// Goto/BLIS structure (see kernels/gemm_config.h for the numbered variants):
//   for jc over N in NC columns:
//     for pc over K in KC steps:          (beta applies on the first step only)
//       pack B[pc:pc+kc, jc:jc+nc] into NR-wide slivers      (parallel over slivers)
//       parallel over tasks = (MC row block) x (chunk of B slivers):
//         pack A[ic:ic+mc, pc:pc+kc] into MR-tall slivers    (per thread, L2 resident)
//         for each B sliver (L1 resident) in the chunk, for each A sliver:
//           micro-kernel MR x NR  (AVX-512, AVX2+FMA intrinsics or portable C++)
// The micro-kernel (and its MR x NR tile) is chosen per call from cpu_isa()
// (runtime/cpu_features.h: CPUID, or MN_CPU_ISA=scalar|avx2|avx512).
// Packing applies the transposes, so the micro-kernels see one layout. Edge
// slivers are zero-padded and the micro-kernel writes back only the valid part.
// Tiny problems and variant 1 use the textbook loop (the oracle).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include <xmmintrin.h>  // SSE: part of baseline x86-64

#include "kernels/cpu/gemm_internal.h"
#include "kernels/cpu/gemm.h"
#include "kernels/gemm_config.h"
#include "runtime/cpu_features.h"
#include "runtime/error.h"
#include "runtime/parallel.h"

namespace mn::kernels {

// ---- variant selection ------------------------------------------------------

namespace {
std::atomic<int> g_cpu_variant{static_cast<int>(CpuGemmVariant::Auto)};
}  // namespace

bool cpu_has_avx2_fma() { return cpu_features().avx2_fma; }
bool cpu_has_avx512() { return cpu_features().avx512; }

void set_cpu_gemm_variant(CpuGemmVariant v) {
  MN_CHECK(v != CpuGemmVariant::PackedAvx2 || cpu_has_avx2_fma(),
           "set_cpu_gemm_variant: PackedAvx2 requested but this CPU lacks AVX2/FMA");
  MN_CHECK(v != CpuGemmVariant::PackedAvx512 || cpu_has_avx512(),
           "set_cpu_gemm_variant: PackedAvx512 requested but this CPU lacks AVX-512 F/BW/VL/DQ");
  g_cpu_variant.store(static_cast<int>(v));
}
CpuGemmVariant cpu_gemm_variant() { return static_cast<CpuGemmVariant>(g_cpu_variant.load()); }

namespace {


// ---- blocking parameters ------------------------------------------------------
// KC*NR*sizeof(T) (one B sliver, 16 KiB) stays in L1; MC*KC*sizeof(T) (one packed
// A block, <= 144 KiB) in L2; KC*NC*sizeof(T) (the packed B panel) in L3.
template <typename T>
struct Blocking;
template <>
struct Blocking<float> {
  static constexpr int64_t KC = 256, MC = 144, NC = 4096;
};
template <>
struct Blocking<double> {
  static constexpr int64_t KC = 256, MC = 72, NC = 2048;
};

// 64-byte aligned scratch that grows on demand; one per thread and role.
template <typename T>
struct AlignedBuffer {
  T* ptr = nullptr;
  size_t cap = 0;
  ~AlignedBuffer() { std::free(ptr); }
  T* get(size_t n) {
    if (n > cap) {
      std::free(ptr);
      size_t bytes = ((n * sizeof(T) + 63) / 64) * 64;
      ptr = static_cast<T*>(std::aligned_alloc(64, bytes));
      MN_CHECK(ptr != nullptr, "gemm_cpu: out of memory for a ", bytes, "-byte packing buffer");
      cap = n;
    }
    return ptr;
  }
};

// ---- variant 1: the textbook loop (oracle) -------------------------------------
template <typename T>
void gemm_reference(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                    int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      T acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        T a = ta ? A[k * lda + i] : A[i * lda + k];
        T b = tb ? B[j * ldb + k] : B[k * ldb + j];
        acc += a * b;
      }
      T& c = C[i * ldc + j];
      c = beta == T(0) ? alpha * acc : alpha * acc + beta * c;
    }
  }
}

// ---- variant 2: the portable micro-kernel --------------------------------------
// A fixed-size accumulator array the compiler keeps in vector registers
// (SSE2 at the baseline target); same packed layout as the AVX2 kernels.
template <typename T>
void gemm_ukernel_portable(int64_t kc, const T* Ap, const T* Bp, T* C, int64_t ldc, T alpha,
                           T beta, int mr, int nr) {
  constexpr int MR = detail::GemmTile<T>::MR, NR = detail::GemmTile<T>::NR;
  alignas(64) T acc[MR][NR] = {};
  for (int64_t k = 0; k < kc; ++k) {
    const T* a = Ap + k * MR;
    const T* b = Bp + k * NR;
    for (int i = 0; i < MR; ++i) {
      const T ai = a[i];
      for (int j = 0; j < NR; ++j) acc[i][j] += ai * b[j];
    }
  }
  for (int i = 0; i < mr; ++i) {
    T* c = C + i * ldc;
    if (beta == T(0)) {
      for (int j = 0; j < nr; ++j) c[j] = alpha * acc[i][j];
    } else {
      for (int j = 0; j < nr; ++j) c[j] = alpha * acc[i][j] + beta * c[j];
    }
  }
}

// ---- packing ----------------------------------------------------------------------
// Where op(A) or op(B) comes from: a strided matrix (transposed or not), or a row
// source (detail::GemmRows) that writes any part of a row of op(X) on demand, so
// that a convolution packs straight from its input without an im2col buffer.
template <typename T>
struct Operand {
  const T* p = nullptr;
  int64_t ld = 0;
  bool trans = false;
  detail::GemmRows<T> rows{};
  bool is_rows() const { return rows.fill != nullptr; }
};

// Scratch for one row segment of a row source: at most max(KC, NC) elements.
template <typename T>
T* row_scratch(int64_t n) {
  thread_local AlignedBuffer<T> buf;
  return buf.get(static_cast<size_t>(n));
}

// A block rows [i0, i0+mc), depth [p0, p0+kc) -> ceil(mc/MR) slivers, Ap[s*MR*kc + k*MR + i].
template <typename T, int MR>
void pack_a(const Operand<T>& a, int64_t i0, int64_t mc, int64_t p0, int64_t kc, T* Ap) {
  const bool ta = a.trans;
  const T* A = a.p;
  const int64_t lda = a.ld;
  for (int64_t ir = 0; ir < mc; ir += MR) {
    const int mr = static_cast<int>(std::min<int64_t>(MR, mc - ir));
    T* dst = Ap + ir * kc;
    if (a.is_rows()) {  // row i of op(A), columns [p0, p0+kc), from the row source
      T* row = row_scratch<T>(kc);
      for (int i = 0; i < mr; ++i) {
        a.rows.fill(a.rows.ctx, i0 + ir + i, p0, kc, row);
        for (int64_t k = 0; k < kc; ++k) dst[k * MR + i] = row[k];
      }
      for (int i = mr; i < MR; ++i)
        for (int64_t k = 0; k < kc; ++k) dst[k * MR + i] = T(0);
    } else if (!ta) {  // A is (M, K): row i is contiguous in k
      for (int i = 0; i < mr; ++i) {
        const T* src = A + (i0 + ir + i) * lda + p0;
        for (int64_t k = 0; k < kc; ++k) dst[k * MR + i] = src[k];
      }
      for (int i = mr; i < MR; ++i)
        for (int64_t k = 0; k < kc; ++k) dst[k * MR + i] = T(0);
    } else {  // A is (K, M): column k is contiguous in i
      for (int64_t k = 0; k < kc; ++k) {
        const T* src = A + (p0 + k) * lda + i0 + ir;
        T* d = dst + k * MR;
        int i = 0;
        for (; i < mr; ++i) d[i] = src[i];
        for (; i < MR; ++i) d[i] = T(0);
      }
    }
  }
}

// One full sliver of a transposed float B: rows [0, NR) of B (N, K), depth
// [0, kc) from `src` (row j at src + j*ldb) -> dst[k*NR + j]. The scalar
// version wrote one element per 64-byte line per k and ran at ~9 GFLOP/s for
// the dense layer's forward (M = 12 rows against a 4096 x 9216 weight).
template <int NR>
void pack_b_trans_f32(const float* src, int64_t ldb, int64_t kc, float* dst) {
  static_assert(NR % 4 == 0, "NR must be a multiple of 4");
  int64_t k = 0;
  for (; k + 4 <= kc; k += 4) {
    for (int j = 0; j < NR; j += 4) {
      __m128 r0 = _mm_loadu_ps(src + (j + 0) * ldb + k);
      __m128 r1 = _mm_loadu_ps(src + (j + 1) * ldb + k);
      __m128 r2 = _mm_loadu_ps(src + (j + 2) * ldb + k);
      __m128 r3 = _mm_loadu_ps(src + (j + 3) * ldb + k);
      _MM_TRANSPOSE4_PS(r0, r1, r2, r3);  // r_t = column k+t of rows j..j+3
      _mm_storeu_ps(dst + (k + 0) * NR + j, r0);
      _mm_storeu_ps(dst + (k + 1) * NR + j, r1);
      _mm_storeu_ps(dst + (k + 2) * NR + j, r2);
      _mm_storeu_ps(dst + (k + 3) * NR + j, r3);
    }
  }
  for (; k < kc; ++k)
    for (int j = 0; j < NR; ++j) dst[k * NR + j] = src[j * ldb + k];
}

// B slivers [s0, s1) of the panel starting at column j0 (nc wide), depth [p0, p0+kc)
// -> Bp[s*NR*kc + k*NR + j].
template <typename T, int NR>
void pack_b(const Operand<T>& b, int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t s0,
            int64_t s1, T* Bp) {
  const bool tb = b.trans;
  const T* B = b.p;
  const int64_t ldb = b.ld;
  if (b.is_rows()) {
    // Row k of op(B), for a group of G slivers at a time, is written into an
    // L1-resident scratch row and copied into the slivers; groups (as for a
    // strided B below) keep the number of sliver write streams small.
    constexpr int64_t G = 8;
    T* row = row_scratch<T>(G * NR);
    for (int64_t g0 = s0; g0 < s1; g0 += G) {
      const int64_t g1 = std::min(s1, g0 + G);
      const int64_t c0 = g0 * NR, c1 = std::min(nc, g1 * NR);  // columns of the group
      for (int64_t k = 0; k < kc; ++k) {
        b.rows.fill(b.rows.ctx, p0 + k, j0 + c0, c1 - c0, row);
        for (int64_t s = g0; s < g1; ++s) {
          const int64_t jr = s * NR;
          const T* src = row + (jr - c0);
          T* d = Bp + jr * kc + k * NR;
          if (jr + NR <= nc) {
            std::memcpy(d, src, sizeof(T) * NR);
          } else {
            const int nr = static_cast<int>(nc - jr);
            int j = 0;
            for (; j < nr; ++j) d[j] = src[j];
            for (; j < NR; ++j) d[j] = T(0);
          }
        }
      }
    }
    return;
  }
  if (!tb) {
    // B is (K, N): walk groups of 8 slivers row by row, so each row of B is read
    // as 8*NR contiguous elements (one sliver at a time would touch a new page
    // per k row for wide B and defeat the hardware prefetcher).
    constexpr int64_t G = 8;
    for (int64_t g0 = s0; g0 < s1; g0 += G) {
      const int64_t g1 = std::min(s1, g0 + G);
      const bool full = g1 * NR <= nc;
      for (int64_t k = 0; k < kc; ++k) {
        const T* src = B + (p0 + k) * ldb + j0;
        for (int64_t s = g0; s < g1; ++s) {
          const int64_t jr = s * NR;
          T* d = Bp + jr * kc + k * NR;
          if (full) {
            std::memcpy(d, src + jr, sizeof(T) * NR);
          } else {
            const int nr = static_cast<int>(std::min<int64_t>(NR, nc - jr));
            int j = 0;
            for (; j < nr; ++j) d[j] = src[jr + j];
            for (; j < NR; ++j) d[j] = T(0);
          }
        }
      }
    }
    return;
  }
  for (int64_t s = s0; s < s1; ++s) {
    const int64_t jr = s * NR;
    const int nr = static_cast<int>(std::min<int64_t>(NR, nc - jr));
    T* dst = Bp + jr * kc;
    // B is (N, K): column j of op(B) is contiguous in k.
    if constexpr (std::is_same_v<T, float>) {
      if (nr == NR) {  // 4x4 SSE transposes (baseline x86-64): ~10x the scalar scatter
        pack_b_trans_f32<NR>(B + (j0 + jr) * ldb + p0, ldb, kc, dst);
        continue;
      }
    }
    for (int j = 0; j < nr; ++j) {
      const T* src = B + (j0 + jr + j) * ldb + p0;
      for (int64_t k = 0; k < kc; ++k) dst[k * NR + j] = src[k];
    }
    for (int j = nr; j < NR; ++j)
      for (int64_t k = 0; k < kc; ++k) dst[k * NR + j] = T(0);
  }
}

// ---- variants 2/3: the blocked driver ------------------------------------------------
template <typename T, int MR, int NR>
void gemm_packed(const Operand<T>& a, const Operand<T>& b, int64_t M, int64_t N, int64_t K,
                 T alpha, T beta, T* C, int64_t ldc, detail::GemmMicroKernel<T> ukernel) {
  constexpr int64_t KC = Blocking<T>::KC, NC = Blocking<T>::NC;
  const int64_t nthreads = num_threads();

  // Row blocks of whole MR-row slivers, at most MC rows, as equal as slivers allow,
  // and as many blocks as whole rounds over the threads: 2048 rows on 2 threads
  // used to be 14 blocks of 144 rows and one of 32, so one thread did 1152 rows
  // and the other 1040 (89 % of both cores); 16 blocks of 10 or 11 slivers now.
  // Which rows share a block does not change any sum: results are bit-identical.
  if (M == 0 || N == 0) return;
  constexpr int64_t kSliversPerBlock = std::max<int64_t>(1, Blocking<T>::MC / MR);
  const int64_t n_rs = (M + MR - 1) / MR;
  int64_t n_ib = (n_rs + kSliversPerBlock - 1) / kSliversPerBlock;
  if (n_ib >= nthreads) n_ib = std::min(n_rs, (n_ib + nthreads - 1) / nthreads * nthreads);
  const int64_t mc_blk = (n_rs + n_ib - 1) / n_ib * MR;  // the tallest block
  auto block_rows = [&](int64_t ib, int64_t* ic, int64_t* mc) {
    *ic = ib * n_rs / n_ib * MR;
    *mc = std::min(M, (ib + 1) * n_rs / n_ib * MR) - *ic;
  };

  thread_local AlignedBuffer<T> b_buf;
  for (int64_t jc = 0; jc < N; jc += NC) {
    const int64_t nc = std::min(NC, N - jc);
    const int64_t n_slivers = (nc + NR - 1) / NR;
    // Split the slivers into chunks so that there are >= 4 tasks per thread when
    // the row blocks alone are too few (e.g. M = 150 with N = 4096).
    int64_t n_jb = std::max<int64_t>(1, (4 * nthreads + n_ib - 1) / n_ib);
    n_jb = std::min(n_jb, n_slivers);
    const int64_t slivers_per_jb = (n_slivers + n_jb - 1) / n_jb;
    n_jb = (n_slivers + slivers_per_jb - 1) / slivers_per_jb;

    for (int64_t pc = 0; pc < K; pc += KC) {
      const int64_t kc = std::min(KC, K - pc);
      const T beta_eff = pc == 0 ? beta : T(1);
      T* Bp = b_buf.get(static_cast<size_t>(n_slivers * NR * kc));
      // Packing moves kc*NR elements per sliver; a few slivers per chunk is enough.
      parallel_for(0, n_slivers, std::max<int64_t>(1, 16384 / (kc * NR)),
                   [&](int64_t s0, int64_t s1) { pack_b<T, NR>(b, pc, kc, jc, nc, s0, s1, Bp); });

      parallel_for(0, n_ib * n_jb, 1, [&](int64_t t0, int64_t t1) {
        thread_local AlignedBuffer<T> a_buf;
        T* Ap = a_buf.get(static_cast<size_t>(mc_blk * kc));
        int64_t packed_ib = -1;
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t ib = t / n_jb, jb = t % n_jb;
          int64_t ic = 0, mc = 0;
          block_rows(ib, &ic, &mc);
          if (ib != packed_ib) {
            pack_a<T, MR>(a, ic, mc, pc, kc, Ap);
            packed_ib = ib;
          }
          const int64_t s_end = std::min(n_slivers, (jb + 1) * slivers_per_jb);
          for (int64_t s = jb * slivers_per_jb; s < s_end; ++s) {
            const int64_t jr = s * NR;
            const int nr = static_cast<int>(std::min<int64_t>(NR, nc - jr));
            const T* bs = Bp + jr * kc;
            for (int64_t ir = 0; ir < mc; ir += MR) {
              const int mr = static_cast<int>(std::min<int64_t>(MR, mc - ir));
              ukernel(kc, Ap + ir * kc, bs, C + (ic + ir) * ldc + jc + jr, ldc, alpha, beta_eff,
                      mr, nr);
            }
          }
        }
      });
    }
  }
}

// C = beta * C (beta == 0 writes zeros without reading): the K == 0 / alpha == 0 case.
template <typename T>
void scale_c(int64_t M, int64_t N, T beta, T* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    T* c = C + i * ldc;
    if (beta == T(0)) {
      for (int64_t j = 0; j < N; ++j) c[j] = T(0);
    } else if (beta != T(1)) {
      for (int64_t j = 0; j < N; ++j) c[j] *= beta;
    }
  }
}

template <typename T>
void check_args(const char* op, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* A,
                int64_t lda, const T* B, int64_t ldb, const T* C, int64_t ldc) {
  MN_CHECK(M >= 0 && N >= 0 && K >= 0, op, ": negative size M=", M, " N=", N, " K=", K);
  MN_CHECK(lda >= std::max<int64_t>(1, ta ? M : K), op, ": lda=", lda, " too small for ",
           ta ? "trans(A)" : "A", " with M=", M, " K=", K);
  MN_CHECK(ldb >= std::max<int64_t>(1, tb ? K : N), op, ": ldb=", ldb, " too small for ",
           tb ? "trans(B)" : "B", " with K=", K, " N=", N);
  MN_CHECK(ldc >= std::max<int64_t>(1, N), op, ": ldc=", ldc, " < N=", N);
  MN_CHECK(M == 0 || N == 0 || C != nullptr, op, ": C is null");
  MN_CHECK(M == 0 || N == 0 || K == 0 || (A != nullptr && B != nullptr), op, ": A or B is null");
}

// The packed variant for the current selection (Auto: by cpu_isa()).
CpuGemmVariant packed_variant(CpuGemmVariant v) {
  if (v != CpuGemmVariant::Auto && v != CpuGemmVariant::Reference) return v;
  switch (cpu_isa()) {
    case CpuIsa::Avx512: return CpuGemmVariant::PackedAvx512;
    case CpuIsa::Avx2: return CpuGemmVariant::PackedAvx2;
    default: return CpuGemmVariant::PackedPortable;
  }
}

template <typename T>
void run_packed(CpuGemmVariant v, const Operand<T>& a, const Operand<T>& b, int64_t M, int64_t N,
                int64_t K, T alpha, T beta, T* C, int64_t ldc) {
  using Tile = detail::GemmTile<T>;
  using Tile512 = detail::GemmTile512<T>;
  switch (v) {
    case CpuGemmVariant::PackedAvx512:
      gemm_packed<T, Tile512::MR, Tile512::NR>(a, b, M, N, K, alpha, beta, C, ldc,
                                               &detail::gemm_ukernel_avx512);
      break;
    case CpuGemmVariant::PackedAvx2:
      gemm_packed<T, Tile::MR, Tile::NR>(a, b, M, N, K, alpha, beta, C, ldc,
                                         &detail::gemm_ukernel_avx2);
      break;
    default:
      gemm_packed<T, Tile::MR, Tile::NR>(a, b, M, N, K, alpha, beta, C, ldc,
                                         &gemm_ukernel_portable<T>);
      break;
  }
}

}  // namespace

template <typename T>
void gemm_cpu(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
              int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  check_args("gemm_cpu", trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc);
  if (M == 0 || N == 0) return;
  if (K == 0 || alpha == T(0)) {
    scale_c(M, N, beta, C, ldc);
    return;
  }
  const CpuGemmVariant v = cpu_gemm_variant();
  // Below ~16^3 multiply-adds packing costs more than it saves.
  if (v == CpuGemmVariant::Reference || (v == CpuGemmVariant::Auto && M * N * K <= 4096)) {
    gemm_reference(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  Operand<T> a, b;
  a.p = A, a.ld = lda, a.trans = trans_a;
  b.p = B, b.ld = ldb, b.trans = trans_b;
  run_packed(packed_variant(v), a, b, M, N, K, alpha, beta, C, ldc);
}

namespace detail {
// Row-source products (kernels/cpu/gemm_internal.h). The Reference selection has
// no row-source loop; it runs the portable packed kernel, itself tested against
// the reference.
template <typename T>
void gemm_cpu_rows_b(bool trans_a, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                     int64_t lda, GemmRows<T> b_rows, T beta, T* C, int64_t ldc) {
  MN_CHECK(M >= 0 && N >= 0 && K >= 0 && b_rows.fill != nullptr, "gemm_cpu_rows_b: bad arguments M=",
           M, " N=", N, " K=", K);
  if (M == 0 || N == 0) return;
  if (K == 0 || alpha == T(0)) return scale_c(M, N, beta, C, ldc);
  Operand<T> a, b;
  a.p = A, a.ld = lda, a.trans = trans_a;
  b.rows = b_rows;
  run_packed(packed_variant(cpu_gemm_variant()), a, b, M, N, K, alpha, beta, C, ldc);
}

template <typename T>
void gemm_cpu_rows_a(GemmRows<T> a_rows, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha,
                     const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  MN_CHECK(M >= 0 && N >= 0 && K >= 0 && a_rows.fill != nullptr, "gemm_cpu_rows_a: bad arguments M=",
           M, " N=", N, " K=", K);
  if (M == 0 || N == 0) return;
  if (K == 0 || alpha == T(0)) return scale_c(M, N, beta, C, ldc);
  Operand<T> a, b;
  a.rows = a_rows;
  b.p = B, b.ld = ldb, b.trans = trans_b;
  run_packed(packed_variant(cpu_gemm_variant()), a, b, M, N, K, alpha, beta, C, ldc);
}

template void gemm_cpu_rows_b<float>(bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                                     GemmRows<float>, float, float*, int64_t);
template void gemm_cpu_rows_b<double>(bool, int64_t, int64_t, int64_t, double, const double*,
                                      int64_t, GemmRows<double>, double, double*, int64_t);
template void gemm_cpu_rows_a<float>(GemmRows<float>, bool, int64_t, int64_t, int64_t, float,
                                     const float*, int64_t, float, float*, int64_t);
template void gemm_cpu_rows_a<double>(GemmRows<double>, bool, int64_t, int64_t, int64_t, double,
                                      const double*, int64_t, double, double*, int64_t);
}  // namespace detail

template <typename T>
void gemm_batched_cpu(bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K,
                      T alpha, const T* A, int64_t lda, int64_t stride_a, const T* B, int64_t ldb,
                      int64_t stride_b, T beta, T* C, int64_t ldc, int64_t stride_c) {
  MN_CHECK(batch >= 0, "gemm_batched_cpu: negative batch ", batch);
  if (batch == 0 || M == 0 || N == 0) return;
  // Many small products: one per thread (the nested gemm_cpu runs serially).
  // Few or large ones: in turn, each using the whole pool.
  const bool per_matrix = batch >= 2 * num_threads() && M * N * K <= (int64_t(1) << 24);
  auto one = [&](int64_t b) {
    gemm_cpu<T>(trans_a, trans_b, M, N, K, alpha, A + b * stride_a, lda, B + b * stride_b, ldb,
                beta, C + b * stride_c, ldc);
  };
  if (per_matrix) {
    parallel_for(0, batch, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) one(b);
    });
  } else {
    for (int64_t b = 0; b < batch; ++b) one(b);
  }
}

#define MN_INSTANTIATE_GEMM_CPU(T)                                                              \
  template void gemm_cpu<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t,       \
                            const T*, int64_t, T, T*, int64_t);                                \
  template void gemm_batched_cpu<T>(bool, bool, int64_t, int64_t, int64_t, int64_t, T,         \
                                    const T*, int64_t, int64_t, const T*, int64_t, int64_t, T, \
                                    T*, int64_t, int64_t);
MN_INSTANTIATE_GEMM_CPU(float)
MN_INSTANTIATE_GEMM_CPU(double)
#undef MN_INSTANTIATE_GEMM_CPU

}  // namespace mn::kernels
