// CPU indexing kernels (oracle for kernels/cuda/indexing.cu). Index ranges are
// checked here and throw mn::Error naming the op, the index and the size.
#include "kernels/indexing.h"

#include <algorithm>
#include <cstring>

#include "runtime/parallel.h"

namespace mn::kernels {

namespace {
constexpr int64_t kGrain = 1 << 14;
inline void check_index(const char* op, int64_t v, int64_t size) {
  MN_CHECK(v >= 0 && v < size, op, ": index ", v, " out of range for dimension of size ", size);
}
}  // namespace

template <typename E>
void index_select_cpu(const E* x, int64_t outer, int64_t n, int64_t inner, const int64_t* idx,
                      int64_t k, E* out) {
  for (int64_t j = 0; j < k; ++j) check_index("index_select", idx[j], n);
  const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(inner, 1));
  parallel_for(0, outer * k, grain, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t o = t / k, j = t % k;
      std::memcpy(out + t * inner, x + (o * n + idx[j]) * inner, sizeof(E) * inner);
    }
  });
}

template <typename T>
void index_add_cpu(const T* g, int64_t outer, int64_t k, int64_t inner, const int64_t* idx,
                   int64_t n, T* out) {
  for (int64_t j = 0; j < k; ++j) check_index("index_add", idx[j], n);
  // Parallel over outer: different o never touch the same output row.
  parallel_for(0, outer, 1, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o)
      for (int64_t j = 0; j < k; ++j) {
        const T* src = g + (o * k + j) * inner;
        T* dst = out + (o * n + idx[j]) * inner;
        for (int64_t i = 0; i < inner; ++i) dst[i] += src[i];
      }
  });
}

template <typename E>
void gather_cpu(const E* x, const StridedIndexer& xi, int64_t x_dim_stride, int64_t dim_size,
                const int64_t* idx, int64_t m, E* out) {
  for (int64_t l = 0; l < m; ++l) check_index("gather", idx[l], dim_size);
  parallel_for(0, m, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t l = b; l < e; ++l) out[l] = x[xi.offset(l) + idx[l] * x_dim_stride];
  });
}

template <typename T>
void scatter_add_cpu(T* out, const StridedIndexer& oi, int64_t out_dim_stride, int64_t dim_size,
                     const int64_t* idx, const T* src, const StridedIndexer& si, int64_t m) {
  for (int64_t l = 0; l < m; ++l) check_index("scatter_add", idx[l], dim_size);
  // Serial: different l may hit the same output element.
  for (int64_t l = 0; l < m; ++l) out[oi.offset(l) + idx[l] * out_dim_stride] += src[si.offset(l)];
}

template <typename E>
void where_cpu(int64_t n, const uint8_t* cond, const StridedIndexer& ic, const E* a,
               const StridedIndexer& ia, const E* b, const StridedIndexer& ib, E* out) {
  parallel_for(0, n, kGrain, [&](int64_t s, int64_t e) {
    for (int64_t l = s; l < e; ++l) out[l] = cond[ic.offset(l)] ? a[ia.offset(l)] : b[ib.offset(l)];
  });
}

template <typename E>
int64_t masked_select_cpu(const E* x, const uint8_t* mask, int64_t n, E* out) {
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i)
    if (mask[i]) out[c++] = x[i];
  return c;
}

template <typename E>
void masked_scatter_cpu(const E* src, const uint8_t* mask, int64_t n, E* out) {
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i) out[i] = mask[i] ? src[c++] : E(0);
}

#define MN_INSTANTIATE_E(E)                                                                    \
  template void index_select_cpu<E>(const E*, int64_t, int64_t, int64_t, const int64_t*, int64_t, E*); \
  template void gather_cpu<E>(const E*, const StridedIndexer&, int64_t, int64_t, const int64_t*, int64_t, E*); \
  template void where_cpu<E>(int64_t, const uint8_t*, const StridedIndexer&, const E*,         \
                             const StridedIndexer&, const E*, const StridedIndexer&, E*);      \
  template int64_t masked_select_cpu<E>(const E*, const uint8_t*, int64_t, E*);                \
  template void masked_scatter_cpu<E>(const E*, const uint8_t*, int64_t, E*);
MN_INSTANTIATE_E(uint8_t)
MN_INSTANTIATE_E(uint32_t)
MN_INSTANTIATE_E(uint64_t)
#define MN_INSTANTIATE_T(T)                                                                    \
  template void index_add_cpu<T>(const T*, int64_t, int64_t, int64_t, const int64_t*, int64_t, T*); \
  template void scatter_add_cpu<T>(T*, const StridedIndexer&, int64_t, int64_t, const int64_t*, \
                                   const T*, const StridedIndexer&, int64_t);
MN_INSTANTIATE_T(float)
MN_INSTANTIATE_T(double)

}  // namespace mn::kernels
