// Strided indexing shared by CPU loops and CUDA kernels: maps a linear
// (row-major) element index to a storage offset through sizes and strides.
// Stride 0 expresses broadcasting.
#pragma once
#include <cstdint>

#include "runtime/tensor.h"

#if defined(__CUDACC__)
#define MN_HD __host__ __device__ __forceinline__
#else
#define MN_HD inline
#endif

namespace mn {

constexpr int kMaxDims = 8;

struct StridedIndexer {
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};

  MN_HD int64_t offset(int64_t linear) const {
    int64_t off = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      int64_t i = linear % sizes[d];
      linear /= sizes[d];
      off += i * strides[d];
    }
    return off;
  }
};

// Indexer for t viewed with `shape` (t's shape broadcast to it; t's own offset excluded).
StridedIndexer make_indexer(const Tensor& t, const Shape& shape);
inline StridedIndexer make_indexer(const Tensor& t) { return make_indexer(t, t.shape()); }

}  // namespace mn
