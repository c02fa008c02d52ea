// Linear layer helpers: y = x * W^T + b. The matrix product is mn::kernels::matmul
// (kernels/gemm.h); this file adds the bias pieces, CPU and CUDA:
//   bias_add_rows:  y[i, j] += b[j]              (forward)
//   sum_rows:       db[j] = sum_i dy[i, j]       (backward-bias; fixed order)
// and the Tensor-level forward/backward built from them.
#pragma once
#include <cstdint>

#include "runtime/tensor.h"

namespace mn::kernels {

template <typename T>
void bias_add_rows_cpu(int64_t rows, int64_t cols, const T* b,  // (cols)
                       T* y);                                   // (rows, cols), in place
template <typename T>
void sum_rows_cpu(int64_t rows, int64_t cols, const T* dy,  // (rows, cols)
                  T* db);                                   // (cols), overwritten
#ifdef MN_WITH_CUDA
template <typename T>
void bias_add_rows_cuda(int64_t rows, int64_t cols, const T* b, T* y);
template <typename T>
void sum_rows_cuda(int64_t rows, int64_t cols, const T* dy, T* db);
#endif

// x (N, in), w (out, in), b (out) or undefined -> y (N, out).
Tensor linear_forward(const Tensor& x, const Tensor& w, const Tensor& b);
// dy (N, out) -> dx (N, in) = dy * W.
Tensor linear_backward_input(const Tensor& dy, const Tensor& w);
// dy (N, out), x (N, in) -> dW (out, in) = dy^T * x.
Tensor linear_backward_weight(const Tensor& dy, const Tensor& x);
// dy (N, out) -> db (out).
Tensor linear_backward_bias(const Tensor& dy);

}  // namespace mn::kernels
