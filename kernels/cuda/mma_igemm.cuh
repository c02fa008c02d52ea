// The tensor-core implicit GEMM: C (M x N) = A (M x Kd) * B (Kd x N) on mma.sync
// (TF32 m16n8k8 or BF16 m16n8k16, FP32 accumulation), the operands gathered from global
// memory into shared memory by cp.async in a STAGES-deep pipeline, read into fragments
// with ldmatrix (k-contiguous tiles) or 32-bit shared loads (m/n-contiguous tiles).
// Every index the kernel computes comes from kernels/mma_layout.h, where the CPU tests
// check it against a scalar model of the tile; this file holds what only a GPU runs:
// the PTX wrappers and the pipeline.
//
// Pipeline: run_pipeline in kernels/mma_layout.h (shared with the CPU emulator, which
// checks it): STAGES-deep cp.async stages, one __syncthreads per k-tile, the refill of a
// stage issued in chunks between the k-steps of the tile being multiplied, the k-tile's
// gather-table entries staged in shared memory one k-tile ahead of the gathers.
//
// Grid: (N tiles, M tiles, z). z is a batch index (dense GEMM: the loaders and the
// epilogue offset their pointers by z times a stride; the k range is whole) or a split-K
// index (k_per_z > 0: z takes k in [z k_per_z, (z+1) k_per_z), a multiple of BK, and the
// epilogue writes partial z).
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "kernels/mma_layout.h"
#include "runtime/cuda_check.h"

namespace mn::kernels::mma {

enum class MathKind : int { TF32 = 0, BF16 = 1 };

// Shared memory seen by the fragment loads (ldmatrix takes a 32-bit shared address).
struct DevMem {
  uint32_t base_u32;
  const float* base;
  template <class F>
  __device__ __forceinline__ void ldsm4(uint32_t (&r)[4], int lane, F addr) const {
    const uint32_t a = base_u32 + 4u * uint32_t(addr(lane));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  }
  __device__ __forceinline__ uint32_t lds(int off) const { return __float_as_uint(base[off]); }
};

// cp.async into shared memory; src-size 0 zero-fills without reading.
struct DevCopy {
  uint32_t base_u32;
  template <int V>
  __device__ __forceinline__ void copy(int off, const float* src, bool ok) const {
    const uint32_t d = base_u32 + 4u * uint32_t(off);
    if constexpr (V == 4) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(ok ? 16 : 0));
    } else {
      asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(ok ? 4 : 0));
    }
  }
};

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// One warp multiplies k-step ks (8 deep for TF32, 16 for BF16) of one shared-memory stage
// into its accumulators. TF32 rounds each fragment element as it is loaded: with 64 x 64
// warp tiles that is one cvt per MMA, cheaper than a rounding pass over the stage in
// shared memory (another read and write of every element, the kernel's scarcest
// bandwidth).
template <class Cfg, class Layout, MathKind MATH>
__device__ __forceinline__ void warp_kstep_mma(const DevMem& mem, int stage, int ks, int lane, int wm0, int wn0,
                                               float (&acc)[Cfg::FM][Cfg::FN][4]) {
  using AT = typename Layout::ATile;
  using BT = typename Layout::BTile;
  const int abase = Layout::a_off(stage), bbase = Layout::b_off(stage);
  if constexpr (MATH == MathKind::TF32) {
    const int kk = 8 * ks;
    uint32_t a[Cfg::FM][4], b[Cfg::FN][2];
    load_a_frags<Cfg, AT>(mem, abase, lane, wm0, kk, a);
    load_b_frags<Cfg, BT>(mem, bbase, lane, wn0, kk, b);
#pragma unroll
    for (int fm = 0; fm < Cfg::FM; ++fm)
#pragma unroll
      for (int i = 0; i < 4; ++i) a[fm][i] = to_tf32(a[fm][i]);
#pragma unroll
    for (int fn = 0; fn < Cfg::FN; ++fn)
#pragma unroll
      for (int i = 0; i < 2; ++i) b[fn][i] = to_tf32(b[fn][i]);
#pragma unroll
    for (int fm = 0; fm < Cfg::FM; ++fm)
#pragma unroll
      for (int fn = 0; fn < Cfg::FN; ++fn) mma_tf32(acc[fm][fn], a[fm], b[fn]);
  } else {
    const int kk = 16 * ks;
    uint32_t a[Cfg::FM][4], b[Cfg::FN][2];
    {
      uint32_t h0[Cfg::FM][4], h1[Cfg::FM][4];
      load_a_frags<Cfg, AT>(mem, abase, lane, wm0, kk, h0);
      load_a_frags<Cfg, AT>(mem, abase, lane, wm0, kk + 8, h1);
#pragma unroll
      for (int fm = 0; fm < Cfg::FM; ++fm) bf16_a_from_halves(h0[fm], h1[fm], a[fm]);
    }
    {
      uint32_t h0[Cfg::FN][2], h1[Cfg::FN][2];
      load_b_frags<Cfg, BT>(mem, bbase, lane, wn0, kk, h0);
      load_b_frags<Cfg, BT>(mem, bbase, lane, wn0, kk + 8, h1);
#pragma unroll
      for (int fn = 0; fn < Cfg::FN; ++fn) bf16_b_from_halves(h0[fn], h1[fn], b[fn]);
    }
#pragma unroll
    for (int fm = 0; fm < Cfg::FM; ++fm)
#pragma unroll
      for (int fn = 0; fn < Cfg::FN; ++fn) mma_bf16(acc[fm][fn], a[fm], b[fn]);
  }
}

// Batch / split-K arguments (see the file comment).
struct ZArgs {
  int k_per_z = 0;             // > 0: split-K with this many k per z (a multiple of BK)
  int64_t a_zoff = 0, b_zoff = 0;  // batch: pointer offsets per z (dense loaders)
};

// One thread's side of run_pipeline (kernels/mma_layout.h).
template <class Cfg, class Layout, MathKind MATH, class LA, class LB>
struct DevPipeOps {
  static constexpr int KSTEPS = ksteps(MATH == MathKind::BF16, Cfg::BK);
  const LA& la;
  const LB& lb;
  const DevMem& mem;
  const DevCopy& cp;
  const Entry* ktable;  // the k table the operands gather through, or null
  int tid, lane, wm0, wn0, kbeg, kend, ntiles;
  float (&acc)[Cfg::FM][Cfg::FN][4];
  __device__ __forceinline__ const Entry* kents(int t) const {
    return reinterpret_cast<const Entry*>(mem.base + Layout::kt_off(t % Cfg::STAGES));
  }
  __device__ __forceinline__ void ktab(int t) const {
    if (ktable != nullptr && t < ntiles && tid < Cfg::BK)
      cp.template copy<4>(Layout::kt_off(t % Cfg::STAGES) + 4 * tid,
                          reinterpret_cast<const float*>(ktable + kbeg + t * Cfg::BK + tid), true);
  }
  __device__ __forceinline__ void data(int t, int c) const {
    if (t >= ntiles) return;
    const int stage = t % Cfg::STAGES, k0 = kbeg + t * Cfg::BK;
    la.template load<KSTEPS>(cp, Layout::a_off(stage), tid, k0, kend, kents(t), c);
    lb.template load<KSTEPS>(cp, Layout::b_off(stage), tid, k0, kend, kents(t), c);
  }
  __device__ __forceinline__ void commit() const { cp_async_commit(); }
  template <int N>
  __device__ __forceinline__ void wait() const {
    cp_async_wait<N>();
  }
  __device__ __forceinline__ void barrier() const { __syncthreads(); }
  __device__ __forceinline__ void compute(int t, int ks) const {
    warp_kstep_mma<Cfg, Layout, MATH>(mem, t % Cfg::STAGES, ks, lane, wm0, wn0, acc);
  }
};

template <class Cfg, class Layout, MathKind MATH, class LA, class LB, class Epi>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS)
    mma_igemm_kernel(LA la, LB lb, Epi epi, int Kd, ZArgs za, const Entry* ktab) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int m0 = blockIdx.y * Cfg::BM, n0 = blockIdx.x * Cfg::BN, z = blockIdx.z;
  int kbeg = 0, kend = Kd;
  if (za.k_per_z > 0) {
    kbeg = z * za.k_per_z;
    kend = min(Kd, kbeg + za.k_per_z);
  }
  la.begin_block(m0, tid, int64_t(z) * za.a_zoff);
  lb.begin_block(n0, tid, int64_t(z) * za.b_zoff);
  const uint32_t smem_u32 = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const DevMem mem{smem_u32, smem};
  const DevCopy cp{smem_u32};
  const int ntiles = kend > kbeg ? (kend - kbeg + Cfg::BK - 1) / Cfg::BK : 0;

  float acc[Cfg::FM][Cfg::FN][4];
#pragma unroll
  for (int fm = 0; fm < Cfg::FM; ++fm)
#pragma unroll
    for (int fn = 0; fn < Cfg::FN; ++fn)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[fm][fn][i] = 0.f;

  const int wm0 = Cfg::warp_m0(warp), wn0 = Cfg::warp_n0(warp);
  DevPipeOps<Cfg, Layout, MATH, LA, LB> ops{la, lb, mem, cp, ktab, tid, lane, wm0, wn0, kbeg, kend, ntiles, acc};
  run_pipeline<Cfg::STAGES, DevPipeOps<Cfg, Layout, MATH, LA, LB>::KSTEPS>(ops, ntiles);

#pragma unroll
  for (int fm = 0; fm < Cfg::FM; ++fm)
#pragma unroll
    for (int fn = 0; fn < Cfg::FN; ++fn)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const RC e = acc_rc(lane, i);
        epi.store(m0 + wm0 + 16 * fm + e.r, n0 + wn0 + 8 * fn + e.c, acc[fm][fn][i], z);
      }
#else
  __trap();  // unreachable: the host refuses devices below sm_80
#endif
}

// Raises one instantiation's dynamic shared-memory limit (above the default 48 KB) and
// returns how many of its blocks an SM of the current device holds at once
// (cudaOccupancyMaxActiveBlocksPerMultiprocessor), once per device.
template <class Cfg, class Layout, MathKind MATH, class LA, class LB, class Epi>
int mma_igemm_blocks_per_sm() {
  auto kern = mma_igemm_kernel<Cfg, Layout, MATH, LA, LB, Epi>;
  static std::atomic<int> per_sm[64] = {};  // 0: not asked yet on that device
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < 64 && per_sm[dev].load() > 0) return per_sm[dev].load();
  CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, Layout::BYTES));
  int n = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kern, Cfg::THREADS, Layout::BYTES));
  MN_CHECK(n > 0, "mma_igemm: a ", Cfg::BM, " x ", Cfg::BN, " block (", Cfg::THREADS, " threads, ", Layout::BYTES,
           " bytes of shared memory) does not fit on device ", dev);
  if (dev < 64) per_sm[dev].store(n);
  return n;
}

// Launches one instantiation on grid (N tiles, M tiles, gz).
template <class Cfg, class Layout, MathKind MATH, class LA, class LB, class Epi>
void launch_mma_igemm(const LA& la, const LB& lb, const Epi& epi, int M, int N, int Kd, ZArgs za, int gz,
                      const Entry* ktab, const char* name) {
  mma_igemm_blocks_per_sm<Cfg, Layout, MATH, LA, LB, Epi>();  // sets the shared-memory limit
  const dim3 grid(unsigned((N + Cfg::BN - 1) / Cfg::BN), unsigned((M + Cfg::BM - 1) / Cfg::BM), unsigned(gz));
  MN_CHECK(grid.y <= 65535 && grid.z <= 65535, name, ": too many tiles (M=", M, ", z=", gz, ")");
  mma_igemm_kernel<Cfg, Layout, MATH, LA, LB, Epi>
      <<<grid, Cfg::THREADS, Layout::BYTES, cuda::stream()>>>(la, lb, epi, Kd, za, ktab);
  CUDA_CHECK_LAUNCH(name);
}

}  // namespace mn::kernels::mma
