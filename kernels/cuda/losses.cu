// CUDA fused metric-learning losses (kernels/losses.h). Same scalar formulas as
// the CPU oracle (loss_math). Layout of the work:
//   - term kernels: one warp per term; lanes stride over D for the squared
//     distances, a shuffle reduction, lane 0 writes loss / coefficients.
//   - global kinds: pass 1 (warp per term: distances), a one-block mean kernel,
//     pass 2 (thread per term: contributions) -- no second pass over D.
//   - reduce: one block, double accumulators, writes the (5) stats on the device.
//   - apply_grad: grid-stride over N*D; dense rows overwrite, index lists
//     accumulate with atomicAdd (float order may differ from the CPU by rounding).
// Scale factors (upstream grad x normaliser) are read from device memory, so no
// kernel here needs a host synchronisation.
#include "kernels/cuda/distance_math.cuh"
#include "kernels/losses.h"
#include "runtime/cuda_check.h"
#include "runtime/determinism.h"
#include "runtime/tensor.h"

namespace mn::kernels {
namespace {

constexpr int kWarpsPerBlock = 8;

__device__ __forceinline__ int64_t row_of(const int64_t* idx, int64_t t) {
  return idx ? idx[t] : t;
}

// True when term t names a row outside [0, r.rows) in one of its index lists (then
// reported in rep, DeviceOp::LossIndex, and the caller skips the term). Dense rows
// (r.rows == 0) are not checked.
template <typename T>
__device__ __forceinline__ bool bad_rows(const TermRows<T>& r, int64_t t, bool pair,
                                         cuda::DeviceReport* rep) {
  if (r.rows <= 0) return false;
  const int64_t* lists[3] = {r.ia, r.ip, pair ? nullptr : r.in};
  for (const int64_t* l : lists) {
    if (!l) continue;
    const int64_t v = l[t];
    if (v < 0 || v >= r.rows) {
      cuda::report_bad_index(rep, cuda::DeviceOp::LossIndex, v, r.rows);
      return true;
    }
  }
  return false;
}

// The device's report record when the rows come through index lists, else null.
template <typename T>
cuda::DeviceReport* report_for(const TermRows<T>& r) {
  return r.rows > 0 ? cuda::device_report() : nullptr;
}

// Per-row distances: the shared warp primitives (kernels/cuda/distance_math.cuh).
using dist_math::warp_sum;
using dist_math::warp_sq_l2;

unsigned warp_grid(int64_t n) {
  int64_t b = (n + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (b < 1) b = 1;
  if (b > 65535LL * 64) b = 65535LL * 64;
  return static_cast<unsigned>(b);
}

template <typename T>
__global__ void triplet_fwd_kernel(TripletLossParams P, int64_t N, int64_t D, TermRows<T> r,
                                   TermOut<T> o, cuda::DeviceReport* rep) {
  const int lane = threadIdx.x & 31;
  const int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
  const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
  const bool global = triplet_kind_is_global(P.kind);
  const bool pair = r.En == nullptr;
  const int64_t terms = r.count ? min(max(*r.count, (int64_t)0), N) : N;
  for (int64_t t = warp; t < N; t += nwarps) {
    // Padding (TermRows::count) and bad rows: every lane sees it; lane 0 zeroes the term.
    if (t >= terms || bad_rows(r, t, pair, rep)) {
      if (lane == 0) {
        o.dp[t] = o.wp[t] = T(0);
        if (o.dn) o.dn[t] = T(0);
        if (o.wn) o.wn[t] = T(0);
        o.is_pos[t] = 0;
        if (!global) {
          o.loss[t] = T(0);
          o.active[t] = 0;
        }
      }
      continue;
    }
    if (lane == 0) o.is_pos[t] = 1;  // a pull pair is a same-class pair (as the CPU kernel)
    const T* a = r.Ea + row_of(r.ia, t) * D;
    T sp = warp_sq_l2(a, r.Ep + row_of(r.ip, t) * D, D, lane);
    T sn = pair ? T(0) : warp_sq_l2(a, r.En + row_of(r.in, t) * D, D, lane);
    if (lane != 0) continue;
    T dp, kp, dn = T(0), kn = T(0);
    loss_math::dist_from_sq(P.dist, sp, &dp, &kp);
    if (!pair) loss_math::dist_from_sq(P.dist, sn, &dn, &kn);
    o.dp[t] = dp;
    if (o.dn) o.dn[t] = dn;
    if (global) {
      o.wp[t] = kp;
      o.wn[t] = kn;
      continue;
    }
    T gdp, gdn;
    bool act;
    const T w = T(P.weight);
    T l = loss_math::triplet_term(P.kind, dp, dn, T(P.margin), &gdp, &gdn, &act);
    o.loss[t] = w * l;
    o.wp[t] = w * gdp * kp;
    if (o.wn) o.wn[t] = -w * gdn * kn;
    o.active[t] = act ? 1 : 0;
  }
}

// One block: means of dp and dn (double accumulation) into mu[0], mu[1].
template <typename T>
__global__ void means_kernel(int64_t N, const T* dp, const T* dn, T* mu) {
  __shared__ double s1[256], s2[256];
  double a = 0, b = 0;
  for (int64_t t = threadIdx.x; t < N; t += blockDim.x) {
    a += dp[t];
    b += dn[t];
  }
  s1[threadIdx.x] = a;
  s2[threadIdx.x] = b;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) {
      s1[threadIdx.x] += s1[threadIdx.x + s];
      s2[threadIdx.x] += s2[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    mu[0] = N ? T(s1[0] / N) : T(0);
    mu[1] = N ? T(s2[0] / N) : T(0);
  }
}

template <typename T>
__global__ void global_pass2_kernel(TripletLossParams P, int64_t N, const T* mu, TermOut<T> o) {
  const T w = T(P.weight);
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < N;
       t += (int64_t)gridDim.x * blockDim.x) {
    T gdp, gdn;
    bool act;
    T l = loss_math::global_term(P, o.dp[t], o.dn[t], mu[0], mu[1], N, &gdp, &gdn, &act);
    o.loss[t] = w * l;
    o.wp[t] = w * gdp * o.wp[t];
    o.wn[t] = -w * gdn * o.wn[t];
    o.active[t] = act ? 1 : 0;
  }
}

template <typename T>
__global__ void contrastive_kernel(ContrastiveForm form, T M, int64_t N, int64_t D, TermRows<T> r,
                                   const int64_t* label, TermOut<T> o, cuda::DeviceReport* rep) {
  const int lane = threadIdx.x & 31;
  const int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
  const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
  const int64_t terms = r.count ? min(max(*r.count, (int64_t)0), N) : N;
  for (int64_t t = warp; t < N; t += nwarps) {
    if (t >= terms || bad_rows(r, t, true, rep)) {  // padding (TermRows::count) or a bad row
      if (lane == 0) {
        o.loss[t] = o.wp[t] = o.dp[t] = T(0);
        o.active[t] = o.is_pos[t] = 0;
      }
      continue;
    }
    T s = warp_sq_l2(r.Ea + row_of(r.ia, t) * D, r.Ep + row_of(r.ip, t) * D, D, lane);
    if (lane != 0) continue;
    T d, k;
    loss_math::dist_from_sq(DistKind::Plain, s, &d, &k);
    T l, w;
    bool pos;
    if (form == ContrastiveForm::Hadsell) {
      pos = label[t] == 0;
      if (pos) {
        l = s;
        w = T(2);
      } else {
        T h = M - d > T(0) ? M - d : T(0);
        l = h * h;
        w = T(-2) * h * k;
      }
    } else {
      pos = label[t] == 1;
      if (pos) {
        l = d;
        w = k;
      } else {
        T h = M - d;
        l = h > T(0) ? h : T(0);
        w = h > T(0) ? -k : T(0);
      }
    }
    o.loss[t] = l;
    o.wp[t] = w;
    o.dp[t] = d;
    o.active[t] = l > T(0) ? 1 : 0;
    o.is_pos[t] = pos ? 1 : 0;
  }
}

template <typename T>
__global__ void reduce_kernel(Reduction red, int64_t N, const T* loss, const T* d1, const T* d2,
                              const uint8_t* is_pos, const uint8_t* active, T* stats,
                              const int64_t* count) {
  if (count) N = min(max(*count, (int64_t)0), N);  // the padding is not reduced (TermRows::count)
  constexpr int kT = 256;
  // cnt: active terms (the stat); nz: terms with a loss > 0, MeanNonZero's
  // divisor (as loss_reduce_cpu: pml AvgNonZeroReducer).
  __shared__ double sh[7][kT];
  double v[7] = {0, 0, 0, 0, 0, 0, 0};  // sum, cnt, s1, s2, c1, c2, nz
  for (int64_t t = threadIdx.x; t < N; t += blockDim.x) {
    v[0] += loss[t];
    v[1] += active ? (active[t] ? 1 : 0) : (loss[t] > T(0) ? 1 : 0);
    v[6] += loss[t] > T(0) ? 1 : 0;
    if (d2) {
      v[2] += d1[t];
      v[3] += d2[t];
      v[4] += 1;
      v[5] += 1;
    } else if (is_pos && is_pos[t]) {
      v[2] += d1[t];
      v[4] += 1;
    } else {
      v[3] += d1[t];
      v[5] += 1;
    }
  }
  for (int k = 0; k < 7; ++k) sh[k][threadIdx.x] = v[k];
  __syncthreads();
  for (int s = kT / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s)
      for (int k = 0; k < 7; ++k) sh[k][threadIdx.x] += sh[k][threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    double cnt = sh[1][0], nz = sh[6][0];
    double norm = red == Reduction::Sum ? 1.0
                  : red == Reduction::Mean ? (N > 0 ? 1.0 / N : 0.0)
                                           : 1.0 / (nz > 1.0 ? nz : 1.0);
    stats[0] = T(sh[0][0] * norm);
    stats[1] = T(cnt);
    stats[2] = T(sh[4][0] > 0 ? sh[2][0] / sh[4][0] : 0.0);
    stats[3] = T(sh[5][0] > 0 ? sh[3][0] / sh[5][0] : 0.0);
    stats[4] = T(norm);
  }
}

template <typename T>
__global__ void apply_grad_kernel(int64_t N, int64_t D, TermRows<T> r, const T* wp, const T* wn,
                                  const T* grad_out, const T* stats, T extra, T* ga, T* gp,
                                  T* gn, bool indexed, cuda::DeviceReport* rep) {
  const T s = grad_out[0] * stats[4] * extra;
  const bool pair = r.En == nullptr;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < N * D;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t t = i / D, j = i % D;
    if (bad_rows(r, t, pair, rep)) continue;  // nothing read or written for this term
    const int64_t ra = row_of(r.ia, t), rp = row_of(r.ip, t);
    const T av = r.Ea[ra * D + j];
    const T u = av - r.Ep[rp * D + j];
    const T cp = s * wp[t];
    if (!indexed) {
      if (pair) {
        ga[i] = cp * u;
        gp[i] = -cp * u;
      } else {
        const T v = av - r.En[i];
        const T cn = s * wn[t];
        ga[i] = cp * u - cn * v;
        gp[i] = -cp * u;
        gn[i] = cn * v;
      }
    } else if (pair) {
      if (cp == T(0)) continue;
      atomicAdd(ga + ra * D + j, cp * u);
      atomicAdd(gp + rp * D + j, -cp * u);
    } else {
      const T cn = s * wn[t];
      if (cp == T(0) && cn == T(0)) continue;
      const int64_t rn = row_of(r.in, t);
      const T v = av - r.En[rn * D + j];
      atomicAdd(ga + ra * D + j, cp * u - cn * v);
      atomicAdd(gp + rp * D + j, -cp * u);
      atomicAdd(gn + rn * D + j, cn * v);
    }
  }
}

template <typename T>
__global__ void koch_fwd_kernel(int64_t N, int64_t D, const T* h1, const T* h2, const T* alpha,
                                const T* bias, const T* target, T* loss, T* dz, T* dist,
                                uint8_t* is_pos) {
  const int lane = threadIdx.x & 31;
  const int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
  const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
  for (int64_t i = warp; i < N; i += nwarps) {
    T s = T(0);
    for (int64_t j = lane; j < D; j += 32) s += alpha[j] * fabs(h1[i * D + j] - h2[i * D + j]);
    s = warp_sum(s);
    if (lane != 0) continue;
    const T z = s + bias[0], t = target[i];
    loss[i] = (z > T(0) ? z : T(0)) - t * z + log1p(exp(-fabs(z)));
    dz[i] = loss_math::sigmoid(z) - t;
    dist[i] = s;
    is_pos[i] = t > T(0.5) ? 1 : 0;
  }
}

template <typename T>
__global__ void koch_bwd_rows_kernel(int64_t N, int64_t D, const T* h1, const T* h2,
                                     const T* alpha, const T* dz, const T* grad_out,
                                     const T* stats, T* g1, T* g2) {
  const T s = grad_out[0] * stats[4];
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < N * D;
       i += (int64_t)gridDim.x * blockDim.x) {
    const T d = h1[i] - h2[i];
    const T sg = d > T(0) ? T(1) : (d < T(0) ? T(-1) : T(0));
    const T g = s * dz[i / D] * alpha[i % D] * sg;
    g1[i] = g;
    g2[i] = -g;
  }
}

// Thread per column j: galpha[j] = s sum_i dz_i |h1_ij - h2_ij| (coalesced over j).
template <typename T>
__global__ void koch_bwd_alpha_kernel(int64_t N, int64_t D, const T* h1, const T* h2,
                                      const T* dz, const T* grad_out, const T* stats,
                                      T* galpha) {
  const T s = grad_out[0] * stats[4];
  for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < D;
       j += (int64_t)gridDim.x * blockDim.x) {
    T acc = T(0);
    for (int64_t i = 0; i < N; ++i) acc += dz[i] * fabs(h1[i * D + j] - h2[i * D + j]);
    galpha[j] = s * acc;
  }
}

template <typename T>
__global__ void koch_bwd_bias_kernel(int64_t N, const T* dz, const T* grad_out, const T* stats,
                                     T* gbias) {
  __shared__ double sh[256];
  double a = 0;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) a += dz[i];
  sh[threadIdx.x] = a;
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) gbias[0] = grad_out[0] * stats[4] * T(sh[0]);
}

template <typename T>
__global__ void lmnn_combine_kernel(const T* pull, const T* push, T* out) {
  out[0] = pull[0] + push[0];
  out[1] = push[1];
  out[2] = pull[2];
  out[3] = push[3];
  out[4] = T(1);
}

}  // namespace

template <typename T>
void triplet_loss_forward_cuda(const TripletLossParams& P, int64_t N, int64_t D,
                               const TermRows<T>& rows, const TermOut<T>& out) {
  auto st = cuda::stream();
  triplet_fwd_kernel<T><<<warp_grid(N), 32 * kWarpsPerBlock, 0, st>>>(P, N, D, rows, out,
                                                                       report_for(rows));
  CUDA_CHECK_LAUNCH("triplet_fwd_kernel");
  if (!triplet_kind_is_global(P.kind)) return;
  int dev = 0;  // the current device (not 0: the allocator would switch devices)
  CUDA_CHECK(cudaGetDevice(&dev));
  Tensor mu = Tensor::empty({2}, dtype_of<T>, Device::cuda(dev));  // workspace: the two means
  means_kernel<T><<<1, 256, 0, st>>>(N, out.dp, out.dn, mu.data<T>());
  CUDA_CHECK_LAUNCH("means_kernel");
  global_pass2_kernel<T><<<cuda::grid_for(N), 256, 0, st>>>(P, N, mu.data<T>(), out);
  CUDA_CHECK_LAUNCH("global_pass2_kernel");
}

template <typename T>
void contrastive_forward_cuda(ContrastiveForm form, double margin, int64_t N, int64_t D,
                              const TermRows<T>& rows, const int64_t* label,
                              const TermOut<T>& out) {
  contrastive_kernel<T><<<warp_grid(N), 32 * kWarpsPerBlock, 0, cuda::stream()>>>(
      form, T(margin), N, D, rows, label, out, report_for(rows));
  CUDA_CHECK_LAUNCH("contrastive_kernel");
}

template <typename T>
void loss_reduce_cuda(Reduction r, int64_t N, const T* loss, const T* d1, const T* d2,
                      const uint8_t* is_pos, const uint8_t* active, T* stats, const int64_t* count) {
  reduce_kernel<T><<<1, 256, 0, cuda::stream()>>>(r, N, loss, d1, d2, is_pos, active, stats, count);
  CUDA_CHECK_LAUNCH("reduce_kernel");
}

template <typename T>
void loss_apply_grad_cuda(int64_t N, int64_t D, const TermRows<T>& rows, const T* wp,
                          const T* wn, const T* grad_out, const T* stats, T extra, T* ga,
                          T* gp, T* gn) {
  const bool indexed = rows.ia || rows.ip || rows.in;
  if (indexed)
    check_deterministic("the gradient of a loss over mined tuples",
                        "adds each tuple's rows with float atomics in an order that varies");
  apply_grad_kernel<T><<<cuda::grid_for(N * D), 256, 0, cuda::stream()>>>(
      N, D, rows, wp, wn, grad_out, stats, extra, ga, gp, gn, indexed, report_for(rows));
  CUDA_CHECK_LAUNCH("apply_grad_kernel");
}

template <typename T>
void koch_forward_cuda(int64_t N, int64_t D, const T* h1, const T* h2, const T* alpha,
                       const T* bias, const T* target, T* loss, T* dz, T* dist, uint8_t* is_pos) {
  koch_fwd_kernel<T><<<warp_grid(N), 32 * kWarpsPerBlock, 0, cuda::stream()>>>(
      N, D, h1, h2, alpha, bias, target, loss, dz, dist, is_pos);
  CUDA_CHECK_LAUNCH("koch_fwd_kernel");
}

template <typename T>
void koch_backward_cuda(int64_t N, int64_t D, const T* h1, const T* h2, const T* alpha,
                        const T* dz, const T* grad_out, const T* stats, T* g1, T* g2, T* galpha,
                        T* gbias) {
  auto st = cuda::stream();
  koch_bwd_rows_kernel<T><<<cuda::grid_for(N * D), 256, 0, st>>>(N, D, h1, h2, alpha, dz,
                                                                  grad_out, stats, g1, g2);
  CUDA_CHECK_LAUNCH("koch_bwd_rows_kernel");
  koch_bwd_alpha_kernel<T><<<cuda::grid_for(D), 256, 0, st>>>(N, D, h1, h2, dz, grad_out, stats,
                                                               galpha);
  CUDA_CHECK_LAUNCH("koch_bwd_alpha_kernel");
  koch_bwd_bias_kernel<T><<<1, 256, 0, st>>>(N, dz, grad_out, stats, gbias);
  CUDA_CHECK_LAUNCH("koch_bwd_bias_kernel");
}

template <typename T>
void lmnn_stats_combine_cuda(const T* pull, const T* push, T* out) {
  lmnn_combine_kernel<T><<<1, 1, 0, cuda::stream()>>>(pull, push, out);
  CUDA_CHECK_LAUNCH("lmnn_combine_kernel");
}

#define MN_INST(T)                                                                             \
  template void triplet_loss_forward_cuda<T>(const TripletLossParams&, int64_t, int64_t,       \
                                             const TermRows<T>&, const TermOut<T>&);           \
  template void contrastive_forward_cuda<T>(ContrastiveForm, double, int64_t, int64_t,         \
                                            const TermRows<T>&, const int64_t*,                \
                                            const TermOut<T>&);                                \
  template void loss_reduce_cuda<T>(Reduction, int64_t, const T*, const T*, const T*,          \
                                    const uint8_t*, const uint8_t*, T*, const int64_t*);       \
  template void loss_apply_grad_cuda<T>(int64_t, int64_t, const TermRows<T>&, const T*,        \
                                        const T*, const T*, const T*, T, T*, T*, T*);          \
  template void koch_forward_cuda<T>(int64_t, int64_t, const T*, const T*, const T*, const T*, \
                                     const T*, T*, T*, T*, uint8_t*);                          \
  template void koch_backward_cuda<T>(int64_t, int64_t, const T*, const T*, const T*,          \
                                      const T*, const T*, const T*, T*, T*, T*, T*);           \
  template void lmnn_stats_combine_cuda<T>(const T*, const T*, T*);
MN_INST(float)
MN_INST(double)
#undef MN_INST

}  // namespace mn::kernels
