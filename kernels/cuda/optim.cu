// CUDA side of the fused optimizer kernels (kernels/optim.h). Each kernel is one
// launch over a whole parameter group: blocks stride over the chunk table
// ({tensor, start}, kMultiTensorChunk elements each), load the chunk's tensor
// descriptor once, and threads stride over the chunk's elements (coalesced).
// Scalar loads, arithmetic in T, same operation order as the CPU loops in
// kernels/cpu/optim.cpp so float64 results agree to rounding. Adam, two versions:
//   1  one group per launch, after a one-thread kernel that advances the group's
//      device step count and computes its bias corrections (two launches per group);
//      kept for MN_OPTIM_ONE_LAUNCH=0 and as the reference of version 2.
//   2  every group in one launch (adam_groups_kernel): the groups' constants are a
//      __grid_constant__ table, the bias corrections are computed per block from the
//      device counts, and the last block to finish advances the counts (a ticket
//      counter, CUDA's threadFenceReduction pattern). Same arithmetic per element.
// Every update can zero the gradient right after reading it (zero_grad).
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
                           T mom, T damp1, T wd, bool use_mom, bool nesterov, bool first,
                           bool zero_grad) {
  for (int64_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const MultiTensorChunk ch = chunks[c];
    const MultiTensorDesc d = descs[ch.tensor];
    const int64_t e = min(d.numel, ch.start + kMultiTensorChunk);
    T* p = static_cast<T*>(d.param);
    T* g = static_cast<T*>(d.grad);
    T* buf = static_cast<T*>(d.state0);
    for (int64_t i = ch.start + threadIdx.x; i < e; i += blockDim.x) {
      T gi = g[i] + wd * p[i];
      if (zero_grad) g[i] = T(0);
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

// One element's Adam update (both versions, so they contract the same FMAs).
template <typename T>
__device__ __forceinline__ void adam_element(T* p, T* g, T* m, T* v, int64_t i,
                                             const AdamConsts<T>& k, bool zero_grad) {
  const T pi = p[i];
  const T gi = g[i] + k.l2 * pi;
  if (zero_grad) g[i] = T(0);
  const T mi = k.b1 * m[i] + k.omb1 * gi;
  const T vi = k.b2 * v[i] + k.omb2 * gi * gi;
  m[i] = mi;
  v[i] = vi;
  p[i] = pi * k.decay - k.step_size * mi / (sqrt(vi) * k.inv_sqrt_bc2 + k.eps);
}

template <typename T>
__global__ void adam_kernel(const MultiTensorDesc* __restrict__ descs,
                            const MultiTensorChunk* __restrict__ chunks, int64_t nchunks, T b1,
                            T b2, T omb1, T omb2, T eps, T step_size, T inv_sqrt_bc2, T l2,
                            T decay, const double* __restrict__ dev, bool zero_grad) {
  if (dev) {  // AdamHyper::device_step
    step_size = static_cast<T>(dev[1]);
    inv_sqrt_bc2 = static_cast<T>(dev[2]);
  }
  const AdamConsts<T> k{b1, b2, omb1, omb2, eps, step_size, inv_sqrt_bc2, l2, decay};
  for (int64_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const MultiTensorChunk ch = chunks[c];
    const MultiTensorDesc d = descs[ch.tensor];
    const int64_t e = min(d.numel, ch.start + kMultiTensorChunk);
    for (int64_t i = ch.start + threadIdx.x; i < e; i += blockDim.x)
      adam_element(static_cast<T*>(d.param), static_cast<T*>(d.grad), static_cast<T*>(d.state0),
                   static_cast<T*>(d.state1), i, k, zero_grad);
  }
}

// Version 2's table: one AdamConsts per group, and per group the host values the device
// recomputes the bias corrections from (AdamHyper::device_step), as adam_device_step_kernel.
template <typename T>
struct AdamGroupTable {
  AdamConsts<T> c[kMaxAdamGroups];
  double lr[kMaxAdamGroups], beta1[kMaxAdamGroups], beta2[kMaxAdamGroups];
  double* step[kMaxAdamGroups];  // device counts, or all null
  int n;
};

template <typename T>
__global__ void adam_groups_kernel(const MultiTensorDesc* __restrict__ descs,
                                   const MultiTensorChunk* __restrict__ chunks, int64_t nchunks,
                                   const __grid_constant__ AdamGroupTable<T> tab, bool zero_grad,
                                   unsigned* __restrict__ done) {
  __shared__ AdamConsts<T> c[kMaxAdamGroups];
  if (threadIdx.x < tab.n) {
    const int k = threadIdx.x;
    AdamConsts<T> ck = tab.c[k];
    if (tab.step[k]) {  // this update's t = the count before it + 1
      const double t = tab.step[k][0] + 1.0;
      ck.step_size = static_cast<T>(tab.lr[k] / (1.0 - pow(tab.beta1[k], t)));
      ck.inv_sqrt_bc2 = static_cast<T>(1.0 / sqrt(1.0 - pow(tab.beta2[k], t)));
    }
    c[k] = ck;
  }
  __syncthreads();  // the counts are read (they change only after every block got here)
  for (int64_t ci = blockIdx.x; ci < nchunks; ci += gridDim.x) {
    const MultiTensorChunk ch = chunks[ci];
    const MultiTensorDesc d = descs[ch.tensor];
    const AdamConsts<T> k = c[d.group];
    const int64_t e = min(d.numel, ch.start + kMultiTensorChunk);
    for (int64_t i = ch.start + threadIdx.x; i < e; i += blockDim.x)
      adam_element(static_cast<T*>(d.param), static_cast<T*>(d.grad), static_cast<T*>(d.state0),
                   static_cast<T*>(d.state1), i, k, zero_grad);
  }
  if (!done) return;
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(done, 1u) == gridDim.x - 1) {  // the last block: every block has read the counts
      for (int k = 0; k < tab.n; ++k) tab.step[k][0] += 1.0;
      *done = 0u;  // ready for the next launch (or replay)
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
      static_cast<T>(h.weight_decay), h.momentum != 0.0, h.nesterov, h.first_step, h.zero_grad);
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
      static_cast<T>(h.lr / bc1), static_cast<T>(1.0 / std::sqrt(bc2)), l2, decay, h.device_step,
      h.zero_grad);
  CUDA_CHECK_LAUNCH("adam_kernel");
}

template <typename T>
void adam_step_groups_cuda(const MultiTensorDesc* descs, const MultiTensorChunk* chunks,
                           int64_t nchunks, const AdamHyper* groups, int ngroups, bool zero_grad,
                           unsigned* done) {
  if (nchunks == 0) return;
  MN_CHECK(ngroups >= 1 && ngroups <= kMaxAdamGroups, "adam_step_groups_cuda: ", ngroups,
           " groups, one launch takes 1 to ", kMaxAdamGroups);
  AdamGroupTable<T> tab{};
  tab.n = ngroups;
  for (int k = 0; k < ngroups; ++k) {
    tab.c[k] = adam_consts<T>(groups[k]);
    tab.lr[k] = groups[k].lr, tab.beta1[k] = groups[k].beta1, tab.beta2[k] = groups[k].beta2;
    tab.step[k] = groups[k].device_step;
    MN_CHECK((tab.step[k] != nullptr) == (groups[0].device_step != nullptr) && (!tab.step[k] || done),
             "adam_step_groups_cuda: device step counts need every group's and a block counter");
  }
  adam_groups_kernel<T><<<blocks_for(nchunks), kThreads, 0, mn::cuda::stream()>>>(
      descs, chunks, nchunks, tab, zero_grad, groups[0].device_step ? done : nullptr);
  CUDA_CHECK_LAUNCH("adam_groups_kernel");
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
  template void adam_step_groups_cuda<T>(const MultiTensorDesc*, const MultiTensorChunk*,    \
                                         int64_t, const AdamHyper*, int, bool, unsigned*);    \
  template void grad_sumsq_cuda<T>(const MultiTensorDesc*, const MultiTensorChunk*, int64_t,  \
                                   double*);                                                  \
  template void clip_scale_cuda<T>(const MultiTensorDesc*, const MultiTensorChunk*, int64_t,  \
                                   const double*, double, double);
MN_INSTANTIATE_OPTIM_CUDA(float)
MN_INSTANTIATE_OPTIM_CUDA(double)
#undef MN_INSTANTIATE_OPTIM_CUDA

}  // namespace mn::kernels
