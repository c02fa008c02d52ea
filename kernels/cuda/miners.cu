// CUDA miners (kernels/miners.h). The per-pair logic is kernels/miner_math.h,
// shared with the CPU oracle. Kernels:
//   prepass  thread per anchor (hardest positive/negative, k-selections)
//   count    thread per (a, p) over the B^2 grid; warps share the anchor row, so
//            the row reads broadcast
//   scan     one block, chunked exclusive scan of int64 counts (B^2 at most)
//   fill     thread per (a, p), writing its triplets at the scanned offset
//   pairs    positive pairs per row; negatives chosen by a one-block binary
//            search for the Q-th smallest (key, index) -- keys are Philox words
//            (Random) or order-preserving distance bits (Hardest); ties resolved
//            in (i, j) order through a scan of per-row tie counts.
#include "kernels/miner_math.h"
#include "kernels/miners.h"
#include "runtime/cuda_check.h"

namespace mn::kernels {
namespace {

template <typename T>
__global__ void prepass_kernel(MinerArgs<T> A) {
  for (int64_t a = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; a < A.B;
       a += (int64_t)gridDim.x * blockDim.x)
    miner_math::prepass_anchor(A, a);
}

template <typename T>
__global__ void count_kernel(MinerArgs<T> A, int64_t* counts) {
  miner_math::CountEmit none;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < A.B * A.B;
       i += (int64_t)gridDim.x * blockDim.x)
    counts[i] = miner_math::mine_pair(A, i / A.B, i % A.B, none);
}

template <typename T>
__global__ void fill_kernel(MinerArgs<T> A, const int64_t* offsets, int64_t* out) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < A.B * A.B;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t o = offsets[i];
    if (offsets[i + 1] == o) continue;
    miner_math::WriteEmit w{out + 3 * o, i / A.B, i % A.B};
    miner_math::mine_pair(A, i / A.B, i % A.B, w);
  }
}

// The fill into a fixed capacity: rows [offsets[i], offsets[i + 1]) of pair i
// are written only when they fit; the first thread writes the count.
template <typename T>
__global__ void fill_capped_kernel(MinerArgs<T> A, const int64_t* offsets, int64_t* out, int64_t cap,
                                   int64_t* count, cuda::DeviceReport* rep) {
  const int64_t total = offsets[A.B * A.B];
  if (blockIdx.x == 0 && threadIdx.x == 0) *count = total < cap ? total : cap;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < A.B * A.B;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t o = offsets[i];
    if (offsets[i + 1] == o) continue;
    if (offsets[i + 1] > cap) {
      cuda::report_bad_index(rep, cuda::DeviceOp::MinerCapacity, total, cap);
      continue;
    }
    miner_math::WriteEmit w{out + 3 * o, i / A.B, i % A.B};
    miner_math::mine_pair(A, i / A.B, i % A.B, w);
  }
}

constexpr int kScanThreads = 1024;

__global__ void scan_kernel(int64_t n, const int64_t* counts, int64_t* offsets) {
  __shared__ int64_t sh[kScanThreads];
  __shared__ int64_t carry;
  if (threadIdx.x == 0) carry = 0;
  __syncthreads();
  for (int64_t base = 0; base < n; base += kScanThreads) {
    const int64_t i = base + threadIdx.x;
    const int64_t v = i < n ? counts[i] : 0;
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = 1; s < kScanThreads; s <<= 1) {  // Hillis-Steele inclusive scan
      int64_t add = threadIdx.x >= (unsigned)s ? sh[threadIdx.x - s] : 0;
      __syncthreads();
      sh[threadIdx.x] += add;
      __syncthreads();
    }
    if (i < n) offsets[i] = carry + sh[threadIdx.x] - v;
    __syncthreads();
    if (threadIdx.x == kScanThreads - 1) carry += sh[kScanThreads - 1];
    __syncthreads();
  }
  if (threadIdx.x == 0) offsets[n] = carry;
}

__global__ void pull_pairs_kernel(int64_t B, int k, const int64_t* possel, const int64_t* off,
                                  int64_t* out) {
  for (int64_t a = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; a < B;
       a += (int64_t)gridDim.x * blockDim.x)
    for (int64_t r = 0; r < off[a + 1] - off[a]; ++r) {
      out[2 * (off[a] + r)] = a;
      out[2 * (off[a] + r) + 1] = possel[a * k + r];
    }
}

// ---- pair miner -------------------------------------------------------------
template <typename T>
struct PairKey {
  int64_t B;
  const T* dist;
  const int64_t* labels;
  PairNegatives neg;
  uint64_t seed, offset;
  __device__ bool is_neg(int64_t i, int64_t j) const { return j > i && labels[i] != labels[j]; }
  __device__ uint64_t key(int64_t i, int64_t j) const {
    const uint64_t lin = static_cast<uint64_t>(i) * B + j;
    return neg == PairNegatives::Random ? philox4x32_10(seed, offset + lin).v[0]
                                        : sortable_key(dist[lin]);
  }
};

__global__ void pos_count_kernel(int64_t B, const int64_t* labels, int64_t* cnt) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < B;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t c = 0;
    for (int64_t j = i + 1; j < B; ++j) c += labels[j] == labels[i];
    cnt[i] = c;
  }
}

__global__ void pos_fill_kernel(int64_t B, const int64_t* labels, const int64_t* off,
                                int64_t* pairs, int64_t* is_pos, int64_t cap) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < B;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t o = off[i];
    for (int64_t j = i + 1; j < B && o < cap; ++j)
      if (labels[j] == labels[i]) {
        pairs[2 * o] = i;
        pairs[2 * o + 1] = j;
        is_pos[o] = 1;
        ++o;
      }
  }
}

template <typename T>
__device__ int64_t block_count_le(const PairKey<T>& K, uint64_t thr, bool all, int64_t* sh) {
  int64_t c = 0;
  for (int64_t lin = threadIdx.x; lin < K.B * K.B; lin += blockDim.x) {
    const int64_t i = lin / K.B, j = lin % K.B;
    if (K.is_neg(i, j) && (all || K.key(i, j) <= thr)) ++c;
  }
  sh[threadIdx.x] = c;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  int64_t r = sh[0];
  __syncthreads();
  return r;
}

// One block: Q = min(P, #negatives), the threshold key tau (the Q-th smallest) and
// `need` = how many keys equal to tau are taken. scal: [tau, need, Q].
template <typename T>
__global__ void threshold_kernel(PairKey<T> K, const int64_t* pos_off, int64_t* scal) {
  __shared__ int64_t sh[kScanThreads];
  const int64_t P = pos_off[K.B];
  const int64_t M = block_count_le(K, 0, true, sh);
  const int64_t Q = P < M ? P : M;
  uint64_t lo = 0, hi = ~0ull;
  if (Q > 0) {
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo) / 2;
      if (block_count_le(K, mid, false, sh) >= Q) hi = mid;
      else lo = mid + 1;
    }
  }
  const int64_t lt = (Q > 0 && lo > 0) ? block_count_le(K, lo - 1, false, sh) : 0;
  if (threadIdx.x == 0) {
    scal[0] = static_cast<int64_t>(lo);
    scal[1] = Q > 0 ? Q - lt : 0;
    scal[2] = Q;
  }
}

template <typename T>
__global__ void neg_row_kernel(PairKey<T> K, const int64_t* scal, int64_t* lt_row,
                               int64_t* tie_row) {
  const uint64_t tau = static_cast<uint64_t>(scal[0]);
  const bool any = scal[2] > 0;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < K.B;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t lt = 0, tie = 0;
    if (any)
      for (int64_t j = i + 1; j < K.B; ++j) {
        if (!K.is_neg(i, j)) continue;
        const uint64_t k = K.key(i, j);
        lt += k < tau;
        tie += k == tau;
      }
    lt_row[i] = lt;
    tie_row[i] = tie;
  }
}

// sel_row[i] = lt_row[i] + the ties of row i that fall within `need` in (i, j) order.
__global__ void neg_sel_kernel(int64_t B, const int64_t* scal, const int64_t* lt_row,
                               const int64_t* tie_row, const int64_t* tie_off, int64_t* sel_row) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < B;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t left = scal[1] - tie_off[i];
    left = left < 0 ? 0 : (left > tie_row[i] ? tie_row[i] : left);
    sel_row[i] = lt_row[i] + left;
  }
}

template <typename T>
__global__ void neg_fill_kernel(PairKey<T> K, const int64_t* scal, const int64_t* tie_off,
                                const int64_t* neg_off, const int64_t* P_dev, int64_t* pairs,
                                int64_t* is_pos, int64_t cap) {
  const uint64_t tau = static_cast<uint64_t>(scal[0]);
  if (scal[2] == 0) return;
  const int64_t P = *P_dev;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < K.B;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t o = P + neg_off[i];
    int64_t tie_rank = tie_off[i];
    for (int64_t j = i + 1; j < K.B && o < cap; ++j) {
      if (!K.is_neg(i, j)) continue;
      const uint64_t k = K.key(i, j);
      bool take = k < tau;
      if (k == tau) take = tie_rank++ < scal[1];
      if (!take) continue;
      pairs[2 * o] = i;
      pairs[2 * o + 1] = j;
      is_pos[o] = 0;
      ++o;
    }
  }
}

}  // namespace

template <typename T>
void miner_prepass_cuda(const MinerArgs<T>& A) {
  prepass_kernel<T><<<cuda::grid_for(A.B, 128), 128, 0, cuda::stream()>>>(A);
  CUDA_CHECK_LAUNCH("prepass_kernel");
}

template <typename T>
void miner_count_cuda(const MinerArgs<T>& A, int64_t* counts) {
  count_kernel<T><<<cuda::grid_for(A.B * A.B), 256, 0, cuda::stream()>>>(A, counts);
  CUDA_CHECK_LAUNCH("count_kernel");
}

template <typename T>
void miner_fill_cuda(const MinerArgs<T>& A, const int64_t* offsets, int64_t* out) {
  fill_kernel<T><<<cuda::grid_for(A.B * A.B), 256, 0, cuda::stream()>>>(A, offsets, out);
  CUDA_CHECK_LAUNCH("fill_kernel");
}

template <typename T>
void miner_fill_capped_cuda(const MinerArgs<T>& A, const int64_t* offsets, int64_t* out,
                            int64_t capacity, int64_t* count) {
  fill_capped_kernel<T><<<cuda::grid_for(A.B * A.B), 256, 0, cuda::stream()>>>(A, offsets, out, capacity,
                                                                              count, cuda::device_report());
  CUDA_CHECK_LAUNCH("fill_capped_kernel");
}

void exclusive_scan_cuda(int64_t n, const int64_t* counts, int64_t* offsets) {
  scan_kernel<<<1, kScanThreads, 0, cuda::stream()>>>(n, counts, offsets);
  CUDA_CHECK_LAUNCH("scan_kernel");
}

void k_pull_pairs_cuda(int64_t B, int k, const int64_t* possel, const int64_t* offsets,
                       int64_t* out) {
  pull_pairs_kernel<<<cuda::grid_for(B, 128), 128, 0, cuda::stream()>>>(B, k, possel, offsets,
                                                                        out);
  CUDA_CHECK_LAUNCH("pull_pairs_kernel");
}

// P + Q into *count (at most the capacity); an overflow is reported.
__global__ void pair_count_kernel(const int64_t* P, const int64_t* scal, int64_t cap, int64_t* count,
                                  cuda::DeviceReport* rep) {
  const int64_t total = *P + scal[2];
  if (total > cap) cuda::report_bad_index(rep, cuda::DeviceOp::MinerCapacity, total, cap);
  *count = total < cap ? total : cap;
}

template <typename T>
void pair_mine_cuda(int64_t B, const T* dist, const int64_t* labels, PairNegatives neg,
                    uint64_t seed, uint64_t offset, int64_t* ws, Tensor* pairs_out,
                    Tensor* is_pos_out, int64_t* num_pos, int64_t capacity, Tensor* count_out) {
  auto st = cuda::stream();
  int cur = 0;  // outputs on the current device (not 0: the allocator would switch devices)
  CUDA_CHECK(cudaGetDevice(&cur));
  const Device dev = Device::cuda(cur);
  int64_t* lt_row = ws;
  int64_t* tie_row = ws + B;
  int64_t* sel_row = ws + 2 * B;
  int64_t* pos_cnt = ws + 3 * B;
  int64_t* scal = ws + 4 * B;  // tau, need, Q
  Tensor offs = Tensor::empty({3 * (B + 1)}, DType::I64, dev);
  int64_t* pos_off = offs.data<int64_t>();
  int64_t* tie_off = pos_off + (B + 1);
  int64_t* neg_off = tie_off + (B + 1);
  PairKey<T> K{B, dist, labels, neg, seed, offset};
  const unsigned g = cuda::grid_for(B, 128);
  pos_count_kernel<<<g, 128, 0, st>>>(B, labels, pos_cnt);
  CUDA_CHECK_LAUNCH("pos_count_kernel");
  exclusive_scan_cuda(B, pos_cnt, pos_off);
  threshold_kernel<T><<<1, kScanThreads, 0, st>>>(K, pos_off, scal);
  CUDA_CHECK_LAUNCH("threshold_kernel");
  neg_row_kernel<T><<<g, 128, 0, st>>>(K, scal, lt_row, tie_row);
  CUDA_CHECK_LAUNCH("neg_row_kernel");
  exclusive_scan_cuda(B, tie_row, tie_off);
  neg_sel_kernel<<<g, 128, 0, st>>>(B, scal, lt_row, tie_row, tie_off, sel_row);
  CUDA_CHECK_LAUNCH("neg_sel_kernel");
  exclusive_scan_cuda(B, sel_row, neg_off);
  if (capacity > 0) {  // a fixed size: no host read
    *num_pos = -1;
    *pairs_out = Tensor::zeros({capacity, 2}, DType::I64, dev);
    *is_pos_out = Tensor::zeros({capacity}, DType::I64, dev);
    *count_out = Tensor::empty({1}, DType::I64, dev);
    pair_count_kernel<<<1, 1, 0, st>>>(pos_off + B, scal, capacity, count_out->data<int64_t>(),
                                       cuda::device_report());
    CUDA_CHECK_LAUNCH("pair_count_kernel");
    pos_fill_kernel<<<g, 128, 0, st>>>(B, labels, pos_off, pairs_out->data<int64_t>(),
                                       is_pos_out->data<int64_t>(), capacity);
    CUDA_CHECK_LAUNCH("pos_fill_kernel");
    neg_fill_kernel<T><<<g, 128, 0, st>>>(K, scal, tie_off, neg_off, pos_off + B, pairs_out->data<int64_t>(),
                                          is_pos_out->data<int64_t>(), capacity);
    CUDA_CHECK_LAUNCH("neg_fill_kernel");
    return;
  }
  // One small device->host read: P and Q size the output.
  int64_t host[2];
  CUDA_CHECK(cudaMemcpyAsync(&host[0], pos_off + B, sizeof(int64_t), cudaMemcpyDeviceToHost, st));
  CUDA_CHECK(cudaMemcpyAsync(&host[1], scal + 2, sizeof(int64_t), cudaMemcpyDeviceToHost, st));
  CUDA_CHECK(cudaStreamSynchronize(st));
  const int64_t P = host[0], Q = host[1];
  *num_pos = P;
  *pairs_out = Tensor::empty({P + Q, 2}, DType::I64, dev);
  *is_pos_out = Tensor::empty({P + Q}, DType::I64, dev);
  if (count_out) *count_out = Tensor::full({1}, static_cast<double>(P + Q), DType::I64, dev);
  if (P + Q == 0) return;
  pos_fill_kernel<<<g, 128, 0, st>>>(B, labels, pos_off, pairs_out->data<int64_t>(),
                                     is_pos_out->data<int64_t>(), P + Q);
  CUDA_CHECK_LAUNCH("pos_fill_kernel");
  neg_fill_kernel<T><<<g, 128, 0, st>>>(K, scal, tie_off, neg_off, pos_off + B, pairs_out->data<int64_t>(),
                                        is_pos_out->data<int64_t>(), P + Q);
  CUDA_CHECK_LAUNCH("neg_fill_kernel");
}

#define MN_INST(T)                                                                            \
  template void miner_prepass_cuda<T>(const MinerArgs<T>&);                                   \
  template void miner_count_cuda<T>(const MinerArgs<T>&, int64_t*);                           \
  template void miner_fill_cuda<T>(const MinerArgs<T>&, const int64_t*, int64_t*);            \
  template void miner_fill_capped_cuda<T>(const MinerArgs<T>&, const int64_t*, int64_t*, int64_t, \
                                          int64_t*);                                          \
  template void pair_mine_cuda<T>(int64_t, const T*, const int64_t*, PairNegatives, uint64_t, \
                                  uint64_t, int64_t*, Tensor*, Tensor*, int64_t*, int64_t, Tensor*);
MN_INST(float)
MN_INST(double)
#undef MN_INST

}  // namespace mn::kernels
