// Internal: the element copy/convert and fill kernels behind Tensor::copy_,
// contiguous(), to(DType) and fill_. `src` is already broadcast to dst's shape.
#pragma once
#include "runtime/tensor.h"

namespace mn::detail {
void strided_copy_cpu(const Tensor& src, const Tensor& dst);
void fill_cpu(const Tensor& dst, double value);
#ifdef MN_WITH_CUDA
void strided_copy_cuda(const Tensor& src, const Tensor& dst);
void fill_cuda(const Tensor& dst, double value);
#endif
}  // namespace mn::detail
