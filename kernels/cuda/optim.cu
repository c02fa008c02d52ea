// CUDA side of the fused optimizer kernels (kernels/optim.h). Each kernel is one
// launch over a whole parameter group: blocks stride over the chunk table
// ({tensor, start}, kMultiTensorChunk elements each), load the chunk's tensor
// descriptor once, and threads stride over the chunk's elements (coalesced).
// Version 1 (the only one): scalar loads, arithmetic in T, same operation order
// as the CPU loops in kernels/cpu/optim.cpp so float64 results agree to rounding.
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/optim.h"
#include "runtime/cuda_check.h"
#include "runtime/determinism.h"

namespace mn::kernels {

namespace {

constexpr int kThreads = 256;

// Enough blocks to fill an H100 several times; the chunk loop covers the rest.
unsigned blocks_for(int64_t nchunks) {
  int64_t b = nchunks < 4096 ? nchunks : 4096;
  return static_cast<unsigned>(b < 1 ? 1 : b);
}

template <typename T>
__global__ void sgd_kernel(const MultiTensorDesc* __restrict__ descs,
                           const MultiTensorChunk* __restrict__ chunks, int64_t nchunks, T lr,
                           T mom, T damp1, T wd, bool use_mom, bool nesterov, bool first) {
  for (int64_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const MultiTensorChunk ch = chunks[c];
    const MultiTensorDesc d = descs[ch.tensor];
    const int64_t e = min(d.numel, ch.start + kMultiTensorChunk);
    T* p = static_cast<T*>(d.param);
    const T* g = static_cast<const T*>(d.grad);
    T* buf = static_cast<T*>(d.state0);
    for (int64_t i = ch.start + threadIdx.x; i < e; i += blockDim.x) {
      T gi = g[i] + wd * p[i];
      if (use_mom) {
        const T b = first ? gi : mom * buf[i] + damp1 * gi;
        buf[i] = b;
        gi = nesterov ? gi + mom * b : b;
      }
      p[i] -= lr * gi;
    }
  }
}

// AdamHyper::device_step: t += 1 and the bias-corrected constants, on the
// device, in double as adam_step_cuda computes them on the host.
__global__ void adam_device_step_kernel(double* s, double beta1, double beta2, double lr) {
  const double t = s[0] + 1.0;
  s[0] = t;
  s[1] = lr / (1.0 - pow(beta1, t));
  s[2] = 1.0 / sqrt(1.0 - pow(beta2, t));
}

template <typename T>
__global__ void adam_kernel(const MultiTensorDesc* __restrict__ descs,
                            const MultiTensorChunk* __restrict__ chunks, int64_t nchunks, T b1,
                            T b2, T omb1, T omb2, T eps, T step_size, T inv_sqrt_bc2, T l2,
                            T decay, const double* __restrict__ dev) {
  if (dev) {  // AdamHyper::device_step
    step_size = static_cast<T>(dev[1]);
    inv_sqrt_bc2 = static_cast<T>(dev[2]);
  }
  for (int64_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const MultiTensorChunk ch = chunks[c];
    const MultiTensorDesc d = descs[ch.tensor];
    const int64_t e = min(d.numel, ch.start + kMultiTensorChunk);
    T* p = static_cast<T*>(d.param);
    const T* g = static_cast<const T*>(d.grad);
    T* m = static_cast<T*>(d.state0);
    T* v = static_cast<T*>(d.state1);
    for (int64_t i = ch.start + threadIdx.x; i < e; i += blockDim.x) {
      const T pi = p[i];
      const T gi = g[i] + l2 * pi;
      const T mi = b1 * m[i] + omb1 * gi;
      const T vi = b2 * v[i] + omb2 * gi * gi;
      m[i] = mi;
      v[i] = vi;
      p[i] = pi * decay - step_size * mi / (sqrt(vi) * inv_sqrt_bc2 + eps);
    }
  }
}

// Block-wide sum of one double per thread (kThreads threads).
__device__ double block_sum(double x) {
  __shared__ double warp_sums[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) x += __shfl_down_sync(0xffffffffu, x, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = x;
  __syncthreads();
  x = threadIdx.x < kThreads / 32 ? warp_sums[threadIdx.x] : 0.0;
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) x += __shfl_down_sync(0xffffffffu, x, o);
  return x;  // valid in thread 0
}

template <typename T>
__global__ void sumsq_kernel(const MultiTensorDesc* __restrict__ descs,
                             const MultiTensorChunk* __restrict__ chunks, int64_t nchunks,
                             double* __restrict__ out) {
  double acc = 0.0;
  for (int64_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const MultiTensorChunk ch = chunks[c];
    const MultiTensorDesc d = descs[ch.tensor];
    const int64_t e = min(d.numel, ch.start + kMultiTensorChunk);
    const T* g = static_cast<const T*>(d.grad);
    for (int64_t i = ch.start + threadIdx.x; i < e; i += blockDim.x) {
      const double x = static_cast<double>(g[i]);
      acc += x * x;
    }
  }
  acc = block_sum(acc);
  if (threadIdx.x == 0) atomicAdd(out, acc);
}

template <typename T>
__global__ void clip_scale_kernel(const MultiTensorDesc* __restrict__ descs,
                                  const MultiTensorChunk* __restrict__ chunks, int64_t nchunks,
                                  const double* __restrict__ sumsq, double max_norm, double eps) {
  const double coef = max_norm / (sqrt(*sumsq) + eps);
  if (!(coef < 1.0)) return;  // norm already within bounds (or NaN): leave grads untouched
  const T sc = static_cast<T>(coef);
  for (int64_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const MultiTensorChunk ch = chunks[c];
    const MultiTensorDesc d = descs[ch.tensor];
    const int64_t e = min(d.numel, ch.start + kMultiTensorChunk);
    T* g = static_cast<T*>(d.grad);
    for (int64_t i = ch.start + threadIdx.x; i < e; i += blockDim.x) g[i] *= sc;
  }
}

}  // namespace

template <typename T>
void sgd_step_cuda(const MultiTensorDesc* descs, const MultiTensorChunk* chunks, int64_t nchunks,
                   const SgdHyper& h) {
  if (nchunks == 0) return;
  const T damp1 = h.first_step ? T(1) : static_cast<T>(1.0 - h.dampening);
  sgd_kernel<T><<<blocks_for(nchunks), kThreads, 0, mn::cuda::stream()>>>(
      descs, chunks, nchunks, static_cast<T>(h.lr), static_cast<T>(h.momentum), damp1,
      static_cast<T>(h.weight_decay), h.momentum != 0.0, h.nesterov, h.first_step);
  CUDA_CHECK_LAUNCH("sgd_kernel");
}

template <typename T>
void adam_step_cuda(const MultiTensorDesc* descs, const MultiTensorChunk* chunks,
                    int64_t nchunks, const AdamHyper& h) {
  if (nchunks == 0) return;
  // Same host-side constants as adam_step_cpu.
  const double bc1 = 1.0 - std::pow(h.beta1, static_cast<double>(h.step));
  const double bc2 = 1.0 - std::pow(h.beta2, static_cast<double>(h.step));
  const T l2 = h.decoupled ? T(0) : static_cast<T>(h.weight_decay);
  const T decay = h.decoupled ? static_cast<T>(1.0 - h.lr * h.weight_decay) : T(1);
  if (h.device_step) {
    adam_device_step_kernel<<<1, 1, 0, mn::cuda::stream()>>>(h.device_step, h.beta1, h.beta2, h.lr);
    CUDA_CHECK_LAUNCH("adam_device_step_kernel");
  }
  adam_kernel<T><<<blocks_for(nchunks), kThreads, 0, mn::cuda::stream()>>>(
      descs, chunks, nchunks, static_cast<T>(h.beta1), static_cast<T>(h.beta2),
      static_cast<T>(1.0 - h.beta1), static_cast<T>(1.0 - h.beta2), static_cast<T>(h.eps),
      static_cast<T>(h.lr / bc1), static_cast<T>(1.0 / std::sqrt(bc2)), l2, decay, h.device_step);
  CUDA_CHECK_LAUNCH("adam_kernel");
}

template <typename T>
void grad_sumsq_cuda(const MultiTensorDesc* descs, const MultiTensorChunk* chunks,
                     int64_t nchunks, double* sumsq) {
  if (nchunks == 0) return;
  check_deterministic("gradient-norm clipping", "sums the blocks' squares with float atomics in an order that varies");
  sumsq_kernel<T><<<blocks_for(nchunks), kThreads, 0, mn::cuda::stream()>>>(descs, chunks,
                                                                            nchunks, sumsq);
  CUDA_CHECK_LAUNCH("sumsq_kernel");
}

template <typename T>
void clip_scale_cuda(const MultiTensorDesc* descs, const MultiTensorChunk* chunks,
                     int64_t nchunks, const double* sumsq, double max_norm, double eps) {
  if (nchunks == 0) return;
  clip_scale_kernel<T><<<blocks_for(nchunks), kThreads, 0, mn::cuda::stream()>>>(
      descs, chunks, nchunks, sumsq, max_norm, eps);
  CUDA_CHECK_LAUNCH("clip_scale_kernel");
}

#define MN_INSTANTIATE_OPTIM_CUDA(T)                                                           \
  template void sgd_step_cuda<T>(const MultiTensorDesc*, const MultiTensorChunk*, int64_t,    \
                                 const SgdHyper&);                                            \
  template void adam_step_cuda<T>(const MultiTensorDesc*, const MultiTensorChunk*, int64_t,   \
                                  const AdamHyper&);                                          \
  template void grad_sumsq_cuda<T>(const MultiTensorDesc*, const MultiTensorChunk*, int64_t,  \
                                   double*);                                                  \
  template void clip_scale_cuda<T>(const MultiTensorDesc*, const MultiTensorChunk*, int64_t,  \
                                   const double*, double, double);
MN_INSTANTIATE_OPTIM_CUDA(float)
MN_INSTANTIATE_OPTIM_CUDA(double)
#undef MN_INSTANTIATE_OPTIM_CUDA

}  // namespace mn::kernels
