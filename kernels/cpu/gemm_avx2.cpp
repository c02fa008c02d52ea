// AVX2+FMA register-blocked GEMM micro-kernels (6x16 float, 6x8 double).
//
// Compiled for the baseline target like the rest of the library: only these
// functions carry __attribute__((target("avx2,fma"))), and the driver in
// gemm.cpp calls them only after a run-time __builtin_cpu_supports check, so
// the binary still runs on CPUs without AVX2.
//
// Each kernel keeps the whole MR x NR accumulator tile in 12 ymm registers; per
// k step it loads two vectors of the packed B sliver, broadcasts the MR values
// of the packed A sliver and issues 12 FMAs (2 loads + 6 broadcasts per 12 FMAs).
#include <immintrin.h>

#include "kernels/cpu/gemm_internal.h"

namespace mn::kernels::detail {
namespace {

// Scalar write-back of a partial (edge) tile from a full tile computed in tmp.
template <typename T, int NR>
void store_partial(const T* tmp, T* C, int64_t ldc, T alpha, T beta, int mr, int nr) {
  for (int i = 0; i < mr; ++i) {
    T* c = C + i * ldc;
    const T* t = tmp + i * NR;
    if (beta == T(0)) {
      for (int j = 0; j < nr; ++j) c[j] = alpha * t[j];
    } else {
      for (int j = 0; j < nr; ++j) c[j] = alpha * t[j] + beta * c[j];
    }
  }
}

__attribute__((target("avx2,fma"))) inline void store_row_ps(float* c, __m256 v, __m256 va,
                                                             float beta) {
  if (beta == 0.0f) {
    _mm256_storeu_ps(c, _mm256_mul_ps(va, v));
  } else if (beta == 1.0f) {
    _mm256_storeu_ps(c, _mm256_fmadd_ps(va, v, _mm256_loadu_ps(c)));
  } else {
    __m256 vb = _mm256_set1_ps(beta);
    _mm256_storeu_ps(c, _mm256_fmadd_ps(va, v, _mm256_mul_ps(vb, _mm256_loadu_ps(c))));
  }
}

__attribute__((target("avx2,fma"))) inline void store_row_pd(double* c, __m256d v, __m256d va,
                                                             double beta) {
  if (beta == 0.0) {
    _mm256_storeu_pd(c, _mm256_mul_pd(va, v));
  } else if (beta == 1.0) {
    _mm256_storeu_pd(c, _mm256_fmadd_pd(va, v, _mm256_loadu_pd(c)));
  } else {
    __m256d vb = _mm256_set1_pd(beta);
    _mm256_storeu_pd(c, _mm256_fmadd_pd(va, v, _mm256_mul_pd(vb, _mm256_loadu_pd(c))));
  }
}

}  // namespace

__attribute__((target("avx2,fma"))) void gemm_ukernel_avx2(int64_t kc, const float* Ap,
                                                           const float* Bp, float* C, int64_t ldc,
                                                           float alpha, float beta, int mr,
                                                           int nr) {
  constexpr int MR = GemmTile<float>::MR, NR = GemmTile<float>::NR;
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
  __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
  __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  // The C tile is read at the end; start fetching it now (it is often in L3).
  for (int i = 0; i < mr; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(C + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(C + i * ldc + NR - 1), _MM_HINT_T0);
  }
#define MN_GEMM_STEP_PS(koff)                                         \
  {                                                                   \
    const __m256 b0 = _mm256_load_ps(Bp + (koff) * NR);               \
    const __m256 b1 = _mm256_load_ps(Bp + (koff) * NR + 8);           \
    const float* a = Ap + (koff) * MR;                                \
    __m256 a0 = _mm256_broadcast_ss(a + 0);                           \
    __m256 a1 = _mm256_broadcast_ss(a + 1);                           \
    c00 = _mm256_fmadd_ps(a0, b0, c00);                               \
    c01 = _mm256_fmadd_ps(a0, b1, c01);                               \
    c10 = _mm256_fmadd_ps(a1, b0, c10);                               \
    c11 = _mm256_fmadd_ps(a1, b1, c11);                               \
    a0 = _mm256_broadcast_ss(a + 2);                                  \
    a1 = _mm256_broadcast_ss(a + 3);                                  \
    c20 = _mm256_fmadd_ps(a0, b0, c20);                               \
    c21 = _mm256_fmadd_ps(a0, b1, c21);                               \
    c30 = _mm256_fmadd_ps(a1, b0, c30);                               \
    c31 = _mm256_fmadd_ps(a1, b1, c31);                               \
    a0 = _mm256_broadcast_ss(a + 4);                                  \
    a1 = _mm256_broadcast_ss(a + 5);                                  \
    c40 = _mm256_fmadd_ps(a0, b0, c40);                               \
    c41 = _mm256_fmadd_ps(a0, b1, c41);                               \
    c50 = _mm256_fmadd_ps(a1, b0, c50);                               \
    c51 = _mm256_fmadd_ps(a1, b1, c51);                               \
  }
  int64_t k = 0;
  for (; k + 4 <= kc; k += 4) {
    _mm_prefetch(reinterpret_cast<const char*>(Bp + 8 * NR), _MM_HINT_T0);
    MN_GEMM_STEP_PS(0) MN_GEMM_STEP_PS(1) MN_GEMM_STEP_PS(2) MN_GEMM_STEP_PS(3)
    Ap += 4 * MR;
    Bp += 4 * NR;
  }
  for (; k < kc; ++k) {
    MN_GEMM_STEP_PS(0)
    Ap += MR;
    Bp += NR;
  }
#undef MN_GEMM_STEP_PS
  const __m256 va = _mm256_set1_ps(alpha);
  if (mr == MR && nr == NR) {
    store_row_ps(C + 0 * ldc, c00, va, beta), store_row_ps(C + 0 * ldc + 8, c01, va, beta);
    store_row_ps(C + 1 * ldc, c10, va, beta), store_row_ps(C + 1 * ldc + 8, c11, va, beta);
    store_row_ps(C + 2 * ldc, c20, va, beta), store_row_ps(C + 2 * ldc + 8, c21, va, beta);
    store_row_ps(C + 3 * ldc, c30, va, beta), store_row_ps(C + 3 * ldc + 8, c31, va, beta);
    store_row_ps(C + 4 * ldc, c40, va, beta), store_row_ps(C + 4 * ldc + 8, c41, va, beta);
    store_row_ps(C + 5 * ldc, c50, va, beta), store_row_ps(C + 5 * ldc + 8, c51, va, beta);
    return;
  }
  alignas(32) float tmp[MR * NR];
  _mm256_store_ps(tmp + 0 * NR, c00), _mm256_store_ps(tmp + 0 * NR + 8, c01);
  _mm256_store_ps(tmp + 1 * NR, c10), _mm256_store_ps(tmp + 1 * NR + 8, c11);
  _mm256_store_ps(tmp + 2 * NR, c20), _mm256_store_ps(tmp + 2 * NR + 8, c21);
  _mm256_store_ps(tmp + 3 * NR, c30), _mm256_store_ps(tmp + 3 * NR + 8, c31);
  _mm256_store_ps(tmp + 4 * NR, c40), _mm256_store_ps(tmp + 4 * NR + 8, c41);
  _mm256_store_ps(tmp + 5 * NR, c50), _mm256_store_ps(tmp + 5 * NR + 8, c51);
  store_partial<float, NR>(tmp, C, ldc, alpha, beta, mr, nr);
}

__attribute__((target("avx2,fma"))) void gemm_ukernel_avx2(int64_t kc, const double* Ap,
                                                           const double* Bp, double* C,
                                                           int64_t ldc, double alpha, double beta,
                                                           int mr, int nr) {
  constexpr int MR = GemmTile<double>::MR, NR = GemmTile<double>::NR;
  __m256d c00 = _mm256_setzero_pd(), c01 = _mm256_setzero_pd();
  __m256d c10 = _mm256_setzero_pd(), c11 = _mm256_setzero_pd();
  __m256d c20 = _mm256_setzero_pd(), c21 = _mm256_setzero_pd();
  __m256d c30 = _mm256_setzero_pd(), c31 = _mm256_setzero_pd();
  __m256d c40 = _mm256_setzero_pd(), c41 = _mm256_setzero_pd();
  __m256d c50 = _mm256_setzero_pd(), c51 = _mm256_setzero_pd();
  for (int i = 0; i < mr; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(C + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(C + i * ldc + NR - 1), _MM_HINT_T0);
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m256d b0 = _mm256_load_pd(Bp);
    const __m256d b1 = _mm256_load_pd(Bp + 4);
    __m256d a0 = _mm256_broadcast_sd(Ap + 0), a1 = _mm256_broadcast_sd(Ap + 1);
    c00 = _mm256_fmadd_pd(a0, b0, c00), c01 = _mm256_fmadd_pd(a0, b1, c01);
    c10 = _mm256_fmadd_pd(a1, b0, c10), c11 = _mm256_fmadd_pd(a1, b1, c11);
    a0 = _mm256_broadcast_sd(Ap + 2), a1 = _mm256_broadcast_sd(Ap + 3);
    c20 = _mm256_fmadd_pd(a0, b0, c20), c21 = _mm256_fmadd_pd(a0, b1, c21);
    c30 = _mm256_fmadd_pd(a1, b0, c30), c31 = _mm256_fmadd_pd(a1, b1, c31);
    a0 = _mm256_broadcast_sd(Ap + 4), a1 = _mm256_broadcast_sd(Ap + 5);
    c40 = _mm256_fmadd_pd(a0, b0, c40), c41 = _mm256_fmadd_pd(a0, b1, c41);
    c50 = _mm256_fmadd_pd(a1, b0, c50), c51 = _mm256_fmadd_pd(a1, b1, c51);
    Ap += MR;
    Bp += NR;
  }
  const __m256d va = _mm256_set1_pd(alpha);
  if (mr == MR && nr == NR) {
    store_row_pd(C + 0 * ldc, c00, va, beta), store_row_pd(C + 0 * ldc + 4, c01, va, beta);
    store_row_pd(C + 1 * ldc, c10, va, beta), store_row_pd(C + 1 * ldc + 4, c11, va, beta);
    store_row_pd(C + 2 * ldc, c20, va, beta), store_row_pd(C + 2 * ldc + 4, c21, va, beta);
    store_row_pd(C + 3 * ldc, c30, va, beta), store_row_pd(C + 3 * ldc + 4, c31, va, beta);
    store_row_pd(C + 4 * ldc, c40, va, beta), store_row_pd(C + 4 * ldc + 4, c41, va, beta);
    store_row_pd(C + 5 * ldc, c50, va, beta), store_row_pd(C + 5 * ldc + 4, c51, va, beta);
    return;
  }
  alignas(32) double tmp[MR * NR];
  _mm256_store_pd(tmp + 0 * NR, c00), _mm256_store_pd(tmp + 0 * NR + 4, c01);
  _mm256_store_pd(tmp + 1 * NR, c10), _mm256_store_pd(tmp + 1 * NR + 4, c11);
  _mm256_store_pd(tmp + 2 * NR, c20), _mm256_store_pd(tmp + 2 * NR + 4, c21);
  _mm256_store_pd(tmp + 3 * NR, c30), _mm256_store_pd(tmp + 3 * NR + 4, c31);
  _mm256_store_pd(tmp + 4 * NR, c40), _mm256_store_pd(tmp + 4 * NR + 4, c41);
  _mm256_store_pd(tmp + 5 * NR, c50), _mm256_store_pd(tmp + 5 * NR + 4, c51);
  store_partial<double, NR>(tmp, C, ldc, alpha, beta, mr, nr);
}

}  // namespace mn::kernels::detail
