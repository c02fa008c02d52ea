// The convolutions on the tensor-core implicit GEMM (kernels/cuda/mma_igemm.cuh), float32
// in memory, TF32 or BF16 products, FP32 accumulation:
//   forward          M = K, N = N P Q, Kd = C R S: A = w (dense, k-contiguous; 16-byte
//                    copies when C R S % 4 == 0), B = im2col(x) through the tables
//                    fwd_k_entry / fwd_n_entry; epilogue + bias (+ ReLU when fused).
//                    128 x 128 tiles, or 64 x 256 when K <= 64 (Koch's layer 1;
//                    off with MN_CONV_WIDE_TILE=0).
//   backward-data    stride 1: the forward of dy with the weights flipped and transposed
//                    (w'[c, k, R-1-r, S-1-s]) and padding dh (R-1) - ph (off with
//                    MN_CONV_BWD_FLIP=0); any other stride: A = w transposed to
//                    (C, K R S), B gathered from dy with the divisibility test
//                    (ConvBwdDataColsLoader).
//   backward-weight  M = K, N = C R S, Kd = N P Q: A = dy rows, B = im2col(x) rows, one
//                    shared k table; N P Q split over blockIdx.z into ranges of whole
//                    k-tiles so that the blocks fill whole waves of the device
//                    (wave_fit_k_per_split), the partials (splits, K, C R S) summed in a
//                    fixed order (deterministic, no atomics).
//                    128 x 128 tiles, or 64 x 128 when K <= 64.
// The tables (16-byte entries, padded to whole tiles with entries that fail the bounds
// test) depend on the geometry alone: built once per geometry and device by fill_table
// and kept (TableCache; a table is 16 bytes per k or column, about 4 MB for Koch's layer
// 2 at 150 images). The k table of a launch is staged into shared memory one k-tile at a
// time by the pipeline (kernels/mma_layout.h, run_pipeline).
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <climits>
#include <map>
#include <mutex>

#include "kernels/cuda/gemm.h"
#include "kernels/cuda/mma.h"
#include "kernels/cuda/mma_igemm.cuh"
#include "runtime/cuda_check.h"
#include "runtime/tensor.h"

namespace mn::kernels {
namespace {
using namespace mma;

using Big = TileBig;
using Wide = TileWide;
using Mid = TileMid;

ConvGeom32 geom32(const Conv2dGeom& g, const char* op) {
  const int64_t biggest = std::max({g.N * g.C * g.H * g.W, g.N * g.K * g.P * g.Q, g.K * g.C * g.R * g.S});
  MN_CHECK(biggest < INT_MAX / 2, op, ": tensors with 2^30 or more elements are not supported: ", conv2d_geom_str(g));
  return ConvGeom32{int(g.N),  int(g.C),  int(g.H),  int(g.W),  int(g.K),  int(g.R),  int(g.S), int(g.P),
                    int(g.Q),  int(g.sh), int(g.sw), int(g.ph), int(g.pw), int(g.dh), int(g.dw)};
}

enum class TableKind { FwdK, FwdN, WgradK, WgradN, BwdDataK, BwdDataN };

__global__ void fill_table(ConvGeom32 g, TableKind kind, Entry* t, int n_real, int n_total) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n_total; i += gridDim.x * blockDim.x) {
    Entry e = bad_entry();
    if (i < n_real) {
      switch (kind) {
        case TableKind::FwdK: e = fwd_k_entry(g, i); break;
        case TableKind::FwdN: e = fwd_n_entry(g, i); break;
        case TableKind::WgradK: e = wgrad_k_entry(g, i); break;
        case TableKind::WgradN: e = wgrad_n_entry(g, i); break;
        case TableKind::BwdDataK: e = bwd_data_k_entry(g, i); break;
        case TableKind::BwdDataN: e = bwd_data_n_entry(g, i); break;
      }
    }
    t[i] = e;
  }
}

int current_device() {
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  return dev;
}

bool stream_capturing() {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(cuda::stream(), &st));
  return st != cudaStreamCaptureStatusNone;
}

// A table of n_real entries padded to a multiple of `pad`, from the caching allocator.
Tensor build_table(const ConvGeom32& g, TableKind kind, int n_real, int pad) {
  const int n_total = round_up(std::max(n_real, 1), pad);
  Tensor t = Tensor::empty({int64_t(n_total) * 4}, DType::I32, Device::cuda(current_device()));
  fill_table<<<cuda::grid_for(n_total), 256, 0, cuda::stream()>>>(g, kind, reinterpret_cast<Entry*>(t.data<int32_t>()),
                                                                   n_real, n_total);
  CUDA_CHECK_LAUNCH("mma_conv_fill_table");
  return t;
}

// The tables of every geometry seen, per device: a training step asks for the same few
// geometries every step. Filled only outside CUDA-graph capture (a table first built
// inside a capture would hold its entries only once the graph has been replayed); a
// capture of a geometry not seen eagerly builds its tables per call, as a miss always did.
// Kept for the life of the process (a few MB per layer).
Tensor make_table(const ConvGeom32& g, TableKind kind, int n_real, int pad) {
  using Key = std::array<int, 19>;
  static std::mutex mu;
  // Never destroyed: its tensors must not be handed back to a caching allocator that a static
  // destructor may already have torn down at exit.
  static auto& cache = *new std::map<Key, Tensor>;
  const Key key{g.N,  g.C,  g.H,  g.W,  g.K,  g.R, g.S,    g.P, g.Q,           g.sh,
                g.sw, g.ph, g.pw, g.dh, g.dw, int(kind), n_real, pad, current_device()};
  std::lock_guard<std::mutex> lock(mu);
  if (const auto it = cache.find(key); it != cache.end()) return it->second;
  Tensor t = build_table(g, kind, n_real, pad);
  if (!stream_capturing()) cache.emplace(key, t);
  return t;
}
const Entry* entries(const Tensor& t) { return reinterpret_cast<const Entry*>(t.data<int32_t>()); }

void check_math(Precision p, const char* op) {
  MN_CHECK(p == Precision::TF32 || p == Precision::BF16, op, ": the tensor-core kernels run TF32 or BF16, not ",
           precision_name(p));
  check_tf32_device(op);
}

// ---- forward ---------------------------------------------------------------------------------
template <class Cfg, MathKind MATH, int VA>
void forward_cfg(const ConvGeom32& g, const float* x, const float* w, const float* b, float* y, bool relu,
                 const char* name) {
  using L = StageLayout<Cfg, true, false>;
  const int M = g.K, N = g.N * g.P * g.Q, Kd = g.C * g.R * g.S;
  const Tensor kt = make_table(g, TableKind::FwdK, Kd, Cfg::BK);
  const Tensor nt = make_table(g, TableKind::FwdN, N, Cfg::BN);
  DenseLoader<Cfg, typename L::ATile, VA> la;
  la.p = w, la.ld = Kd, la.x_ext = M;
  ConvColsLoader<Cfg, typename L::BTile> lb;
  lb.x = x, lb.ntab = entries(nt), lb.H = g.H, lb.W = g.W;
  ConvFwdEpilogue epi;
  epi.y = y, epi.bias = b, epi.M = M, epi.ncols = N, epi.PQ = g.P * g.Q, epi.dPQ = FastDiv(std::max(1, g.P * g.Q));
  epi.relu = relu;
  launch_mma_igemm<Cfg, L, MATH>(la, lb, epi, M, N, Kd, ZArgs{}, 1, entries(kt), name);
}

template <MathKind MATH>
void forward_math(const ConvGeom32& g, const float* x, const float* w, const float* b, float* y, bool relu,
                  const char* name) {
  const bool va = (g.C * g.R * g.S) % 4 == 0 && (reinterpret_cast<uintptr_t>(w) & 15) == 0;
  if (g.K <= 64 && cuda_speedups().conv_wide_tile) {
    if (va) forward_cfg<Wide, MATH, 4>(g, x, w, b, y, relu, name);
    else forward_cfg<Wide, MATH, 1>(g, x, w, b, y, relu, name);
  } else {
    if (va) forward_cfg<Big, MATH, 4>(g, x, w, b, y, relu, name);
    else forward_cfg<Big, MATH, 1>(g, x, w, b, y, relu, name);
  }
}

void forward_any(Precision p, const ConvGeom32& g, const float* x, const float* w, const float* b, float* y,
                 bool relu, const char* name) {
  if (p == Precision::BF16) forward_math<MathKind::BF16>(g, x, w, b, y, relu, name);
  else forward_math<MathKind::TF32>(g, x, w, b, y, relu, name);
}

// wf[c, k, rs] = w[k, c, flip ? RS-1-rs : rs].
__global__ void transpose_kc(const float* __restrict__ w, float* __restrict__ wf, int K, int C, int RS, bool flip,
                             int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    wf[i] = w[transposed_weight_src(i, K, C, RS, flip)];
}

Tensor transposed_weights(const ConvGeom32& g, const float* w, bool flip) {
  const int64_t total = int64_t(g.K) * g.C * g.R * g.S;
  Tensor wt = Tensor::empty({g.C, g.K, g.R, g.S}, DType::F32, Device::cuda(current_device()));
  transpose_kc<<<cuda::grid_for(total), 256, 0, cuda::stream()>>>(w, wt.data<float>(), g.K, g.C, g.R * g.S, flip,
                                                                  total);
  CUDA_CHECK_LAUNCH("mma_conv_transpose_weights");
  return wt;
}

// ---- backward-data, any stride ------------------------------------------------------------------
template <MathKind MATH>
void backward_data_strided(const ConvGeom32& g, const float* dy, const float* w, float* dx, const char* name) {
  using Cfg = Big;
  using L = StageLayout<Cfg, true, false>;
  const int M = g.C, N = g.N * g.H * g.W, Kd = g.K * g.R * g.S;
  const Tensor wt = transposed_weights(g, w, false);
  const Tensor kt = make_table(g, TableKind::BwdDataK, Kd, Cfg::BK);
  const Tensor nt = make_table(g, TableKind::BwdDataN, N, Cfg::BN);
  DenseLoader<Cfg, typename L::ATile, 1> la;
  la.p = wt.data<float>(), la.ld = Kd, la.x_ext = M;
  ConvBwdDataColsLoader<Cfg, typename L::BTile> lb;
  lb.dy = dy, lb.ntab = entries(nt), lb.P = g.P, lb.Q = g.Q;
  lb.dsh = FastDiv(g.sh), lb.dsw = FastDiv(g.sw);
  ConvFwdEpilogue epi;  // dx (N, C, H, W): rows c, columns (n, h, w)
  epi.y = dx, epi.M = M, epi.ncols = N, epi.PQ = g.H * g.W, epi.dPQ = FastDiv(std::max(1, g.H * g.W));
  launch_mma_igemm<Cfg, L, MATH>(la, lb, epi, M, N, Kd, ZArgs{}, 1, entries(kt), name);
}

// ---- backward-weight -----------------------------------------------------------------------------
__global__ void sum_partials(const float* __restrict__ part, float* __restrict__ out, int splits, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float acc = 0.f;
    for (int z = 0; z < splits; ++z) acc += part[z * n + i];
    out[i] = acc;
  }
}

template <class Cfg, MathKind MATH>
void backward_weight_cfg(const ConvGeom32& g, const float* x, const float* dy, float* dw, const char* name) {
  using L = StageLayout<Cfg, true, true>;
  using LA = WgradDyLoader<Cfg, typename L::ATile>;
  using LB = WgradImgLoader<Cfg, typename L::BTile>;
  const int M = g.K, N = g.C * g.R * g.S, Kd = g.N * g.P * g.Q;
  // Splits that fill whole waves of this device (its SMs x this kernel's blocks per SM).
  const int64_t tiles = int64_t((M + Cfg::BM - 1) / Cfg::BM) * ((N + Cfg::BN - 1) / Cfg::BN);
  const int64_t wave = int64_t(cuda_sm_count()) * mma_igemm_blocks_per_sm<Cfg, L, MATH, LA, LB, SplitEpilogue>();
  const int k_per_z = wave_fit_k_per_split(Kd, tiles, wave, Cfg::BK);
  const int64_t splits = (Kd + k_per_z - 1) / k_per_z;
  const Tensor kt = make_table(g, TableKind::WgradK, Kd, Cfg::BK);
  const Tensor nt = make_table(g, TableKind::WgradN, N, Cfg::BN);
  LA la;
  la.dy = dy, la.M = M, la.PQ = g.P * g.Q;
  LB lb;
  lb.x = x, lb.ntab = entries(nt), lb.H = g.H, lb.W = g.W;
  const ZArgs za{k_per_z, 0, 0};
  SplitEpilogue epi;
  epi.M = M, epi.N = N;
  if (splits == 1) {
    epi.out = dw;
    launch_mma_igemm<Cfg, L, MATH>(la, lb, epi, M, N, Kd, za, 1, entries(kt), name);
    return;
  }
  const int64_t total = int64_t(M) * N;
  Tensor part = Tensor::empty({splits, total}, DType::F32, Device::cuda(current_device()));
  epi.out = part.data<float>();
  launch_mma_igemm<Cfg, L, MATH>(la, lb, epi, M, N, Kd, za, int(splits), entries(kt), name);
  sum_partials<<<cuda::grid_for(total), 256, 0, cuda::stream()>>>(part.data<float>(), dw, int(splits), total);
  CUDA_CHECK_LAUNCH("mma_conv_bwd_weight_sum_partials");
}

template <MathKind MATH>
void backward_weight_math(const ConvGeom32& g, const float* x, const float* dy, float* dw, const char* name) {
  if (g.K <= 64) backward_weight_cfg<Mid, MATH>(g, x, dy, dw, name);
  else backward_weight_cfg<Big, MATH>(g, x, dy, dw, name);
}

}  // namespace

void mma_conv_forward_cuda(Precision p, const Conv2dGeom& geom, const float* x, const float* w, const float* b,
                           float* y, bool relu) {
  const char* name = p == Precision::BF16 ? "conv_fwd_mma_bf16" : "conv_fwd_mma_tf32";
  const ConvGeom32 g = geom32(geom, name);
  check_math(p, name);
  forward_any(p, g, x, w, b, y, relu, name);
}

void mma_conv_backward_data_cuda(Precision p, const Conv2dGeom& geom, const float* dy, const float* w, float* dx) {
  const bool bf16 = p == Precision::BF16;
  const char* name = bf16 ? "conv_bwd_data_mma_bf16" : "conv_bwd_data_mma_tf32";
  const ConvGeom32 g = geom32(geom, name);
  check_math(p, name);
  if (bwd_data_as_forward(g) && cuda_speedups().conv_bwd_data_flip) {  // stride 1: a forward of dy
    const Tensor wf = transposed_weights(g, w, true);
    forward_any(p, bwd_data_forward_geometry(g), dy, wf.data<float>(), nullptr, dx, false, name);
    return;
  }
  if (bf16) backward_data_strided<MathKind::BF16>(g, dy, w, dx, name);
  else backward_data_strided<MathKind::TF32>(g, dy, w, dx, name);
}

void mma_conv_backward_weight_cuda(Precision p, const Conv2dGeom& geom, const float* x, const float* dy, float* dw) {
  const char* name = p == Precision::BF16 ? "conv_bwd_weight_mma_bf16" : "conv_bwd_weight_mma_tf32";
  const ConvGeom32 g = geom32(geom, name);
  check_math(p, name);
  if (p == Precision::BF16) backward_weight_math<MathKind::BF16>(g, x, dy, dw, name);
  else backward_weight_math<MathKind::TF32>(g, x, dy, dw, name);
}

}  // namespace mn::kernels
