// CPU elementwise kernels (the oracle for kernels/cuda/elementwise.cu): plain
// loops over contiguous buffers, split over the thread pool in large chunks.
// The strided/broadcast path walks the output row by row (last dimension) so
// only one div/mod offset computation is paid per row, not per element.
#include "kernels/elementwise.h"

#include "kernels/elementwise_math.h"
#include "runtime/parallel.h"

#include <algorithm>

namespace mn::kernels {

namespace {
constexpr int64_t kGrain = 1 << 15;  // elements per task: amortises the pool overhead

// Calls fn(begin, end, a_off, a_step, b_off, b_step, out_begin) per output row.
template <typename F>
void for_each_row(int64_t n, const StridedIndexer& ia, const StridedIndexer& ib, F&& fn) {
  const int nd = ia.ndim;
  const int64_t inner = nd > 0 ? ia.sizes[nd - 1] : 1;
  if (n == 0 || inner == 0) return;
  const int64_t rows = n / inner;
  const int64_t sa = nd > 0 ? ia.strides[nd - 1] : 0;
  const int64_t sb = nd > 0 ? ib.strides[nd - 1] : 0;
  const int64_t grain = std::max<int64_t>(1, kGrain / inner);
  parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t lin = r * inner;
      fn(lin, inner, ia.offset(lin), sa, ib.offset(lin), sb);
    }
  });
}
}  // namespace

template <typename T>
void unary_forward_cpu(UnaryOp op, int64_t n, const T* x, T* y, T p0, T p1) {
  MN_UNARY_SWITCH(op, parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = detail::unary_fwd<OP_, T>(x[i], p0, p1);
  }));
}

template <typename T>
void unary_backward_cpu(UnaryOp op, int64_t n, const T* gy, const T* x, const T* y, T* gx, T p0,
                        T p1) {
  MN_UNARY_SWITCH(op, parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      gx[i] = detail::unary_bwd<OP_, T>(gy[i], x ? x[i] : T(0), y ? y[i] : T(0), p0, p1);
  }));
}

template <typename T>
void binary_forward_cpu(BinaryOp op, int64_t n, const T* a, const T* b, T* out) {
  MN_BINARY_SWITCH(op, parallel_for(0, n, kGrain, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) out[i] = detail::binary_fwd<OP_, T>(a[i], b[i]);
  }));
}

template <typename T>
void binary_forward_strided_cpu(BinaryOp op, int64_t n, const T* a, const StridedIndexer& ia,
                                const T* b, const StridedIndexer& ib, T* out) {
  MN_BINARY_SWITCH(op, for_each_row(n, ia, ib, [&](int64_t lin, int64_t len, int64_t oa,
                                                   int64_t sa, int64_t ob, int64_t sb) {
    T* o = out + lin;
    for (int64_t j = 0; j < len; ++j) o[j] = detail::binary_fwd<OP_, T>(a[oa + j * sa], b[ob + j * sb]);
  }));
}

template <typename T>
void binary_backward_strided_cpu(BinaryOp op, int64_t n, const T* g, const T* a,
                                 const StridedIndexer& ia, const T* b, const StridedIndexer& ib,
                                 T* ga, T* gb) {
  MN_BINARY_SWITCH(op, for_each_row(n, ia, ib, [&](int64_t lin, int64_t len, int64_t oa,
                                                   int64_t sa, int64_t ob, int64_t sb) {
    for (int64_t j = 0; j < len; ++j) {
      T da, db;
      detail::binary_bwd<OP_, T>(g[lin + j], a[oa + j * sa], b[ob + j * sb], da, db);
      if (ga) ga[lin + j] = da;
      if (gb) gb[lin + j] = db;
    }
  }));
}

template <typename T>
void binary_scalar_cpu(BinaryOp op, int64_t n, const T* x, T s, bool scalar_left, T* out) {
  MN_BINARY_SWITCH(op, parallel_for(0, n, kGrain, [&](int64_t b, int64_t e) {
    if (scalar_left)
      for (int64_t i = b; i < e; ++i) out[i] = detail::binary_fwd<OP_, T>(s, x[i]);
    else
      for (int64_t i = b; i < e; ++i) out[i] = detail::binary_fwd<OP_, T>(x[i], s);
  }));
}

#define MN_INSTANTIATE(T)                                                                      \
  template void unary_forward_cpu<T>(UnaryOp, int64_t, const T*, T*, T, T);                    \
  template void unary_backward_cpu<T>(UnaryOp, int64_t, const T*, const T*, const T*, T*, T, T); \
  template void binary_forward_cpu<T>(BinaryOp, int64_t, const T*, const T*, T*);              \
  template void binary_forward_strided_cpu<T>(BinaryOp, int64_t, const T*, const StridedIndexer&, \
                                              const T*, const StridedIndexer&, T*);            \
  template void binary_backward_strided_cpu<T>(BinaryOp, int64_t, const T*, const T*,          \
                                               const StridedIndexer&, const T*,                \
                                               const StridedIndexer&, T*, T*);                 \
  template void binary_scalar_cpu<T>(BinaryOp, int64_t, const T*, T, bool, T*);
MN_INSTANTIATE(float)
MN_INSTANTIATE(double)
#undef MN_INSTANTIATE

}  // namespace mn::kernels
