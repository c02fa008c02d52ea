// AVX-512 register-blocked GEMM micro-kernels (12x32 float, 12x16 double).
//
// This translation unit alone is compiled with -mavx512f -mavx512bw -mavx512vl
// -mavx512dq -mfma (per-file flags in CMakeLists.txt); the rest of the library
// stays baseline x86-64, and gemm.cpp calls these functions only when
// cpu_isa() (runtime/cpu_features.h) selects the avx512 path. Because of those
// flags this file must define nothing with external or vague (inline/template)
// linkage that another translation unit could also define: the linker could
// keep this file's AVX-512 copy of, say, an inline std:: helper and run it on a
// CPU without AVX-512. Hence only <immintrin.h> and gemm_internal.h (plain
// declarations and constants) are included, and every helper lives in an
// anonymous namespace.
//
// Per k step each kernel loads NR/W vectors of the packed B sliver and
// broadcasts MR values of the packed A sliver (folded into the FMA as an
// embedded broadcast): 24 zmm accumulators, 2 loads + 12 broadcasts per 24 FMAs.
// Each C element is summed over k in the same order, one fused multiply-add per
// step, with the same KC blocking as the AVX2 kernels, so the avx2 and avx512
// paths give the same sums; they can differ in the last bit only where K > KC
// (write-backs with beta == 1) and an element lies in an edge tile of one path
// (scalar write-back) but an interior tile of the other (fused write-back).
#include <immintrin.h>

#include "kernels/cpu/gemm_internal.h"

#if !defined(__AVX512F__) || !defined(__AVX512DQ__) || !defined(__FMA__)
#error "gemm_avx512.cpp must be compiled with -mavx512f -mavx512dq -mfma (see CMakeLists.txt)"
#endif

namespace mn::kernels::detail {
namespace {

struct VecF {
  using V = __m512;
  static constexpr int W = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_load_ps(p); }
  static V loadu(const float* p) { return _mm512_loadu_ps(p); }
  static void storeu(float* p, V v) { _mm512_storeu_ps(p, v); }
  static void store(float* p, V v) { _mm512_store_ps(p, v); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
};

struct VecD {
  using V = __m512d;
  static constexpr int W = 8;
  static V zero() { return _mm512_setzero_pd(); }
  static V load(const double* p) { return _mm512_load_pd(p); }
  static V loadu(const double* p) { return _mm512_loadu_pd(p); }
  static void storeu(double* p, V v) { _mm512_storeu_pd(p, v); }
  static void store(double* p, V v) { _mm512_store_pd(p, v); }
  static V set1(double x) { return _mm512_set1_pd(x); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_pd(a, b); }
};

// One full C row of NV vectors: C = alpha * acc + beta * C (beta == 0 never reads C).
// Same operation order as the AVX2 kernels' store_row_*.
template <typename Vec, typename T, int NV>
inline void store_row(T* c, const typename Vec::V* acc, typename Vec::V va, T beta) {
  for (int j = 0; j < NV; ++j) {
    T* cj = c + j * Vec::W;
    if (beta == T(0)) {
      Vec::storeu(cj, Vec::mul(va, acc[j]));
    } else if (beta == T(1)) {
      Vec::storeu(cj, Vec::fmadd(va, acc[j], Vec::loadu(cj)));
    } else {
      Vec::storeu(cj, Vec::fmadd(va, acc[j], Vec::mul(Vec::set1(beta), Vec::loadu(cj))));
    }
  }
}

template <typename Vec, typename T>
inline void ukernel(int64_t kc, const T* Ap, const T* Bp, T* C, int64_t ldc, T alpha, T beta,
                    int mr, int nr) {
  constexpr int MR = GemmTile512<T>::MR, NR = GemmTile512<T>::NR, NV = NR / Vec::W;
  static_assert(NR % Vec::W == 0, "NR must be a whole number of vectors");
  using V = typename Vec::V;
  V acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[i][j] = Vec::zero();
  // The C tile is read at the end; start fetching it now (it is often in L3).
  for (int i = 0; i < mr; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(C + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(C + i * ldc + NR - 1), _MM_HINT_T0);
  }
  for (int64_t k = 0; k < kc; ++k) {
    V b[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) b[j] = Vec::load(Bp + j * Vec::W);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const V a = Vec::set1(Ap[i]);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] = Vec::fmadd(a, b[j], acc[i][j]);
    }
    Ap += MR;
    Bp += NR;
  }
  const V va = Vec::set1(alpha);
  if (mr == MR && nr == NR) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) store_row<Vec, T, NV>(C + i * ldc, acc[i], va, beta);
    return;
  }
  // Edge tile: spill the accumulators, write back only the valid mr x nr part.
  alignas(64) T tmp[MR * NR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) Vec::store(tmp + i * NR + j * Vec::W, acc[i][j]);
  for (int i = 0; i < mr; ++i) {
    T* c = C + i * ldc;
    const T* t = tmp + i * NR;
    if (beta == T(0)) {
      for (int j = 0; j < nr; ++j) c[j] = alpha * t[j];
    } else {
      // As the AVX2 kernels' edge write-back (not contracted: -std=c++17 implies
      // -ffp-contract=off).
      for (int j = 0; j < nr; ++j) c[j] = alpha * t[j] + beta * c[j];
    }
  }
}

}  // namespace

void gemm_ukernel_avx512(int64_t kc, const float* Ap, const float* Bp, float* C, int64_t ldc,
                         float alpha, float beta, int mr, int nr) {
  ukernel<VecF, float>(kc, Ap, Bp, C, ldc, alpha, beta, mr, nr);
}

void gemm_ukernel_avx512(int64_t kc, const double* Ap, const double* Bp, double* C, int64_t ldc,
                         double alpha, double beta, int mr, int nr) {
  ukernel<VecD, double>(kc, Ap, Bp, C, ldc, alpha, beta, mr, nr);
}

}  // namespace mn::kernels::detail
