// Matrix multiplication, public API: Tensor-level matmul over our own
// cache-blocked, vectorised, multithreaded CPU GEMM and our own tiled CUDA GEMM
// (no BLAS inside the library). Variant selection and the TF32 switch:
// kernels/gemm_config.h. The raw pointer launchers are internal to the kernels
// (kernels/cpu/gemm.h, kernels/cuda/gemm.h).
#pragma once
#include "runtime/tensor.h"

namespace mn::kernels {

// a (M, K) or (B, M, K) [or transposed per flag: (K, M) / (B, K, M)] times
// b (K, N) or (B, K, N) [or (N, K) / (B, N, K)]; returns a new contiguous (M, N)
// or (B, M, N) tensor. Same device and float dtype.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);

}  // namespace mn::kernels
