// y += alpha * x for contiguous tensors of the same shape, dtype and device.
// Used by the tape to accumulate gradients; any float dtype, CPU or CUDA.
#pragma once
#include <cstdint>

#include "runtime/tensor.h"

namespace mn::kernels {

template <typename T>
void axpy_cpu(int64_t n, T alpha, const T* x, T* y);  // x, y: (n)
#ifdef MN_WITH_CUDA
template <typename T>
void axpy_cuda(int64_t n, T alpha, const T* x, T* y);  // device pointers, (n)
#endif

// y += alpha * x; x may be non-contiguous or broadcastable to y's shape.
void axpy_(Tensor& y, const Tensor& x, double alpha = 1.0);

}  // namespace mn::kernels
