// Internal: the tensor-core (mma.sync) GEMM and convolution launchers
// (kernels/cuda/mma_gemm.cu, kernels/cuda/mma_conv.cu) on device pointers, float32 in
// memory, TF32 or BF16 products with FP32 accumulation, queued on mn::cuda::stream().
// Called by the dispatch in kernels/cuda/gemm.cu and kernels/cuda/conv2d.cu when the
// precision policy (kernels/gemm_config.h) asks for TF32 or BF16; tests and benchmarks
// call them directly to compare with the other kernels. Need compute capability >= 8.0
// (checked: the call throws naming the op and the device). Declared only in CUDA builds.
#pragma once
#include <cstdint>

#include "kernels/conv2d.h"
#include "kernels/gemm_config.h"

#ifdef MN_WITH_CUDA
namespace mn::kernels {

// C = alpha op(A) op(B) + beta C, row-major, batched over `batch` (matrix b at A + b sa,
// likewise B and C). p: Precision::TF32 or Precision::BF16.
void mma_gemm_cuda(Precision p, bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K,
                   float alpha, const float* A, int64_t lda, int64_t sa, const float* B, int64_t ldb, int64_t sb,
                   float beta, float* C, int64_t ldc, int64_t sc);

// y = conv(x, w) + b (b may be null), then max(y, 0) where relu (the fused epilogue).
void mma_conv_forward_cuda(Precision p, const Conv2dGeom& g, const float* x, const float* w, const float* b,
                           float* y, bool relu);
// dx from dy and w, any stride (stride 1 as the forward of dy with flipped weights).
void mma_conv_backward_data_cuda(Precision p, const Conv2dGeom& g, const float* dy, const float* w, float* dx);
// dw from x and dy; the N P Q reduction split over blocks, partials summed in a fixed order.
void mma_conv_backward_weight_cuda(Precision p, const Conv2dGeom& g, const float* x, const float* dy, float* dw);

}  // namespace mn::kernels
#endif
