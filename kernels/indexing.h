// Indexing ops: index_select / index_add (its backward), gather / scatter_add,
// where, masked_select / masked_scatter (its backward). CPU and CUDA.
//
// Pure data movement (index_select, gather, where, masked_select,
// masked_scatter) is templated on the element SIZE (E = uint8_t / uint32_t /
// uint64_t), so every dtype works with three instantiations; index_add and
// scatter_add do arithmetic and take float/double. Indices are int64 at the raw
// level (the Tensor functions accept int32 or int64 and convert).
//
// Out-of-range indices throw mn::Error on the CPU. On CUDA a bad index reads and
// writes nothing (the output element is 0) and is reported without a sync: the
// kernel records it on the device and the host throws mn::Error naming the op,
// the index and the bound at its next synchronisation point (the next
// device-to-host copy or mn::synchronize; MN_CUDA_SYNC=1: at the op itself).
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/strided.h"
#include "runtime/tensor.h"

namespace mn::kernels {

// ---- raw kernels ------------------------------------------------------------
// out[o, j, i] = x[o, idx[j], i];  x: (outer, n, inner), idx: (k), out: (outer, k, inner)
template <typename E>
void index_select_cpu(const E* x, int64_t outer, int64_t n, int64_t inner, const int64_t* idx,
                      int64_t k, E* out);
// out[o, idx[j], i] += g[o, j, i];  g: (outer, k, inner), out: (outer, n, inner)
template <typename T>
void index_add_cpu(const T* g, int64_t outer, int64_t k, int64_t inner, const int64_t* idx,
                   int64_t n, T* out);
// For each linear position l of the index tensor (numel m):
//   out[l] = x[xi.offset(l) + idx[l] * x_dim_stride]
// where xi walks x with the index tensor's sizes and x's strides, the gathered
// dimension's stride set to 0. idx, out: contiguous (m).
template <typename E>
void gather_cpu(const E* x, const StridedIndexer& xi, int64_t x_dim_stride, int64_t dim_size,
                const int64_t* idx, int64_t m, E* out);
// out[oi.offset(l) + idx[l] * out_dim_stride] += src[si.offset(l)] for l < m.
template <typename T>
void scatter_add_cpu(T* out, const StridedIndexer& oi, int64_t out_dim_stride, int64_t dim_size,
                     const int64_t* idx, const T* src, const StridedIndexer& si, int64_t m);
// out[l] = cond[ic(l)] ? a[ia(l)] : b[ib(l)], l < n; out contiguous.
template <typename E>
void where_cpu(int64_t n, const uint8_t* cond, const StridedIndexer& ic, const E* a,
               const StridedIndexer& ia, const E* b, const StridedIndexer& ib, E* out);
// Copies x[i] for mask[i] != 0 to out, in order; returns the count. x, mask: (n).
template <typename E>
int64_t masked_select_cpu(const E* x, const uint8_t* mask, int64_t n, E* out);
// out[i] = mask[i] ? src[rank of i among the set positions] : 0. out, mask: (n).
template <typename E>
void masked_scatter_cpu(const E* src, const uint8_t* mask, int64_t n, E* out);

#ifdef MN_WITH_CUDA
template <typename E>
void index_select_cuda(const E* x, int64_t outer, int64_t n, int64_t inner, const int64_t* idx,
                       int64_t k, E* out);
// atomicAdd (double atomics need sm_60+).
template <typename T>
void index_add_cuda(const T* g, int64_t outer, int64_t k, int64_t inner, const int64_t* idx,
                    int64_t n, T* out);
template <typename E>
void gather_cuda(const E* x, const StridedIndexer& xi, int64_t x_dim_stride, int64_t dim_size,
                 const int64_t* idx, int64_t m, E* out);
template <typename T>
void scatter_add_cuda(T* out, const StridedIndexer& oi, int64_t out_dim_stride, int64_t dim_size,
                      const int64_t* idx, const T* src, const StridedIndexer& si, int64_t m);
template <typename E>
void where_cuda(int64_t n, const uint8_t* cond, const StridedIndexer& ic, const E* a,
                const StridedIndexer& ia, const E* b, const StridedIndexer& ib, E* out);
// Stream compaction in three launches: per-block counts (__syncthreads_count),
// one-block exclusive scan of the counts, then a ballot/popc write pass.
// mask_scan_cuda fills block_offsets (mask_scan_blocks(n) + 1 int64) and returns
// the total (one 8-byte device->host copy, counted in transfer_stats()).
int64_t mask_scan_blocks(int64_t n);
int64_t mask_scan_cuda(const uint8_t* mask, int64_t n, int64_t* block_offsets);
template <typename E>
void masked_select_cuda(const E* x, const uint8_t* mask, int64_t n, const int64_t* block_offsets,
                        E* out);
template <typename E>
void masked_scatter_cuda(const E* src, const uint8_t* mask, int64_t n,
                         const int64_t* block_offsets, E* out);
#endif

// ---- Tensor level -----------------------------------------------------------
// Rows of x along `dim` picked by idx (1-D, int32/int64): out.size(dim) = idx.numel().
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& idx);
// The backward of index_select: zeros(shape) with g's slices added at idx along dim
// (repeated indices accumulate).
Tensor index_add(const Shape& shape, int64_t dim, const Tensor& idx, const Tensor& g);
// out[i][j][k] = x[i][idx[i][j][k]][k] (dim = 1); idx has x's rank and
// idx.size(d) <= x.size(d) for d != dim; out has idx's shape.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& idx);
// A copy of self with out[i][idx[i][j][k]][k] += src[i][j][k] (dim = 1);
// idx.size(d) <= src.size(d) for all d, and <= self.size(d) for d != dim.
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& idx, const Tensor& src);
// cond (uint8, nonzero = true) ? a : b, all three broadcast together; a and b
// share dtype and device.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// The elements of x where mask (uint8) is nonzero, after broadcasting x and
// mask together, as a 1-D tensor in row-major order.
Tensor masked_select(const Tensor& x, const Tensor& mask);
// The backward of masked_select: zeros(mask.shape()) with src's elements
// placed, in order, at the nonzero positions of mask (mask must be contiguous-able,
// src.numel() == number of nonzeros).
Tensor masked_scatter(const Tensor& mask, const Tensor& src);

}  // namespace mn::kernels
