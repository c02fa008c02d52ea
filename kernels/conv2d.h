// 2-D convolution (cross-correlation, as in every DL framework): forward,
// backward-data, backward-weight and backward-bias, on the CPU and on CUDA.
//
//   y[n,k,p,q] = b[k] + sum_{c,r,s} w[k,c,r,s] * x[n, c, p*sh - ph + r*dh, q*sw - pw + s*dw]
//
// with zero padding (reads outside the image are 0). Output size
//   P = (H + 2*ph - dh*(R-1) - 1) / sh + 1,   Q likewise with W, pw, dw, S, sw.
//
// Variants (Conv2dAlgo), selectable per call; the direct loops are the oracle:
//   Direct (0): CPU: the textbook loop nest. CUDA: one thread per output element
//               (forward), per input element (backward-data, a gather — no atomics),
//               per weight element (backward-weight).
//   Gemm   (1): CPU: im2col per image + our gemm_cpu, images spread over the thread
//               pool (per-thread column buffers; per-chunk weight-gradient partials
//               reduced in a fixed order, so results are deterministic). Float
//               stride-1 layers on small images (conv4's 3x3 layers, the sampling
//               net's second layer) run all three passes as a vectorised direct
//               convolution instead (AVX2, kernels/cpu/conv2d_direct_avx2.cpp).
//               CUDA: implicit GEMM (float: 128x128, 64x256 or 64x128 tiles of 8-deep
//               k-slices; double: 64x64x16), stride-1 backward-data as the forward
//               GEMM of dy and flipped weights; backward-weight splits the N*P*Q
//               reduction over blocks and reduces the partials in a second,
//               fixed-order pass (kernels/cuda/conv2d.cu).
//               For float with kernels::conv_precision() TF32 or BF16
//               (kernels/gemm_config.h), all three passes run on our mma.sync
//               tensor-core implicit GEMM (kernels/cuda/mma_conv.cu: 128x128x32 tiles,
//               3-stage cp.async pipeline, ldmatrix; sm_80+), the older WMMA TF32
//               kernel when CudaSpeedups::tc_mma is off; double and the CPU are never
//               affected.
//   Default resolves to Gemm, or to what set_default_conv2d_algo() chose (a test
//   that measures how accurate textbook float32 loops are on a whole network).
#pragma once
#include <cstdint>
#include <string>

#include "runtime/tensor.h"

namespace mn::kernels {

enum class Conv2dAlgo : int { Direct = 0, Gemm = 1, Default = 2 };

// Whether CPU Gemm-algo float convolutions may take the vectorised direct kernel
// (stride-1 layers on small images, kernels/cpu/conv2d.cpp). On unless the
// environment sets MN_CONV_CPU_DIRECT=0; off: they always run the implicit GEMM
// (benchmarks compare the two).
void set_conv2d_cpu_vector_direct(bool on);
bool conv2d_cpu_vector_direct();

// What Conv2dAlgo::Default means, process-wide (Gemm unless changed).
void set_default_conv2d_algo(Conv2dAlgo a);
Conv2dAlgo default_conv2d_algo();

struct Conv2dParams {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  Conv2dAlgo algo = Conv2dAlgo::Default;
  // conv2d_forward only: y = relu(conv + b) (relu as kernels/activation.h: x > 0 ? x : 0).
  // On CUDA with TF32 / BF16 the tensor-core kernel applies it in its epilogue
  // (CudaSpeedups::conv_fused_relu); elsewhere a ReLU pass follows. Same values either
  // way. The backward ops take the plain convolution's parameters (ag::conv2d applies
  // the ReLU's gradient first).
  bool relu = false;
};

// All sizes of one convolution; built and validated by conv2d_geometry().
struct Conv2dGeom {
  int64_t N, C, H, W;  // input  (N, C, H, W)
  int64_t K, R, S;     // weight (K, C, R, S)
  int64_t P, Q;        // output (N, K, P, Q)
  int64_t sh, sw, ph, pw, dh, dw;
};

// Checks the shapes (names them in the error) and computes the output size.
Conv2dGeom conv2d_geometry(const char* op, const Shape& x_shape, const Shape& w_shape,
                           const Conv2dParams& p);
std::string conv2d_geom_str(const Conv2dGeom& g);
// Whether a float32 CPU pass of this geometry takes the vectorised direct kernel
// now, given the CPU path, the GEMM variant and set_conv2d_cpu_vector_direct
// (tests, benchmarks).
enum class Conv2dPass : int { Forward = 0, BackwardData = 1, BackwardWeight = 2 };
bool conv2d_cpu_vector_direct_applies(const Conv2dGeom& g, Conv2dPass pass);
// Multiply-adds of one forward pass (backward-data and backward-weight are the same).
inline double conv2d_flops(const Conv2dGeom& g) {
  return 2.0 * g.N * g.K * g.P * g.Q * g.C * g.R * g.S;
}

// ---- CPU (contiguous buffers) ------------------------------------------------
template <typename T>
void conv2d_forward_cpu(const Conv2dGeom& g, const T* x,  // (N, C, H, W)
                        const T* w,                       // (K, C, R, S)
                        const T* b,                       // (K) or nullptr
                        T* y,                             // (N, K, P, Q), overwritten
                        Conv2dAlgo algo = Conv2dAlgo::Default);
template <typename T>
void conv2d_backward_data_cpu(const Conv2dGeom& g, const T* dy,  // (N, K, P, Q)
                              const T* w,                        // (K, C, R, S)
                              T* dx,                             // (N, C, H, W), overwritten
                              Conv2dAlgo algo = Conv2dAlgo::Default);
template <typename T>
void conv2d_backward_weight_cpu(const Conv2dGeom& g, const T* x,  // (N, C, H, W)
                                const T* dy,                      // (N, K, P, Q)
                                T* dw,                            // (K, C, R, S), overwritten
                                Conv2dAlgo algo = Conv2dAlgo::Default);
template <typename T>
void conv2d_backward_bias_cpu(const Conv2dGeom& g, const T* dy,  // (N, K, P, Q)
                              T* db);                            // (K), overwritten

#ifdef MN_WITH_CUDA
// Device pointers; queued on mn::cuda::stream(). Same shapes as the CPU versions.
template <typename T>
void conv2d_forward_cuda(const Conv2dGeom& g, const T* x, const T* w, const T* b, T* y,
                         Conv2dAlgo algo = Conv2dAlgo::Default);
template <typename T>
void conv2d_backward_data_cuda(const Conv2dGeom& g, const T* dy, const T* w, T* dx,
                               Conv2dAlgo algo = Conv2dAlgo::Default);
template <typename T>
void conv2d_backward_weight_cuda(const Conv2dGeom& g, const T* x, const T* dy, T* dw,
                                 Conv2dAlgo algo = Conv2dAlgo::Default);
template <typename T>
void conv2d_backward_bias_cuda(const Conv2dGeom& g, const T* dy, T* db);
// The forward with bias and ReLU in the tensor-core kernel's epilogue, when this call
// would run on it (float, precision TF32 / BF16, algo not Direct) and
// CudaSpeedups::conv_fused_relu is on; returns false (and does nothing) otherwise.
bool conv2d_forward_relu_fused_cuda(const Conv2dGeom& g, const float* x, const float* w, const float* b, float* y,
                                    Conv2dAlgo algo);
#endif

// ---- Tensor level (any device, float32/float64; inputs made contiguous) ------
// x (N, C, H, W), w (K, C, R, S), b (K) or undefined -> y (N, K, P, Q).
Tensor conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p);
// dy (N, K, P, Q) -> dx with shape x_shape.
Tensor conv2d_backward_data(const Tensor& dy, const Tensor& w, const Shape& x_shape,
                            const Conv2dParams& p);
// dy (N, K, P, Q), x -> dw with shape w_shape.
Tensor conv2d_backward_weight(const Tensor& dy, const Tensor& x, const Shape& w_shape,
                              const Conv2dParams& p);
// dy (N, K, P, Q) -> db (K).
Tensor conv2d_backward_bias(const Tensor& dy);

}  // namespace mn::kernels
