// CPU reductions over a contiguous (outer, r, inner) view (see kernels/reduce.h).
// Accumulates in double. Three loop shapes:
//   outer == inner == 1: fixed 64K-element chunks reduced in parallel, partials
//     combined in chunk order (deterministic for any thread count);
//   inner == 1: one row per task, parallel over rows;
//   inner > 1: blocks of 256 columns, the k loop outside so reads are contiguous.
#include "kernels/reduce.h"

#include <algorithm>
#include <vector>

#include "kernels/reduce_math.h"
#include "runtime/parallel.h"

namespace mn::kernels {

namespace {
constexpr int64_t kChunk = 1 << 16;
constexpr int64_t kColBlock = 256;

template <ReduceOp OP, typename T>
detail::RedAcc reduce_row(const T* x, int64_t begin, int64_t end) {
  if constexpr (OP == ReduceOp::Sum || OP == ReduceOp::Mean) {
    // Four independent accumulators: shorter dependency chains, pairwise-like error.
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t k = begin;
    for (; k + 4 <= end; k += 4) {
      s0 += x[k];
      s1 += x[k + 1];
      s2 += x[k + 2];
      s3 += x[k + 3];
    }
    for (; k < end; ++k) s0 += x[k];
    return {(s0 + s1) + (s2 + s3), 0};
  } else {
    detail::RedAcc a = detail::red_identity<OP>();
    for (int64_t k = begin; k < end; ++k) detail::red_combine<OP>(a, static_cast<double>(x[k]), k);
    return a;
  }
}

template <ReduceOp OP, typename T>
void store(const detail::RedAcc& a, int64_t r, T* out, int64_t* idx, int64_t o) {
  out[o] = static_cast<T>(OP == ReduceOp::Mean ? a.v / static_cast<double>(r) : a.v);
  if (idx) idx[o] = a.i;
}

template <ReduceOp OP, typename T>
void reduce_impl(const T* x, int64_t outer, int64_t r, int64_t inner, T* out, int64_t* idx) {
  if (outer * inner == 0) return;
  if (outer == 1 && inner == 1) {
    const int64_t nchunks = std::max<int64_t>(1, (r + kChunk - 1) / kChunk);
    std::vector<detail::RedAcc> part(nchunks);
    parallel_for(0, nchunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c)
        part[c] = reduce_row<OP, T>(x, c * kChunk, std::min(r, (c + 1) * kChunk));
    });
    detail::RedAcc a = detail::red_identity<OP>();
    for (const auto& p : part) detail::red_combine<OP>(a, p.v, p.i);
    store<OP, T>(a, r, out, idx, 0);
    return;
  }
  if (inner == 1) {
    const int64_t grain = std::max<int64_t>(1, kChunk / std::max<int64_t>(r, 1));
    parallel_for(0, outer, grain, [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        detail::RedAcc a = reduce_row<OP, T>(x + o * r, 0, r);
        store<OP, T>(a, r, out, idx, o);
      }
    });
    return;
  }
  const int64_t nblk = (inner + kColBlock - 1) / kColBlock;
  const int64_t grain = std::max<int64_t>(1, kChunk / std::max<int64_t>(r * kColBlock, 1));
  parallel_for(0, outer * nblk, grain, [&](int64_t t0, int64_t t1) {
    detail::RedAcc acc[kColBlock];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t o = t / nblk, i0 = (t % nblk) * kColBlock;
      const int64_t w = std::min(kColBlock, inner - i0);
      for (int64_t j = 0; j < w; ++j) acc[j] = detail::red_identity<OP>();
      const T* base = x + o * r * inner + i0;
      for (int64_t k = 0; k < r; ++k) {
        const T* row = base + k * inner;
        if constexpr (OP == ReduceOp::Sum || OP == ReduceOp::Mean) {
          for (int64_t j = 0; j < w; ++j) acc[j].v += row[j];
        } else {
          for (int64_t j = 0; j < w; ++j) detail::red_combine<OP>(acc[j], static_cast<double>(row[j]), k);
        }
      }
      for (int64_t j = 0; j < w; ++j) store<OP, T>(acc[j], r, out, idx, o * inner + i0 + j);
    }
  });
}
}  // namespace

template <typename T>
void reduce_cpu(ReduceOp op, const T* x, int64_t outer, int64_t r, int64_t inner, T* out,
                int64_t* idx) {
  switch (op) {
    case ReduceOp::Sum: reduce_impl<ReduceOp::Sum, T>(x, outer, r, inner, out, idx); break;
    case ReduceOp::Mean: reduce_impl<ReduceOp::Mean, T>(x, outer, r, inner, out, idx); break;
    case ReduceOp::Max: reduce_impl<ReduceOp::Max, T>(x, outer, r, inner, out, idx); break;
    case ReduceOp::Min: reduce_impl<ReduceOp::Min, T>(x, outer, r, inner, out, idx); break;
  }
}

template void reduce_cpu<float>(ReduceOp, const float*, int64_t, int64_t, int64_t, float*, int64_t*);
template void reduce_cpu<double>(ReduceOp, const double*, int64_t, int64_t, int64_t, double*, int64_t*);

}  // namespace mn::kernels
