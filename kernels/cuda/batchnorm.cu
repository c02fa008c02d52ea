// CUDA batch-norm. Statistics: grid (C, slices); each thread runs Welford over a
// strided subset of its channel's M = N*L values, the block merges the states
// (Chan's parallel formula) with warp shuffles, and writes one (count, mean, M2)
// partial per slice; bn_finalize merges the slices per channel, writes mean and
// invstd and updates the running statistics. The normalisation is one
// elementwise pass. Backward mirrors it with plain sums (sum g, sum g*(x-mean)).
#include "kernels/batchnorm.h"
#include "runtime/cuda_check.h"

namespace mn::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxSlices = 32;

int64_t num_slices(int64_t M) {
  int64_t s = (M + kThreads * 16 - 1) / (kThreads * 16);
  return s < 1 ? 1 : (s > kMaxSlices ? kMaxSlices : s);
}

template <typename T>
struct Welford {
  T n, mean, m2;
};

template <typename T>
__device__ __forceinline__ Welford<T> merge(Welford<T> a, Welford<T> b) {
  const T n = a.n + b.n;
  if (n == T(0)) return {T(0), T(0), T(0)};
  const T d = b.mean - a.mean, fb = b.n / n;
  return {n, a.mean + d * fb, a.m2 + b.m2 + d * d * a.n * fb};
}

template <typename T>
__device__ Welford<T> block_merge(Welford<T> w) {
  __shared__ T sh[3][kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) {
    Welford<T> v{__shfl_down_sync(0xffffffffu, w.n, o), __shfl_down_sync(0xffffffffu, w.mean, o),
                 __shfl_down_sync(0xffffffffu, w.m2, o)};
    w = merge(w, v);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) { sh[0][warp] = w.n; sh[1][warp] = w.mean; sh[2][warp] = w.m2; }
  __syncthreads();
  if (warp == 0) {
    w = lane < kThreads / 32 ? Welford<T>{sh[0][lane], sh[1][lane], sh[2][lane]}
                             : Welford<T>{T(0), T(0), T(0)};
    for (int o = 16; o > 0; o >>= 1) {
      Welford<T> v{__shfl_down_sync(0xffffffffu, w.n, o), __shfl_down_sync(0xffffffffu, w.mean, o),
                   __shfl_down_sync(0xffffffffu, w.m2, o)};
      w = merge(w, v);
    }
  }
  return w;  // valid in thread 0
}

template <typename T>
__device__ T block_sum(T v, T* sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  v = threadIdx.x < kThreads / 32 ? sh[threadIdx.x] : T(0);
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;  // valid in thread 0
}

// grid (C, S): the channel on x, the slice on y. (Channels on y would cap C at
// gridDim.y's 65535, which a BatchNorm1d over (N, F) with F > 65535 exceeds;
// S <= kMaxSlices always fits y.) Element j of channel c lives at
// ((j / L) * C + c) * L + j % L.
template <typename T>
__global__ void bn_stats_kernel(int64_t N, int64_t C, int64_t L, const T* __restrict__ x,
                                T* __restrict__ part) {
  const int64_t c = blockIdx.x, s = blockIdx.y, S = gridDim.y, M = N * L;
  Welford<T> w{T(0), T(0), T(0)};
  for (int64_t j = s * kThreads + threadIdx.x; j < M; j += S * kThreads) {
    const T v = x[((j / L) * C + c) * L + j % L];
    w.n += T(1);
    const T d = v - w.mean;
    w.mean += d / w.n;
    w.m2 += d * (v - w.mean);
  }
  w = block_merge(w);
  if (threadIdx.x == 0) {
    T* p = part + (c * S + s) * 3;
    p[0] = w.n; p[1] = w.mean; p[2] = w.m2;
  }
}

template <typename T>
__global__ void bn_finalize_kernel(int64_t C, int64_t S, const T* __restrict__ part,
                                   T* running_mean, T* running_var, double momentum, double eps,
                                   T* __restrict__ mean, T* __restrict__ invstd) {
  const int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (c >= C) return;
  Welford<T> w{T(0), T(0), T(0)};
  for (int64_t s = 0; s < S; ++s) {
    const T* p = part + (c * S + s) * 3;
    w = merge(w, Welford<T>{p[0], p[1], p[2]});
  }
  const T var = w.m2 / w.n;
  mean[c] = w.mean;
  invstd[c] = T(1) / sqrt(var + T(eps));
  if (running_mean) running_mean[c] = T((1 - momentum) * running_mean[c] + momentum * w.mean);
  if (running_var) {
    const T unbiased = w.n > T(1) ? w.m2 / (w.n - T(1)) : var;
    running_var[c] = T((1 - momentum) * running_var[c] + momentum * unbiased);
  }
}

template <typename T>
__global__ void bn_eval_stats_kernel(int64_t C, const T* rm, const T* rv, double eps, T* mean,
                                     T* invstd) {
  const int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (c >= C) return;
  mean[c] = rm[c];
  invstd[c] = T(1) / sqrt(rv[c] + T(eps));
}

template <typename T>
__global__ void bn_apply_kernel(int64_t total, int64_t C, int64_t L, const T* __restrict__ x,
                                const T* __restrict__ mean, const T* __restrict__ invstd,
                                const T* __restrict__ gamma, const T* __restrict__ beta,
                                T* __restrict__ y) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t c = (i / L) % C;
    const T a = invstd[c] * (gamma ? gamma[c] : T(1));
    y[i] = (x[i] - mean[c]) * a + (beta ? beta[c] : T(0));
  }
}

// grid (C, S) as bn_stats_kernel: partial sums of g and g * (x - mean) per slice.
template <typename T>
__global__ void bn_bwd_reduce_kernel(int64_t N, int64_t C, int64_t L, const T* __restrict__ x,
                                     const T* __restrict__ gy, const T* __restrict__ mean,
                                     T* __restrict__ part) {
  __shared__ T sh[kThreads / 32];
  const int64_t c = blockIdx.x, s = blockIdx.y, S = gridDim.y, M = N * L;
  const T m = mean[c];
  T sg = T(0), sgx = T(0);
  for (int64_t j = s * kThreads + threadIdx.x; j < M; j += S * kThreads) {
    const int64_t o = ((j / L) * C + c) * L + j % L;
    sg += gy[o];
    sgx += gy[o] * (x[o] - m);
  }
  sg = block_sum(sg, sh);
  sgx = block_sum(sgx, sh);
  if (threadIdx.x == 0) {
    part[(c * S + s) * 2] = sg;
    part[(c * S + s) * 2 + 1] = sgx;
  }
}

template <typename T>
__global__ void bn_bwd_finalize_kernel(int64_t C, int64_t S, const T* __restrict__ part,
                                       const T* __restrict__ invstd, T* __restrict__ sums,
                                       T* dgamma, T* dbeta) {
  const int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (c >= C) return;
  T sg = T(0), sgx = T(0);
  for (int64_t s = 0; s < S; ++s) {
    sg += part[(c * S + s) * 2];
    sgx += part[(c * S + s) * 2 + 1];
  }
  sgx *= invstd[c];
  sums[c * 2] = sg;
  sums[c * 2 + 1] = sgx;
  if (dgamma) dgamma[c] = sgx;
  if (dbeta) dbeta[c] = sg;
}

template <typename T>
__global__ void bn_bwd_dx_kernel(int64_t total, int64_t C, int64_t L, T inv_m, bool training,
                                 const T* __restrict__ x, const T* __restrict__ gy,
                                 const T* __restrict__ mean, const T* __restrict__ invstd,
                                 const T* __restrict__ gamma, const T* __restrict__ sums,
                                 T* __restrict__ gx) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t c = (i / L) % C;
    const T is = invstd[c], k1 = is * (gamma ? gamma[c] : T(1));
    if (training) {
      const T xhat = (x[i] - mean[c]) * is;
      gx[i] = k1 * (gy[i] - inv_m * sums[2 * c] - inv_m * xhat * sums[2 * c + 1]);
    } else {
      gx[i] = k1 * gy[i];
    }
  }
}
}  // namespace

int64_t batchnorm_cuda_workspace(int64_t C) { return C * (kMaxSlices * 3 + 2) + 1; }

template <typename T>
void batchnorm_forward_cuda(int64_t N, int64_t C, int64_t L, const T* x, const T* gamma,
                            const T* beta, T* running_mean, T* running_var, bool training,
                            double momentum, double eps, T* y, T* mean, T* invstd, T* work) {
  if (C == 0) return;
  const int64_t M = N * L, total = M * C;
  const unsigned cblocks = static_cast<unsigned>((C + 127) / 128);
  if (training) {
    const int64_t S = num_slices(M);
    bn_stats_kernel<T><<<dim3((unsigned)C, (unsigned)S), kThreads, 0, cuda::stream()>>>(N, C, L, x,
                                                                                        work);
    CUDA_CHECK_LAUNCH("bn_stats_kernel");
    bn_finalize_kernel<T><<<cblocks, 128, 0, cuda::stream()>>>(C, S, work, running_mean,
                                                               running_var, momentum, eps, mean,
                                                               invstd);
    CUDA_CHECK_LAUNCH("bn_finalize_kernel");
  } else {
    bn_eval_stats_kernel<T><<<cblocks, 128, 0, cuda::stream()>>>(C, running_mean, running_var,
                                                                 eps, mean, invstd);
    CUDA_CHECK_LAUNCH("bn_eval_stats_kernel");
  }
  if (total == 0) return;
  bn_apply_kernel<T><<<cuda::grid_for(total), 256, 0, cuda::stream()>>>(total, C, L, x, mean,
                                                                        invstd, gamma, beta, y);
  CUDA_CHECK_LAUNCH("bn_apply_kernel");
}

template <typename T>
void batchnorm_backward_cuda(int64_t N, int64_t C, int64_t L, const T* x, const T* gy,
                             const T* mean, const T* invstd, const T* gamma, bool training, T* gx,
                             T* dgamma, T* dbeta, T* work) {
  if (C == 0) return;
  const int64_t M = N * L, total = M * C, S = num_slices(M);
  T* sums = work + C * kMaxSlices * 3;
  bn_bwd_reduce_kernel<T><<<dim3((unsigned)C, (unsigned)S), kThreads, 0, cuda::stream()>>>(
      N, C, L, x, gy, mean, work);
  CUDA_CHECK_LAUNCH("bn_bwd_reduce_kernel");
  bn_bwd_finalize_kernel<T><<<(unsigned)((C + 127) / 128), 128, 0, cuda::stream()>>>(
      C, S, work, invstd, sums, dgamma, dbeta);
  CUDA_CHECK_LAUNCH("bn_bwd_finalize_kernel");
  if (!gx || total == 0) return;
  bn_bwd_dx_kernel<T><<<cuda::grid_for(total), 256, 0, cuda::stream()>>>(
      total, C, L, T(1) / T(M > 0 ? M : 1), training, x, gy, mean, invstd, gamma, sums, gx);
  CUDA_CHECK_LAUNCH("bn_bwd_dx_kernel");
}

#define MN_BN_CUDA_INST(T)                                                                      \
  template void batchnorm_forward_cuda<T>(int64_t, int64_t, int64_t, const T*, const T*,       \
                                          const T*, T*, T*, bool, double, double, T*, T*, T*,  \
                                          T*);                                                  \
  template void batchnorm_backward_cuda<T>(int64_t, int64_t, int64_t, const T*, const T*,      \
                                           const T*, const T*, const T*, bool, T*, T*, T*, T*);
MN_BN_CUDA_INST(float)
MN_BN_CUDA_INST(double)

}  // namespace mn::kernels
