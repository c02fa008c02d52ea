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
//      im2col rows. The convolution operands are gathered through tables built once
//      per geometry (Entry): element (k, x) lives at base[k.off + x.off] and is inside
//      the image when 0 <= k.h + x.h < H and 0 <= k.w + x.w < W, so the kernel decodes
//      no (c, r, s) or (n, p, q) index: one table read (the k entry from shared memory)
//      and four integer operations per element. Then the table entries and the split-K
//      rule (wave_fit_k_per_split: splits that fill whole waves).
//   6. The epilogues: C = alpha acc + beta C (GEMM), y = acc + bias (then ReLU when
//      fused) scattered to (N, K, P, Q) (forward), and split-K partials (weight gradient).
//   7. The pipeline schedule (run_pipeline): the order of copies, waits, barriers and
//      MMAs of one block's k loop, which the emulator runs with late- and eager-landing
//      copies.
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
// MIN_BLOCKS: the blocks per SM the launch bounds ask the register allocator to allow
// (__launch_bounds__(THREADS, MIN_BLOCKS)); the shared memory of one block is sized so
// that MIN_BLOCKS fit in an H100/H200 SM (228 KB, 227 KB a block, 1 KB reserved each).
template <int BM_, int BN_, int WARPS_M_, int WARPS_N_, int STAGES_, int MIN_BLOCKS_ = 1>
struct TileCfg {
  static constexpr int BM = BM_, BN = BN_, BK = 32;
  static constexpr int WARPS_M = WARPS_M_, WARPS_N = WARPS_N_, WARPS = WARPS_M * WARPS_N;
  static constexpr int THREADS = 32 * WARPS, STAGES = STAGES_, MIN_BLOCKS = MIN_BLOCKS_;
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

// The block tiles the launchers use (kernels/cuda/mma_gemm.cu, mma_conv.cu): 4 warps of
// 128 threads each, warp tiles of 64 x 64 (Mid: 32 x 64), so each fragment a warp loads
// from shared memory feeds 8 (A) or 4 (B) MMAs, and two blocks per SM (<= 255 registers a
// thread; <= 113 KB of shared memory a block) so one block's barrier is hidden by the
// other's MMAs. Shared memory (float32 stages + the k-entry ring): Big 3 x 36 KB + 1.5 KB,
// Wide 2 x 42 KB + 1 KB, Mid 4 x 27 KB + 2 KB.
using TileBig = TileCfg<128, 128, 2, 2, 3, 2>;  // GEMMs and most convolutions
using TileWide = TileCfg<64, 256, 1, 4, 2, 2>;  // forwards with K <= 64 (Koch's layer 1, layer 2's dgrad)
using TileMid = TileCfg<64, 128, 2, 2, 4, 2>;   // weight gradients with K <= 64

// Operand tile of XT (= BM for A, BN for B) rows or columns: KCONTIG stores (x, k),
// otherwise (k, x).
template <class Cfg, bool KCONTIG, int XT>
struct OperandTile {
  using S = SmemTile<KCONTIG ? XT : Cfg::BK, KCONTIG ? Cfg::BK : XT>;
  static constexpr bool kcontig = KCONTIG;
  MN_MMA_HD static int at_kx(int k, int x) { return KCONTIG ? S::at(x, k) : S::at(k, x); }
};

// One stage: the A tile, then the B tile; after the STAGES stages, a ring of STAGES slots
// of BK gather-table entries (16 bytes each): the k entries of the k-tile a loader is
// about to gather, copied into shared memory once per k-tile (kernels/mma_igemm.cuh's
// pipeline says when), so a gather reads its k entry from shared memory (one broadcast
// load) instead of global memory.
template <class Cfg, bool A_KCONTIG, bool B_KCONTIG>
struct StageLayout {
  using ATile = OperandTile<Cfg, A_KCONTIG, Cfg::BM>;
  using BTile = OperandTile<Cfg, B_KCONTIG, Cfg::BN>;
  static constexpr int A_SIZE = ATile::S::SIZE, B_SIZE = BTile::S::SIZE;
  static constexpr int STAGE = A_SIZE + B_SIZE;  // floats per stage
  static constexpr int KT_SLOT = Cfg::BK * 4;    // floats per k-entry slot
  static constexpr int FLOATS = Cfg::STAGES * (STAGE + KT_SLOT);
  static constexpr int BYTES = FLOATS * 4;
  MN_MMA_HD static int a_off(int stage) { return stage * STAGE; }
  MN_MMA_HD static int b_off(int stage) { return stage * STAGE + A_SIZE; }
  MN_MMA_HD static int kt_off(int slot) { return Cfg::STAGES * STAGE + slot * KT_SLOT; }
};

// Which tile elements thread tid copies: V consecutive floats (one cp.async) at columns
// col(tid, j), j < NCOL, of rows row(tid, i), i < COUNT. Consecutive threads take
// consecutive columns (coalesced global reads along the contiguous dimension); a row
// wider than the block (Wide's 256 columns, 128 threads) gives each thread NCOL columns.
template <int ROWS, int COLS, int V, int THREADS>
struct LoadMap {
  static constexpr int PER_ROW = COLS / V;  // copies across one row
  static constexpr bool WIDE = PER_ROW > THREADS;
  static constexpr int NCOL = WIDE ? PER_ROW / THREADS : 1;
  static constexpr int STEP = WIDE ? 1 : THREADS / PER_ROW, COUNT = ROWS / STEP;
  static_assert(V == 1 || V == 4, "4- or 16-byte copies");
  static_assert(COLS % V == 0 && (WIDE ? PER_ROW % THREADS == 0 : THREADS % PER_ROW == 0) && ROWS % STEP == 0,
                "the threads cover the tile evenly");
  MN_MMA_HD static int row(int tid, int i) { return (WIDE ? 0 : tid / PER_ROW) + STEP * i; }
  MN_MMA_HD static int col(int tid, int j = 0) { return ((WIDE ? tid : tid % PER_ROW) + j * THREADS) * V; }
  // Copies i of chunk `chunk` of NCH (the pipeline issues a tile in NCH chunks, one after
  // each k-step of the tile being multiplied): [chunk COUNT / NCH, (chunk + 1) COUNT / NCH).
  template <int NCH>
  MN_MMA_HD static int chunk_begin(int chunk) {
    static_assert(COUNT % NCH == 0, "a tile's copies split evenly into the pipeline's chunks");
    return chunk * (COUNT / NCH);
  }
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

// Loader interface, shared by the operands below: begin_block(x0, tid, z_off) once per
// block; load<NCH>(cp, base, tid, k0, k_end, kents, chunk) issues chunk `chunk` of NCH of
// this thread's copies of the k-tile starting at k0 into the tile at float offset base;
// kents points at the tile's BK k entries in shared memory (entry j for k = k0 + j; null
// for operands that gather through no k table).

// A dense row-major matrix in its storage order: element (outer, inner) at
// p[outer * ld + inner]; KCONTIG means inner = k (x = outer), else inner = x. The tile
// keeps that order. V = 4 needs p 16-byte aligned, ld % 4 == 0 and the inner extent
// % 4 == 0 (a 4-float run is wholly inside or outside).
template <class Cfg, class Tile, int V>
struct DenseLoader {
  using Map = LoadMap<Tile::S::ROWS, Tile::S::COLS, V, Cfg::THREADS>;
  static_assert(Map::NCOL == 1, "dense tiles are at most one block of copies wide");
  const float* p = nullptr;
  int64_t ld = 0;
  int x_ext = 0;  // rows M (A) or columns N (B)
  int x0 = 0;     // the block's first x
  MN_MMA_HD void begin_block(int x0_, int, int64_t z_off) {
    x0 = x0_;
    p += z_off;
  }
  template <int NCH, class Copy>
  MN_MMA_HD void load(const Copy& cp, int base, int tid, int k0, int k_end, const Entry*, int chunk) const {
    const int c = Map::col(tid), i0 = Map::template chunk_begin<NCH>(chunk);
MN_MMA_UNROLL
    for (int i = i0; i < i0 + Map::COUNT / NCH; ++i) {
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
// input pixels at stride 1), so each thread owns NCOL columns for the whole kernel (their
// entries are read once) and reads one k entry per element from shared memory (all
// lanes of a warp read the same k: one broadcast load).
template <class Cfg, class Tile>
struct ConvColsLoader {
  static_assert(!Tile::kcontig, "im2col columns are n-contiguous");
  using Map = LoadMap<Tile::S::ROWS, Tile::S::COLS, 1, Cfg::THREADS>;
  const float* x = nullptr;
  const Entry* ntab = nullptr;  // (n, p, q) -> {n C H W + hb W + wb, hb, wb}, padded with kBad
  int H = 0, W = 0;
  int noff[Map::NCOL] = {}, nh[Map::NCOL] = {}, nw[Map::NCOL] = {};  // this thread's columns
  MN_MMA_HD void begin_block(int n0, int tid, int64_t) {
MN_MMA_UNROLL
    for (int j = 0; j < Map::NCOL; ++j) {
      const Entry e = ldg_entry(ntab + n0 + Map::col(tid, j));
      noff[j] = e.off, nh[j] = e.h, nw[j] = e.w;
    }
  }
  // k entries: (c, r, s) -> {c H W + r dh W + s dw, r dh, s dw}, padded with kBad.
  template <int NCH, class Copy>
  MN_MMA_HD void load(const Copy& cp, int base, int tid, int k0, int k_end, const Entry* kents, int chunk) const {
    const int i0 = Map::template chunk_begin<NCH>(chunk);
MN_MMA_UNROLL
    for (int i = i0; i < i0 + Map::COUNT / NCH; ++i) {
      const int r = Map::row(tid, i), k = k0 + r;
      const Entry e = kents[r];
MN_MMA_UNROLL
      for (int j = 0; j < Map::NCOL; ++j) {
        const bool ok = k < k_end && inside(e.h + nh[j], e.w + nw[j], H, W);
        cp.template copy<1>(base + Tile::S::at(r, Map::col(tid, j)), ok ? x + (e.off + noff[j]) : x, ok);
      }
    }
  }
};

// The weight gradient's operands, both k-contiguous with k = (n, p, q): one shared k
// table {n C H W + p sh W + q sw, p sh, q sw, aux = n K P Q + p Q + q} (padding: h = kBad),
// whose entry for its column each thread reads from shared memory once per k-tile.
// A = dy, rows m = output channel (offset m P Q); B = im2col(x)^T, rows = (c, r, s) with
// entries {c H W + (r dh - ph) W + s dw - pw, r dh - ph, s dw - pw} (padding: kBad).
template <class Cfg, class Tile>
struct WgradDyLoader {
  static_assert(Tile::kcontig, "dy rows are k-contiguous");
  using Map = LoadMap<Tile::S::ROWS, Tile::S::COLS, 1, Cfg::THREADS>;
  static_assert(Map::NCOL == 1, "one k column a thread");
  const float* dy = nullptr;
  int M = 0, PQ = 0;
  int m0 = 0;
  MN_MMA_HD void begin_block(int m0_, int, int64_t) { m0 = m0_; }
  template <int NCH, class Copy>
  MN_MMA_HD void load(const Copy& cp, int base, int tid, int k0, int k_end, const Entry* kents, int chunk) const {
    const int c = Map::col(tid), k = k0 + c, i0 = Map::template chunk_begin<NCH>(chunk);
    const Entry e = kents[c];
    const bool kok = k < k_end && e.h >= 0;
MN_MMA_UNROLL
    for (int i = i0; i < i0 + Map::COUNT / NCH; ++i) {
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
  static_assert(Map::NCOL == 1, "one k column a thread");
  const float* x = nullptr;
  const Entry* ntab = nullptr;  // (c, r, s) rows, padded with kBad
  int H = 0, W = 0;
  int n0 = 0;
  MN_MMA_HD void begin_block(int n0_, int, int64_t) { n0 = n0_; }
  template <int NCH, class Copy>
  MN_MMA_HD void load(const Copy& cp, int base, int tid, int k0, int k_end, const Entry* kents, int chunk) const {
    const int c = Map::col(tid), k = k0 + c, i0 = Map::template chunk_begin<NCH>(chunk);
    const Entry e = kents[c];
    const bool kok = k < k_end;
MN_MMA_UNROLL
    for (int i = i0; i < i0 + Map::COUNT / NCH; ++i) {
      const int r = Map::row(tid, i);
      const Entry ne = ldg_entry(ntab + n0 + r);  // the same rows every k-tile: L1 hits
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
  static_assert(Map::NCOL == 1, "one column a thread");
  const float* dy = nullptr;
  const Entry* ntab = nullptr;
  int P = 0, Q = 0;
  FastDiv dsh, dsw;
  int noff = 0, nh = kBad, nw = 0;
  MN_MMA_HD void begin_block(int n0, int tid, int64_t) {
    const Entry e = ldg_entry(ntab + n0 + Map::col(tid));
    noff = e.off, nh = e.h, nw = e.w;
  }
  template <int NCH, class Copy>
  MN_MMA_HD void load(const Copy& cp, int base, int tid, int k0, int k_end, const Entry* kents, int chunk) const {
    const int c = Map::col(tid), i0 = Map::template chunk_begin<NCH>(chunk);
MN_MMA_UNROLL
    for (int i = i0; i < i0 + Map::COUNT / NCH; ++i) {
      const int r = Map::row(tid, i), k = k0 + r;
      const Entry e = kents[r];
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
// Split-K that fills whole waves: a GEMM of `tiles` output tiles and k_tiles k-tiles, on
// a GPU that runs `wave` blocks at once (SMs x blocks per SM). With s splits it takes about
// ceil(tiles s / wave) waves of ceil(k_tiles / s) k-tiles each. Of the s within 3 % of the
// least such time, the smallest: more splits only cut the last wave's idle tail finer
// while each adds a partial (M N floats written, then read by the sum). Each split is at
// least `min_tiles` k-tiles long and there are at most 65535 (gridDim.z). Returns k per
// split (a multiple of bk; Kd rounded up to whole k-tiles when there is one split).
MN_MMA_HD int64_t wave_fit_time(int64_t k_tiles, int64_t tiles, int64_t wave, int64_t s) {
  const int64_t per = (k_tiles + s - 1) / s;
  return ((tiles * s + wave - 1) / wave) * per;
}
MN_MMA_HD int wave_fit_k_per_split(int Kd, int64_t tiles, int64_t wave, int bk, int min_tiles = 8) {
  const int64_t k_tiles = (Kd + bk - 1) / bk;
  if (tiles < 1) tiles = 1;
  if (wave < 1) wave = 1;
  int64_t max_s = k_tiles / (min_tiles > 0 ? min_tiles : 1);
  if (max_s > 65535) max_s = 65535;
  int64_t best_t = wave_fit_time(k_tiles, tiles, wave, 1);
  for (int64_t s = 2; s <= max_s; ++s) {
    const int64_t t = wave_fit_time(k_tiles, tiles, wave, s);
    if (t < best_t) best_t = t;
  }
  int64_t s = 1;
  while (s < max_s && 100 * wave_fit_time(k_tiles, tiles, wave, s) > 103 * best_t) ++s;
  const int64_t per = (k_tiles + s - 1) / s;
  return int((per > 0 ? per : 1) * bk);
}

// The dense GEMM's split-K (kernels/cuda/gemm.cu, split_k_count; tools/gpu_model): how many
// K-slices a GEMM of 128 x 128 output tiles runs as on a GPU that runs `wave` blocks at
// once (1: no split). Only when its tiles cannot fill one wave and K is long. The
// candidates divide K into slices that are multiples of 8 (whole k-tiles, float4 rows) and
// at least 512 deep (the partials' extra traffic, s M N floats, stays small next to the
// slice's M N K / s multiply-adds); of those, the blocks that fill whole waves best
// (wave_fit_time: waves x 8-deep steps per slice), the smallest s within 3 % of the best.
MN_MMA_HD int64_t dense_split_k(int64_t M, int64_t N, int64_t K, int64_t wave) {
  const int64_t tiles = ((M + 127) / 128) * ((N + 127) / 128);
  if (tiles >= wave || K < 1024) return 1;
  int64_t best = -1;
  for (int64_t s = 1; s <= K / 512; ++s)
    if (K % s == 0 && (K / s) % 8 == 0) {
      const int64_t t = wave_fit_time(K / 8, tiles, wave, s);
      if (best < 0 || t < best) best = t;
    }
  for (int64_t s = 1; s <= K / 512; ++s)
    if (K % s == 0 && (K / s) % 8 == 0 && 100 * wave_fit_time(K / 8, tiles, wave, s) <= 103 * best) return s;
  return 1;
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

// ---- 7. The pipeline schedule --------------------------------------------------------------
// One block's k loop, for the kernel (one thread's view) and the CPU emulator (the whole
// block at once) alike. Ops provides:
//   ktab(t)        the cp.async copy of k-tile t's BK gather-table entries into ring slot
//                  t % STAGES (nothing for operands without a k table or t past the end);
//   data(t, c)     chunk c of KSTEPS of this thread's copies of k-tile t into stage
//                  t % STAGES (nothing past the end);
//   commit(), wait<N>() (cp.async.commit_group / wait_group N), barrier() (__syncthreads);
//   compute(t, ks) the MMAs of k-step ks of the tile in stage t % STAGES.
// cp.async group g carries data tile g and the k entries of tile g + STAGES - 1, so at
// iteration kt, once at most STAGES - 2 groups are in flight, tile kt and the entries of
// tile kt + STAGES - 1 (which that iteration gathers) have landed; the barrier after the
// wait also says every warp is done with tile kt - 1, whose stage (and the entry slot of
// tile kt + STAGES - 2) is refilled next. The refill is issued in KSTEPS chunks, one after
// each k-step's MMAs, so a warp's gathers for tile kt + STAGES - 1 interleave with its
// MMAs on tile kt instead of all preceding them. The k entries of tiles 0 .. STAGES - 2
// are copied (and waited for) before the prologue.
template <int STAGES, int KSTEPS, class Ops>
MN_MMA_HD void run_pipeline(Ops& ops, int ntiles) {
  for (int t = 0; t < STAGES - 1; ++t) ops.ktab(t);
  ops.commit();
  ops.template wait<0>();
  ops.barrier();
  for (int t = 0; t < STAGES - 1; ++t) {
    ops.ktab(t + STAGES - 1);
    for (int c = 0; c < KSTEPS; ++c) ops.data(t, c);
    ops.commit();
  }
  for (int kt = 0; kt < ntiles; ++kt) {
    ops.template wait<STAGES - 2>();
    ops.barrier();
    const int next = kt + STAGES - 1;
    ops.ktab(next + STAGES - 1);
    for (int ks = 0; ks < KSTEPS; ++ks) {
      ops.compute(kt, ks);
      ops.data(next, ks);
    }
    ops.commit();
  }
  ops.template wait<0>();
}
// k-steps per BK-deep tile: m16n8k8 (TF32) or m16n8k16 (BF16).
MN_MMA_HD constexpr int ksteps(bool bf16, int bk) { return bf16 ? bk / 16 : bk / 8; }

}  // namespace mn::kernels::mma
