// Index maths of the tensor-core implicit GEMM (kernels/cuda/mma_igemm.cuh), compiled
// for the host and the device, so that the CPU tests (tests/kernels/test_mma_layout.cpp)
// check every address the kernel computes against a scalar model of the tile before a
// GPU ever runs it. Nothing here issues a GPU instruction: the kernel passes its PTX
// wrappers in as small policy objects (Mem, Copy), and the tests pass emulations.
//
// What is here, in the order the kernel uses it:
//   1. The PTX fragment layouts of mma.m16n8k8 .tf32 and of ldmatrix (PTX ISA,
//      "Matrix Fragments for mma.m16n8k8" and "ldmatrix"): which lane holds which
//      element of the A, B and C/D fragments.
//   2. The block tile (TileCfg: BM x BN outputs, BK = 32-deep k-tiles, warps in a
//      WARPS_M x WARPS_N grid, STAGES cp.async stages) and each operand's shared-memory
//      tile: ROWS x COLS floats, COLS contiguous, padded so that fragment reads are
//      free of bank conflicts (see SmemTile).
//   3. Fragment loads of one warp for one 8-deep k-step: ldmatrix.x4 where the tile is
//      k-contiguous, 32-bit shared loads where it is m- or n-contiguous; both give the
//      registers in the .tf32 layout. BF16 (mma.m16n8k16) packs two such k-steps:
//      the lane's logical k {2t, 2t+1, 2t+8, 2t+9} are taken as the physical k
//      {t, t+4, 8+t, 12+t} for A and B alike. The order of k inside one MMA does not
//      change the sum, so the same loads serve both precisions (bf16_from_halves).
//   4. Rounding: TF32 round-to-nearest (ties away, cvt.rna) of each fragment element,
//      BF16 round-to-nearest-even (cvt.rn.bf16x2) when packing pairs.
//   5. The operand loaders (global -> shared through cp.async; 16-byte copies where a
//      dense operand's rows allow, 4-byte otherwise; out-of-range elements are
//      zero-filled): a dense matrix in its storage order (GEMM operands, the forward's
//      weights), the forward's im2col columns, and the weight gradient's dy rows and
//      im2col rows. The convolution operands are gathered through per-call tables
//      (GatherEntry): element (k, x) lives at base[k.off + x.off] and is inside the
//      image when 0 <= k.h + x.h < H and 0 <= k.w + x.w < W, so the kernel decodes no
//      (c, r, s) or (n, p, q) index: one table read and four integer operations per
//      element.
//   6. The epilogues: C = alpha acc + beta C (GEMM), y = acc + bias (then ReLU when
//      fused) scattered to (N, K, P, Q) (forward), and split-K partials (weight gradient).
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/fastdiv.h"

#if defined(__CUDACC__)
#define MN_MMA_HD __host__ __device__ __forceinline__
#else
#define MN_MMA_HD inline
#endif
#if defined(__CUDA_ARCH__)  // the device pass only (the host compiler warns on the pragma)
#define MN_MMA_UNROLL _Pragma("unroll")
#else
#define MN_MMA_UNROLL
#endif

namespace mn::kernels::mma {

// ---- 1. PTX fragment layouts ------------------------------------------------------
// group g = lane / 4, thread-in-group t = lane % 4.
struct RC {
  int r, c;
};
MN_MMA_HD int lane_g(int lane) { return lane >> 2; }
MN_MMA_HD int lane_t(int lane) { return lane & 3; }
// mma.m16n8k8 .tf32, A (16 x 8, r = m, c = k): a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4).
MN_MMA_HD RC tf32_a(int lane, int i) { return {lane_g(lane) + 8 * (i & 1), lane_t(lane) + 4 * (i >> 1)}; }
// B (8 x 8, r = k, c = n): b0 (t, g), b1 (t+4, g).
MN_MMA_HD RC tf32_b(int lane, int i) { return {lane_t(lane) + 4 * i, lane_g(lane)}; }
// C/D (16 x 8, float): c0 (g, 2t), c1 (g, 2t+1), c2 (g+8, 2t), c3 (g+8, 2t+1); the same
// for .tf32 (m16n8k8) and .bf16 (m16n8k16).
MN_MMA_HD RC acc_rc(int lane, int i) { return {lane_g(lane) + 8 * (i >> 1), 2 * lane_t(lane) + (i & 1)}; }

// ldmatrix.sync.aligned.m8n8.x4.shared.b16 on 32-bit data: each 8 x 8 b16 matrix is 8 rows
// of 4 floats (16 bytes). Lane l gives the address of row l % 8 of matrix l / 8 and
// receives, in register j, the float at row l / 4, column l % 4 of matrix j: the .tf32
// (g, t) position. The address lane l gives, as (row, col) offsets inside a 16 x 8 A
// fragment (rows m, k contiguous): matrices (m 0-7, k 0-3), (m 8-15, k 0-3),
// (m 0-7, k 4-7), (m 8-15, k 4-7) -> registers a0, a1, a2, a3.
MN_MMA_HD RC ldsm_a_src(int lane) {
  const int j = lane >> 3, i = lane & 7;
  return {i + 8 * (j & 1), 4 * (j >> 1)};
}
// ... and inside a pair of B fragments (rows n 0-15, k contiguous 0-7): matrices
// (n 0-7, k 0-3), (n 0-7, k 4-7), (n 8-15, k 0-3), (n 8-15, k 4-7) -> b0, b1 of the
// fragment at n0, then b0, b1 of the fragment at n0 + 8.
MN_MMA_HD RC ldsm_b_src(int lane) {
  const int j = lane >> 3, i = lane & 7;
  return {i + 8 * (j >> 1), 4 * (j & 1)};
}

// ---- 2. The block tile -------------------------------------------------------------
template <int BM_, int BN_, int WARPS_M_, int WARPS_N_, int STAGES_>
struct TileCfg {
  static constexpr int BM = BM_, BN = BN_, BK = 32;
  static constexpr int WARPS_M = WARPS_M_, WARPS_N = WARPS_N_, WARPS = WARPS_M * WARPS_N;
  static constexpr int THREADS = 32 * WARPS, STAGES = STAGES_;
  static constexpr int WTM = BM / WARPS_M, WTN = BN / WARPS_N;  // one warp's sub-tile
  static constexpr int FM = WTM / 16, FN = WTN / 8;             // MMA tiles per warp
  static_assert(BM % (16 * WARPS_M) == 0 && BN % (16 * WARPS_N) == 0, "warp tiles of 16 x 16 multiples");
  static_assert(FN % 2 == 0, "B fragments are loaded in pairs (ldmatrix.x4)");
  static_assert(STAGES >= 2, "a cp.async pipeline needs two stages");
  // Warp w's sub-tile origin inside the block tile.
  MN_MMA_HD static int warp_m0(int warp) { return (warp / WARPS_N) * WTM; }
  MN_MMA_HD static int warp_n0(int warp) { return (warp % WARPS_N) * WTN; }
};

// An operand tile in shared memory: ROWS x COLS floats, COLS contiguous, row stride LD.
// k-contiguous tiles (COLS = BK = 32) are read by ldmatrix: 8 consecutive rows at one
// 16-byte column; LD = 36 floats = 144 bytes = 16 (mod 128) puts them in 8 distinct
// 16-byte bank groups. m/n-contiguous tiles (COLS = 64, 128, 256) are read by 32-bit
// loads at (k = t + 4 i, x = g + ...): LD = COLS + 8 = 8 (mod 32) puts bank 8 t + g on
// every lane, 32 distinct banks. Both LDs keep rows 16-byte aligned (16-byte cp.async).
template <int ROWS_, int COLS_>
struct SmemTile {
  static constexpr int ROWS = ROWS_, COLS = COLS_;
  static constexpr int LD = COLS + (COLS == 32 ? 4 : 8);
  static constexpr int SIZE = ROWS * LD;  // floats
  static_assert(COLS == 32 || COLS % 32 == 0, "k-contiguous tiles are 32 wide");
  static_assert(LD % 4 == 0 && SIZE % 4 == 0, "16-byte aligned rows and tiles");
  MN_MMA_HD static int at(int r, int c) { return r * LD + c; }
};

// The block tiles the launchers use (kernels/cuda/mma_gemm.cu, mma_conv.cu). Each takes
// at most ~130 KB of shared memory (1 block per SM of 256 threads; registers allow no more).
using TileBig = TileCfg<128, 128, 2, 4, 3>;  // warps of 64 x 32: GEMMs and most convolutions
using TileWide = TileCfg<64, 256, 1, 8, 3>;  // warps of 64 x 32: forwards with K <= 64 (Koch's layer 1)
using TileMid = TileCfg<64, 128, 2, 4, 4>;   // warps of 32 x 32: weight gradients with K <= 64

// Operand tile of XT (= BM for A, BN for B) rows or columns: KCONTIG stores (x, k),
// otherwise (k, x).
template <class Cfg, bool KCONTIG, int XT>
struct OperandTile {
  using S = SmemTile<KCONTIG ? XT : Cfg::BK, KCONTIG ? Cfg::BK : XT>;
  static constexpr bool kcontig = KCONTIG;
  MN_MMA_HD static int at_kx(int k, int x) { return KCONTIG ? S::at(x, k) : S::at(k, x); }
};

template <class Cfg, bool A_KCONTIG, bool B_KCONTIG>
struct StageLayout {
  using ATile = OperandTile<Cfg, A_KCONTIG, Cfg::BM>;
  using BTile = OperandTile<Cfg, B_KCONTIG, Cfg::BN>;
  static constexpr int A_SIZE = ATile::S::SIZE, B_SIZE = BTile::S::SIZE;
  static constexpr int STAGE = A_SIZE + B_SIZE;  // floats per stage
  static constexpr int BYTES = Cfg::STAGES * STAGE * 4;
  MN_MMA_HD static int a_off(int stage) { return stage * STAGE; }
  MN_MMA_HD static int b_off(int stage) { return stage * STAGE + A_SIZE; }
};

// Which tile elements thread tid copies: V consecutive floats (one cp.async) at column
// col(tid) of rows row(tid, i), i < COUNT. Consecutive threads take consecutive columns
// (coalesced global reads along the contiguous dimension).
template <int ROWS, int COLS, int V, int THREADS>
struct LoadMap {
  static constexpr int PER_ROW = COLS / V, STEP = THREADS / PER_ROW, COUNT = ROWS / STEP;
  static_assert(V == 1 || V == 4, "4- or 16-byte copies");
  static_assert(COLS % V == 0 && THREADS % PER_ROW == 0 && STEP > 0 && ROWS % STEP == 0,
                "the threads cover the tile evenly");
  MN_MMA_HD static int row(int tid, int i) { return tid / PER_ROW + STEP * i; }
  MN_MMA_HD static int col(int tid) { return (tid % PER_ROW) * V; }
};

// ---- 4. Rounding ----------------------------------------------------------------------
MN_MMA_HD uint32_t f2u(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
MN_MMA_HD float u2f(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}
// TF32: round to nearest, ties away from zero, to 10 explicit mantissa bits (the low 13
// bits cleared), as cvt.rna.tf32.f32. Inf stays Inf; NaN stays a NaN.
MN_MMA_HD uint32_t to_tf32(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(__uint_as_float(bits)));
  return r;
#else
  if ((bits & 0x7F800000u) == 0x7F800000u) return (bits & 0x007FFFFFu) ? (bits | 0x00400000u) & 0xFFFFE000u : bits;
  return (bits + 0x1000u) & 0xFFFFE000u;
#endif
}
// BF16 (upper 16 bits of a float): round to nearest, ties to even; NaN stays a NaN.
MN_MMA_HD uint16_t bf16_rn_host(uint32_t bits) {
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu)) return uint16_t((bits >> 16) | 0x0040u);
  return uint16_t((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}
// Two floats (raw bits) as one .bf16x2 register: lo in bits 0-15 (the element with the
// smaller index in the PTX tables), hi in bits 16-31.
MN_MMA_HD uint32_t pack_bf16(uint32_t lo, uint32_t hi) {
#if defined(__CUDA_ARCH__)
  uint32_t r;  // cvt.rn.bf16x2.f32 d, a, b puts a in the upper half, b in the lower
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(__uint_as_float(hi)), "f"(__uint_as_float(lo)));
  return r;
#else
  return uint32_t(bf16_rn_host(lo)) | (uint32_t(bf16_rn_host(hi)) << 16);
#endif
}

// ---- 3. Fragment loads of one warp, one 8-deep k-step ---------------------------------------
// Mem: ldsm4(regs, lane, addr) runs ldmatrix.x4 where lane l's row address is
// addr(l) (a float offset into shared memory); lds(off) is a 32-bit shared load.
// A fragments: FM tiles of 16 rows from warp row wm0, k from kk; raw float bits.
template <class Cfg, class ATile, class Mem>
MN_MMA_HD void load_a_frags(const Mem& mem, int base, int lane, int wm0, int kk, uint32_t (&a)[Cfg::FM][4]) {
MN_MMA_UNROLL
  for (int fm = 0; fm < Cfg::FM; ++fm) {
    const int m0 = wm0 + 16 * fm;
    if constexpr (ATile::kcontig) {
      mem.ldsm4(a[fm], lane, [&](int l) {
        const RC e = ldsm_a_src(l);
        return base + ATile::at_kx(kk + e.c, m0 + e.r);
      });
    } else {
MN_MMA_UNROLL
      for (int i = 0; i < 4; ++i) {
        const RC e = tf32_a(lane, i);
        a[fm][i] = mem.lds(base + ATile::at_kx(kk + e.c, m0 + e.r));
      }
    }
  }
}
// B fragments: FN tiles of 8 columns from warp column wn0, k from kk.
template <class Cfg, class BTile, class Mem>
MN_MMA_HD void load_b_frags(const Mem& mem, int base, int lane, int wn0, int kk, uint32_t (&b)[Cfg::FN][2]) {
  if constexpr (BTile::kcontig) {
MN_MMA_UNROLL
    for (int fp = 0; fp < Cfg::FN / 2; ++fp) {
      const int n0 = wn0 + 16 * fp;
      uint32_t r[4];
      mem.ldsm4(r, lane, [&](int l) {
        const RC e = ldsm_b_src(l);
        return base + BTile::at_kx(kk + e.c, n0 + e.r);
      });
      b[2 * fp][0] = r[0], b[2 * fp][1] = r[1], b[2 * fp + 1][0] = r[2], b[2 * fp + 1][1] = r[3];
    }
  } else {
MN_MMA_UNROLL
    for (int fn = 0; fn < Cfg::FN; ++fn)
MN_MMA_UNROLL
      for (int i = 0; i < 2; ++i) {
        const RC e = tf32_b(lane, i);
        b[fn][i] = mem.lds(base + BTile::at_kx(kk + e.r, wn0 + 8 * fn + e.c));
      }
  }
}

// BF16 m16n8k16 registers from two .tf32-layout k8 halves h0 (physical k 0-7) and h1
// (k 8-15). A: reg0 = {a0, a1} (row g, logical k 2t, 2t+1) <- physical (t, t+4) of h0,
// reg1 = {a2, a3} the same for row g+8, reg2/reg3 = {a4..a7} (logical 2t+8, 2t+9) <-
// physical (8+t, 12+t) from h1. B: reg0 = {b0, b1} <- (t, t+4) of h0, reg1 = {b2, b3} <- h1.
MN_MMA_HD void bf16_a_from_halves(const uint32_t (&h0)[4], const uint32_t (&h1)[4], uint32_t (&a)[4]) {
  a[0] = pack_bf16(h0[0], h0[2]);
  a[1] = pack_bf16(h0[1], h0[3]);
  a[2] = pack_bf16(h1[0], h1[2]);
  a[3] = pack_bf16(h1[1], h1[3]);
}
MN_MMA_HD void bf16_b_from_halves(const uint32_t (&h0)[2], const uint32_t (&h1)[2], uint32_t (&b)[2]) {
  b[0] = pack_bf16(h0[0], h0[1]);
  b[1] = pack_bf16(h1[0], h1[1]);
}

// ---- 5. Operand loaders ----------------------------------------------------------------------
// Copy: copy<V>(smem_off, src, ok) issues cp.async of V floats from src into shared
// memory at float offset smem_off; with ok false it writes V zeros and reads nothing
// (src is then any valid address). ldg(p) reads a table entry (__ldg on the device).
// One gather-table entry (see the file comment): an offset, the row and column the
// element's image position is made of, and a second offset (aux) where an operand pair
// shares one table. kBad in h marks a padding entry (rows or k beyond the matrix): h +
// anything stays negative, so the element is 0.
struct alignas(16) Entry {
  int32_t off, h, w, aux;
};
constexpr int kBad = -(1 << 29);
MN_MMA_HD Entry ldg_entry(const Entry* p) {
#if defined(__CUDA_ARCH__)
  const int4 v = __ldg(reinterpret_cast<const int4*>(p));
  return Entry{v.x, v.y, v.z, v.w};
#else
  return *p;
#endif
}
MN_MMA_HD bool inside(int h, int w, int H, int W) { return unsigned(h) < unsigned(H) && unsigned(w) < unsigned(W); }

// A dense row-major matrix in its storage order: element (outer, inner) at
// p[outer * ld + inner]; KCONTIG means inner = k (x = outer), else inner = x. The tile
// keeps that order. V = 4 needs p 16-byte aligned, ld % 4 == 0 and the inner extent
// % 4 == 0 (a 4-float run is wholly inside or outside).
template <class Cfg, class Tile, int V>
struct DenseLoader {
  using Map = LoadMap<Tile::S::ROWS, Tile::S::COLS, V, Cfg::THREADS>;
  const float* p = nullptr;
  int64_t ld = 0;
  int x_ext = 0;  // rows M (A) or columns N (B)
  int x0 = 0;     // the block's first x
  MN_MMA_HD void begin_block(int x0_, int, int64_t z_off) {
    x0 = x0_;
    p += z_off;
  }
  template <class Copy>
  MN_MMA_HD void load(const Copy& cp, int base, int tid, int k0, int k_end) const {
    const int c = Map::col(tid);
MN_MMA_UNROLL
    for (int i = 0; i < Map::COUNT; ++i) {
      const int r = Map::row(tid, i);
      const int x = x0 + (Tile::kcontig ? r : c), k = k0 + (Tile::kcontig ? c : r);
      const bool ok = x < x_ext && k < k_end;
      const float* src = Tile::kcontig ? p + int64_t(x) * ld + k : p + int64_t(k) * ld + x;
      cp.template copy<V>(base + Tile::S::at(r, c), ok ? src : p, ok);
    }
  }
};

// The forward convolution's B operand, im2col of x: k = (c, r, s), x = (n, p, q). The
// tile is n-contiguous (consecutive lanes read consecutive output columns, consecutive
// input pixels at stride 1), so each thread owns one column for the whole kernel (its
// entry is read once) and reads one k entry per element (all lanes of a warp read the
// same k: one broadcast load).
template <class Cfg, class Tile>
struct ConvColsLoader {
  static_assert(!Tile::kcontig, "im2col columns are n-contiguous");
  using Map = LoadMap<Tile::S::ROWS, Tile::S::COLS, 1, Cfg::THREADS>;
  const float* x = nullptr;
  const Entry* ktab = nullptr;  // (c, r, s) -> {c H W + r dh W + s dw, r dh, s dw}, padded with kBad
  const Entry* ntab = nullptr;  // (n, p, q) -> {n C H W + hb W + wb, hb, wb}, padded with kBad
  int H = 0, W = 0;
  int noff = 0, nh = kBad, nw = 0;  // this thread's column
  MN_MMA_HD void begin_block(int n0, int tid, int64_t) {
    const Entry e = ldg_entry(ntab + n0 + Map::col(tid));
    noff = e.off, nh = e.h, nw = e.w;
  }
  template <class Copy>
  MN_MMA_HD void load(const Copy& cp, int base, int tid, int k0, int k_end) const {
    const int c = Map::col(tid);
MN_MMA_UNROLL
    for (int i = 0; i < Map::COUNT; ++i) {
      const int r = Map::row(tid, i), k = k0 + r;
      const Entry e = ldg_entry(ktab + k);
      const bool ok = k < k_end && inside(e.h + nh, e.w + nw, H, W);
      cp.template copy<1>(base + Tile::S::at(r, c), ok ? x + (e.off + noff) : x, ok);
    }
  }
};

// The weight gradient's operands, both k-contiguous with k = (n, p, q): one shared k
// table {n C H W + p sh W + q sw, p sh, q sw, aux = n K P Q + p Q + q} (padding: h = kBad),
// read once per k-tile by each thread (its column). A = dy, rows m = output channel
// (offset m P Q); B = im2col(x)^T, rows = (c, r, s) with entries
// {c H W + (r dh - ph) W + s dw - pw, r dh - ph, s dw - pw} (padding: kBad).
template <class Cfg, class Tile>
struct WgradDyLoader {
  static_assert(Tile::kcontig, "dy rows are k-contiguous");
  using Map = LoadMap<Tile::S::ROWS, Tile::S::COLS, 1, Cfg::THREADS>;
  const float* dy = nullptr;
  const Entry* ktab = nullptr;
  int M = 0, PQ = 0;
  int m0 = 0;
  MN_MMA_HD void begin_block(int m0_, int, int64_t) { m0 = m0_; }
  template <class Copy>
  MN_MMA_HD void load(const Copy& cp, int base, int tid, int k0, int k_end) const {
    const int c = Map::col(tid), k = k0 + c;
    const Entry e = ldg_entry(ktab + k);
    const bool kok = k < k_end && e.h >= 0;
MN_MMA_UNROLL
    for (int i = 0; i < Map::COUNT; ++i) {
      const int r = Map::row(tid, i), m = m0 + r;
      const bool ok = kok && m < M;
      cp.template copy<1>(base + Tile::S::at(r, c), ok ? dy + (e.aux + m * PQ) : dy, ok);
    }
  }
};

template <class Cfg, class Tile>
struct WgradImgLoader {
  static_assert(Tile::kcontig, "im2col rows are k-contiguous");
  using Map = LoadMap<Tile::S::ROWS, Tile::S::COLS, 1, Cfg::THREADS>;
  const float* x = nullptr;
  const Entry* ktab = nullptr;  // shared with WgradDyLoader
  const Entry* ntab = nullptr;  // (c, r, s) rows, padded with kBad
  int H = 0, W = 0;
  int n0 = 0;
  MN_MMA_HD void begin_block(int n0_, int, int64_t) { n0 = n0_; }
  template <class Copy>
  MN_MMA_HD void load(const Copy& cp, int base, int tid, int k0, int k_end) const {
    const int c = Map::col(tid), k = k0 + c;
    const Entry e = ldg_entry(ktab + k);
    const bool kok = k < k_end;
MN_MMA_UNROLL
    for (int i = 0; i < Map::COUNT; ++i) {
      const int r = Map::row(tid, i);
      const Entry ne = ldg_entry(ntab + n0 + r);
      const bool ok = kok && inside(e.h + ne.h, e.w + ne.w, H, W);
      cp.template copy<1>(base + Tile::S::at(r, c), ok ? x + (e.off + ne.off) : x, ok);
    }
  }
};

// Backward-data for any stride, B operand: k = (k_out, r, s), x = (n, h, w);
// B[k][x] = dy[n, k_out, p, q] where p = (h + ph - r dh) / sh divides exactly and
// 0 <= p < P (q likewise). k entry {k_out P Q, -r dh, -s dw}, x entry {n K P Q, h + ph,
// w + pw}: the sums are p sh and q sw. Two multiply-shift divisions per element: this
// loader serves only strided layers (stride 1 runs as a forward convolution).
template <class Cfg, class Tile>
struct ConvBwdDataColsLoader {
  static_assert(!Tile::kcontig, "columns (n, h, w) are contiguous");
  using Map = LoadMap<Tile::S::ROWS, Tile::S::COLS, 1, Cfg::THREADS>;
  const float* dy = nullptr;
  const Entry* ktab = nullptr;
  const Entry* ntab = nullptr;
  int P = 0, Q = 0;
  FastDiv dsh, dsw;
  int noff = 0, nh = kBad, nw = 0;
  MN_MMA_HD void begin_block(int n0, int tid, int64_t) {
    const Entry e = ldg_entry(ntab + n0 + Map::col(tid));
    noff = e.off, nh = e.h, nw = e.w;
  }
  template <class Copy>
  MN_MMA_HD void load(const Copy& cp, int base, int tid, int k0, int k_end) const {
    const int c = Map::col(tid);
MN_MMA_UNROLL
    for (int i = 0; i < Map::COUNT; ++i) {
      const int r = Map::row(tid, i), k = k0 + r;
      const Entry e = ldg_entry(ktab + k);
      const int ps = e.h + nh, qs = e.w + nw;
      int pr = 1, qr = 1;
      const int p = dsh.divmod(ps > 0 ? ps : 0, pr), q = dsw.divmod(qs > 0 ? qs : 0, qr);
      const bool ok = k < k_end && ps >= 0 && qs >= 0 && pr == 0 && qr == 0 && p < P && q < Q;
      cp.template copy<1>(base + Tile::S::at(r, c), ok ? dy + (e.off + noff + p * Q + q) : dy, ok);
    }
  }
};

// ---- Table entries (built per call on the device; the tests build them on the host) ----------
struct ConvGeom32 {
  int N, C, H, W, K, R, S, P, Q, sh, sw, ph, pw, dh, dw;
};
MN_MMA_HD Entry bad_entry() { return Entry{0, kBad, kBad, 0}; }
// Forward, k = (c, r, s) < C R S.
MN_MMA_HD Entry fwd_k_entry(const ConvGeom32& g, int k) {
  const int RS = g.R * g.S, c = k / RS, rs = k % RS, r = rs / g.S, s = rs % g.S;
  return Entry{c * g.H * g.W + r * g.dh * g.W + s * g.dw, r * g.dh, s * g.dw, 0};
}
// Forward, column n = (img, p, q) < N P Q.
MN_MMA_HD Entry fwd_n_entry(const ConvGeom32& g, int n) {
  const int PQ = g.P * g.Q, img = n / PQ, pq = n % PQ, p = pq / g.Q, q = pq % g.Q;
  const int hb = p * g.sh - g.ph, wb = q * g.sw - g.pw;
  return Entry{img * g.C * g.H * g.W + hb * g.W + wb, hb, wb, 0};
}
// Weight gradient, k = (img, p, q) < N P Q: {x offset, h, w, aux = dy offset without m}.
MN_MMA_HD Entry wgrad_k_entry(const ConvGeom32& g, int k) {
  const int PQ = g.P * g.Q, img = k / PQ, pq = k % PQ, p = pq / g.Q, q = pq % g.Q;
  return Entry{img * g.C * g.H * g.W + p * g.sh * g.W + q * g.sw, p * g.sh, q * g.sw, img * g.K * PQ + pq};
}
// Weight gradient, row n = (c, r, s) < C R S.
MN_MMA_HD Entry wgrad_n_entry(const ConvGeom32& g, int n) {
  const int RS = g.R * g.S, c = n / RS, rs = n % RS, r = rs / g.S, s = rs % g.S;
  const int hr = r * g.dh - g.ph, ws = s * g.dw - g.pw;
  return Entry{c * g.H * g.W + hr * g.W + ws, hr, ws, 0};
}
// Backward-data (strided), k = (k_out, r, s) < K R S.
MN_MMA_HD Entry bwd_data_k_entry(const ConvGeom32& g, int k) {
  const int RS = g.R * g.S, ko = k / RS, rs = k % RS, r = rs / g.S, s = rs % g.S;
  return Entry{ko * g.P * g.Q, -r * g.dh, -s * g.dw, 0};
}
// Backward-data (strided), column n = (img, h, w) < N H W.
MN_MMA_HD Entry bwd_data_n_entry(const ConvGeom32& g, int n) {
  const int HW = g.H * g.W, img = n / HW, hw = n % HW, h = hw / g.W, w = hw % g.W;
  return Entry{img * g.K * g.P * g.Q, h + g.ph, w + g.pw, 0};
}
// The stride-1 backward-data as a forward convolution: dx[h] = sum_r dy[h + ph - r dh] w[r]
// = sum_r' dy[h - fph + r' dh] w[R-1-r'] with fph = dh (R-1) - ph: the forward of dy
// (N, K, P, Q) with weights (C, K, R, S) flipped and transposed, padding (fph, fpw), output
// (N, C, H, W). Possible when the stride is 1 and fph, fpw >= 0.
MN_MMA_HD bool bwd_data_as_forward(const ConvGeom32& g) {
  return g.sh == 1 && g.sw == 1 && g.dh * (g.R - 1) - g.ph >= 0 && g.dw * (g.S - 1) - g.pw >= 0;
}
MN_MMA_HD ConvGeom32 bwd_data_forward_geometry(const ConvGeom32& g) {
  ConvGeom32 f = g;
  f.C = g.K, f.H = g.P, f.W = g.Q, f.K = g.C, f.P = g.H, f.Q = g.W;
  f.ph = g.dh * (g.R - 1) - g.ph, f.pw = g.dw * (g.S - 1) - g.pw;
  return f;
}
// Element i of the weights transposed to (C, K, R, S), flipped in (r, s) when `flip`:
// wt[c, k, rs] = w[k, c, flip ? RS-1-rs : rs]; returns the index into w (K, C, R, S).
MN_MMA_HD int64_t transposed_weight_src(int64_t i, int K, int C, int RS, bool flip) {
  const int rs = int(i % RS), k = int((i / RS) % K), c = int(i / (int64_t(RS) * K));
  return (int64_t(k) * C + c) * RS + (flip ? RS - 1 - rs : rs);
}
// Split-K of the weight gradient: about `target_blocks` blocks in all, each split at least
// 8 k-tiles long, every split a whole number of k-tiles; returns k per split (a multiple
// of bk; Kd itself or more when there is one split).
MN_MMA_HD int wgrad_k_per_split(int Kd, int64_t tiles, int64_t target_blocks, int bk) {
  const int64_t k_tiles = (Kd + bk - 1) / bk;
  int64_t splits = (target_blocks + tiles - 1) / (tiles > 0 ? tiles : 1);
  if (splits > k_tiles / 8) splits = k_tiles / 8;
  if (splits > 65535) splits = 65535;
  if (splits < 1) splits = 1;
  return int((k_tiles + splits - 1) / splits) * bk;
}

// Padded table lengths: k tables to whole k-tiles, x tables to whole block tiles.
MN_MMA_HD int round_up(int n, int m) { return (n + m - 1) / m * m; }

// ---- 6. Epilogues: store(m, n, value, z) for each accumulator ---------------------------------
struct GemmEpilogue {
  float* C = nullptr;
  int64_t ldc = 0, c_zstride = 0;
  int M = 0, N = 0;
  float alpha = 1, beta = 0;
  MN_MMA_HD void store(int m, int n, float v, int z) const {
    if (m >= M || n >= N) return;
    float& c = C[int64_t(z) * c_zstride + int64_t(m) * ldc + n];
    c = beta == 0.f ? alpha * v : alpha * v + beta * c;  // beta == 0 never reads C
  }
};
// y (N, K, P, Q) from rows m = output channel and columns n = (img, p, q); bias may be
// null; relu as kernels/activation.h (x > 0 ? x : 0).
struct ConvFwdEpilogue {
  float* y = nullptr;
  const float* bias = nullptr;
  int M = 0, ncols = 0, PQ = 0;
  FastDiv dPQ;
  bool relu = false;
  MN_MMA_HD void store(int m, int n, float v, int) const {
    if (m >= M || n >= ncols) return;
    int pq;
    const int img = dPQ.divmod(n, pq);
    if (bias) v += bias[m];
    if (relu) v = v > 0.f ? v : 0.f;
    y[(int64_t(img) * M + m) * PQ + pq] = v;
  }
};
// Split-K partials: out (splits, M, N).
struct SplitEpilogue {
  float* out = nullptr;
  int M = 0, N = 0;
  MN_MMA_HD void store(int m, int n, float v, int z) const {
    if (m < M && n < N) out[(int64_t(z) * M + m) * N + n] = v;
  }
};

}  // namespace mn::kernels::mma
