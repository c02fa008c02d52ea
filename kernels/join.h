// Joining and splitting along a dimension: concat, stack (new dimension) and
// split (views, no copy). Any dtype (the copy is by element size), CPU and CUDA.
//
// concat writes each input as a block of rows: with the inputs viewed as
// (outer, size_i * inner), input i lands in columns [off_i * inner, ...) of the
// (outer, total * inner) output — one copy_rows call per input.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/tensor.h"

namespace mn::kernels {

// dst[r * dst_stride + j] = src[r * row_len + j] for r < rows, j < row_len.
template <typename E>
void copy_rows_cpu(const E* src, int64_t rows, int64_t row_len, E* dst, int64_t dst_stride);
#ifdef MN_WITH_CUDA
template <typename E>
void copy_rows_cuda(const E* src, int64_t rows, int64_t row_len, E* dst, int64_t dst_stride);
#endif

// All inputs share dtype, device and every size except `dim`.
Tensor concat(const std::vector<Tensor>& xs, int64_t dim);
// Views of x along dim with the given sizes (they must add up to x.size(dim)).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim);
// Inputs of one shape joined along a new dimension `dim` (0 <= dim <= rank).
Tensor stack(const std::vector<Tensor>& xs, int64_t dim);

}  // namespace mn::kernels
