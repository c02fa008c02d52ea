// The tensor-core kernels' index maths on the CPU (kernels/mma_layout.h), before any GPU
// runs them: the fragment layouts against the PTX ISA's tables, the ldmatrix and 32-bit
// fragment loads, the shared-memory padding (bank-conflict freedom), the copy maps, the
// TF32 / BF16 rounding, the gather tables against the convolution's definition, and whole
// launches emulated block by block, lane by lane (tests/kernels/mma_emulator.h) for the
// GEMM (four transposes, 16- and 4-byte copies, batches, alpha / beta), the forward
// (bias, fused ReLU, both tile shapes), the backward-data (stride 1 as a flipped forward,
// strided through the divisibility gather) and the weight gradient (split-K), in TF32 and
// BF16, against float64 references on the same rounded inputs.
//
// Tolerance: the emulator adds each MMA's exact sum into float accumulators, as the
// tensor cores do (in some order); against a float64 sum of the same rounded products
// the difference is FP32 accumulation error, bounded by 8 (sqrt(K) + 2) 2^-24 sum|ab|
// (the bound of tests/kernels/test_gemm.cpp). A wrong fragment index, copy address, k
// permutation or split range gives errors of order |ab|, hundreds of times larger.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/mma_layout.h"
#include "tests/kernels/mma_emulator.h"

namespace mn::kernels::mma {
namespace {
using emu::Math;

std::vector<float> randv(size_t n, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(g);
  return v;
}

// ---- fragment layouts -------------------------------------------------------------------------
TEST(MmaLayout, FragmentTablesAreThePtxIsasAndCoverEachTileOnce) {
  std::set<std::pair<int, int>> a, b, c;
  for (int l = 0; l < 32; ++l) {
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(tf32_a(l, i).r, emu::spec_tf32_a(l, i).r) << "lane " << l << " a" << i;
      EXPECT_EQ(tf32_a(l, i).c, emu::spec_tf32_a(l, i).c) << "lane " << l << " a" << i;
      EXPECT_EQ(acc_rc(l, i).r, emu::spec_acc(l, i).r) << "lane " << l << " c" << i;
      EXPECT_EQ(acc_rc(l, i).c, emu::spec_acc(l, i).c) << "lane " << l << " c" << i;
      a.insert({tf32_a(l, i).r, tf32_a(l, i).c});
      c.insert({acc_rc(l, i).r, acc_rc(l, i).c});
    }
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(tf32_b(l, i).r, emu::spec_tf32_b(l, i).r) << "lane " << l << " b" << i;
      EXPECT_EQ(tf32_b(l, i).c, emu::spec_tf32_b(l, i).c) << "lane " << l << " b" << i;
      b.insert({tf32_b(l, i).r, tf32_b(l, i).c});
    }
  }
  EXPECT_EQ(a.size(), 128u);  // 16 x 8
  EXPECT_EQ(b.size(), 64u);   // 8 x 8
  EXPECT_EQ(c.size(), 128u);  // 16 x 8
}

// Fills an operand tile with a value that names its (k, x) position, runs the fragment
// loads of every warp and lane with the emulated ldmatrix / LDS, and checks each register
// against the ISA's table.
template <class Cfg, bool A_KC, bool B_KC>
void check_fragment_loads() {
  using L = StageLayout<Cfg, A_KC, B_KC>;
  std::vector<float> smem(size_t(L::STAGE), std::nanf(""));
  auto code = [](int k, int x) { return float(k * 1000 + x); };
  for (int k = 0; k < Cfg::BK; ++k) {
    for (int m = 0; m < Cfg::BM; ++m) smem[size_t(L::a_off(0) + L::ATile::at_kx(k, m))] = code(k, m);
    for (int n = 0; n < Cfg::BN; ++n) smem[size_t(L::b_off(0) + L::BTile::at_kx(k, n))] = code(k, n);
  }
  const emu::HostMem mem{&smem};
  for (int w = 0; w < Cfg::WARPS; ++w)
    for (int kk = 0; kk < Cfg::BK; kk += 8)
      for (int l = 0; l < 32; ++l) {
        uint32_t a[Cfg::FM][4], b[Cfg::FN][2];
        load_a_frags<Cfg, typename L::ATile>(mem, L::a_off(0), l, Cfg::warp_m0(w), kk, a);
        load_b_frags<Cfg, typename L::BTile>(mem, L::b_off(0), l, Cfg::warp_n0(w), kk, b);
        for (int fm = 0; fm < Cfg::FM; ++fm)
          for (int i = 0; i < 4; ++i) {
            const RC e = emu::spec_tf32_a(l, i);
            ASSERT_EQ(u2f(a[fm][i]), code(kk + e.c, Cfg::warp_m0(w) + 16 * fm + e.r))
                << "A" << (A_KC ? " (ldmatrix)" : " (lds)") << " warp " << w << " lane " << l << " fm " << fm << " a" << i;
          }
        for (int fn = 0; fn < Cfg::FN; ++fn)
          for (int i = 0; i < 2; ++i) {
            const RC e = emu::spec_tf32_b(l, i);
            ASSERT_EQ(u2f(b[fn][i]), code(kk + e.r, Cfg::warp_n0(w) + 8 * fn + e.c))
                << "B" << (B_KC ? " (ldmatrix)" : " (lds)") << " warp " << w << " lane " << l << " fn " << fn << " b" << i;
          }
      }
}

TEST(MmaLayout, FragmentLoadsGiveTheTf32LayoutInEveryTileAndOrientation) {
  check_fragment_loads<TileBig, true, false>();
  check_fragment_loads<TileBig, true, true>();
  check_fragment_loads<TileBig, false, false>();
  check_fragment_loads<TileBig, false, true>();
  check_fragment_loads<TileWide, true, false>();
  check_fragment_loads<TileMid, true, true>();
}

// Bank conflicts: an ldmatrix phase reads one 8 x 16-byte matrix, whose 8 row addresses
// must lie in 8 different 16-byte bank groups; a 32-bit shared load by 32 lanes must hit
// 32 different banks.
template <class Cfg, class Tile>
void check_banks(bool is_a) {
  for (int kk = 0; kk < Cfg::BK; kk += 8) {
    if (Tile::kcontig) {
      for (int j = 0; j < 4; ++j) {
        std::set<int> groups;
        for (int i = 0; i < 8; ++i) {
          const RC e = is_a ? ldsm_a_src(8 * j + i) : ldsm_b_src(8 * j + i);
          groups.insert((Tile::at_kx(kk + e.c, e.r) * 4 / 16) % 8);
        }
        EXPECT_EQ(groups.size(), 8u) << (is_a ? "A" : "B") << " ldmatrix matrix " << j;
      }
    } else {
      for (int i = 0; i < (is_a ? 4 : 2); ++i) {
        std::set<int> banks;
        for (int l = 0; l < 32; ++l) {
          const RC e = is_a ? tf32_a(l, i) : tf32_b(l, i);
          banks.insert(is_a ? Tile::at_kx(kk + e.c, e.r) % 32 : Tile::at_kx(kk + e.r, e.c) % 32);
        }
        EXPECT_EQ(banks.size(), 32u) << (is_a ? "A" : "B") << " register " << i;
      }
    }
  }
}
TEST(MmaLayout, FragmentReadsAreFreeOfBankConflicts) {
  check_banks<TileBig, OperandTile<TileBig, true, 128>>(true);
  check_banks<TileBig, OperandTile<TileBig, false, 128>>(true);
  check_banks<TileBig, OperandTile<TileBig, true, 128>>(false);
  check_banks<TileBig, OperandTile<TileBig, false, 128>>(false);
  check_banks<TileWide, OperandTile<TileWide, false, 256>>(false);
  check_banks<TileMid, OperandTile<TileMid, true, 64>>(true);
  check_banks<TileMid, OperandTile<TileMid, true, 128>>(false);
}

template <int R, int COLS, int V, int THREADS>
void check_map() {
  using M = LoadMap<R, COLS, V, THREADS>;
  std::vector<int> hits(static_cast<size_t>(R) * COLS, 0);
  for (int t = 0; t < THREADS; ++t)
    for (int i = 0; i < M::COUNT; ++i)
      for (int j = 0; j < M::NCOL; ++j)
        for (int v = 0; v < V; ++v) ++hits.at(size_t(M::row(t, i)) * COLS + M::col(t, j) + v);
  for (size_t e = 0; e < hits.size(); ++e) ASSERT_EQ(hits[e], 1) << R << "x" << COLS << " V" << V << " element " << e;
  // Consecutive threads take consecutive columns (coalesced reads).
  EXPECT_EQ(M::col(1) - M::col(0), V);
  // The pipeline's chunks (4 k-steps of TF32, 2 of BF16) split a thread's copies exactly.
  EXPECT_EQ(M::template chunk_begin<4>(3) + M::COUNT / 4, M::COUNT);
  EXPECT_EQ(M::template chunk_begin<2>(1) + M::COUNT / 2, M::COUNT);
}
TEST(MmaLayout, CopyMapsCoverEachTileElementOnce) {
  // The tiles of TileBig / TileWide / TileMid (128 threads) in both orientations and copy widths.
  check_map<128, 32, 4, 128>();
  check_map<128, 32, 1, 128>();
  check_map<32, 128, 4, 128>();
  check_map<32, 128, 1, 128>();
  check_map<64, 32, 4, 128>();
  check_map<64, 32, 1, 128>();
  check_map<32, 256, 1, 128>();  // Wide's B: two columns a thread
  check_map<32, 256, 4, 128>();
  check_map<32, 64, 1, 128>();
  check_map<128, 32, 1, 256>();  // and 256-thread blocks
  check_map<32, 256, 1, 256>();
}

// Every block tile fits MIN_BLOCKS blocks in an H100 / H200 SM (228 KB of shared memory,
// at most 227 KB a block, 1 KB reserved per block) and in the register file (65,536
// registers: MIN_BLOCKS x THREADS x 255 at most).
template <class Cfg, bool A_KC, bool B_KC>
void check_budget(const char* name) {
  using L = StageLayout<Cfg, A_KC, B_KC>;
  EXPECT_LE(L::BYTES, 227 * 1024) << name;
  EXPECT_LE(Cfg::MIN_BLOCKS * (L::BYTES + 1024), 228 * 1024) << name << ": " << L::BYTES << " bytes a block";
  EXPECT_LE(Cfg::MIN_BLOCKS * Cfg::THREADS * 255, 65536) << name;
  EXPECT_EQ(L::kt_off(0) % 4, 0) << name << ": the k-entry ring is 16-byte aligned";
  EXPECT_EQ(L::kt_off(Cfg::STAGES - 1) + L::KT_SLOT, L::FLOATS) << name;
}
TEST(MmaLayout, BlockTilesFitTheirBlocksPerSm) {
  check_budget<TileBig, true, false>("Big, B n-contiguous");
  check_budget<TileBig, true, true>("Big, both k-contiguous");
  check_budget<TileBig, false, false>("Big, A m-contiguous");
  check_budget<TileWide, true, false>("Wide");
  check_budget<TileMid, true, true>("Mid");
}

TEST(MmaLayout, RoundingIsNearestTf32TiesAwayAndNearestEvenBf16) {
  const float one = 1.f;
  EXPECT_EQ(u2f(to_tf32(f2u(one + std::ldexp(1.f, -11)))), one + std::ldexp(1.f, -10));  // tie: away
  EXPECT_EQ(u2f(to_tf32(f2u(-(one + std::ldexp(1.f, -11))))), -(one + std::ldexp(1.f, -10)));
  EXPECT_EQ(u2f(to_tf32(f2u(one + std::ldexp(1.f, -12)))), one);  // below half: down
  EXPECT_EQ(u2f(to_tf32(f2u(one + 3 * std::ldexp(1.f, -12)))), one + std::ldexp(1.f, -10));
  EXPECT_TRUE(std::isinf(u2f(to_tf32(f2u(INFINITY)))));
  EXPECT_TRUE(std::isnan(u2f(to_tf32(f2u(NAN)))));
  EXPECT_EQ(to_tf32(f2u(0.3f)) & 0x1FFFu, 0u);
  // BF16: 1 + 2^-8 is a tie between 1 and 1 + 2^-7 -> even (1); 1 + 3 2^-8 -> 1 + 2^-6.
  EXPECT_EQ(emu::bf16_half(pack_bf16(f2u(one + std::ldexp(1.f, -8)), 0), 0), one);
  EXPECT_EQ(emu::bf16_half(pack_bf16(f2u(one + 3 * std::ldexp(1.f, -8)), 0), 0), one + std::ldexp(1.f, -6));
  EXPECT_EQ(emu::bf16_half(pack_bf16(0, f2u(-2.5f)), 1), -2.5f);  // hi half
  EXPECT_TRUE(std::isnan(emu::bf16_half(pack_bf16(f2u(NAN), 0), 0)));
}

// The BF16 k permutation: A and B registers built by bf16_*_from_halves and multiplied
// by the ISA's m16n8k16 give the plain 16-deep product.
TEST(MmaLayout, Bf16PairsFromTf32HalvesMultiplyLikeTheMatrices) {
  std::vector<float> A = randv(16 * 16, 5), B = randv(16 * 8, 6);
  for (float& v : A) v = float(emu::round_input(v, Math::BF16));
  for (float& v : B) v = float(emu::round_input(v, Math::BF16));
  uint32_t a[32][4], b[32][2];
  float d[32][4] = {};
  for (int l = 0; l < 32; ++l) {
    uint32_t h0[4], h1[4], g0[2], g1[2];
    for (int i = 0; i < 4; ++i) {
      const RC e = tf32_a(l, i);
      h0[i] = f2u(A[size_t(e.r) * 16 + e.c]), h1[i] = f2u(A[size_t(e.r) * 16 + 8 + e.c]);
    }
    for (int i = 0; i < 2; ++i) {
      const RC e = tf32_b(l, i);
      g0[i] = f2u(B[size_t(e.r) * 8 + e.c]), g1[i] = f2u(B[size_t(8 + e.r) * 8 + e.c]);
    }
    bf16_a_from_halves(h0, h1, a[l]);
    bf16_b_from_halves(g0, g1, b[l]);
  }
  emu::mma_bf16(d, a, b);
  for (int l = 0; l < 32; ++l)
    for (int i = 0; i < 4; ++i) {
      const RC e = acc_rc(l, i);
      double ref = 0;
      for (int k = 0; k < 16; ++k) ref += double(A[size_t(e.r) * 16 + k]) * B[size_t(k) * 8 + e.c];
      EXPECT_NEAR(d[l][i], ref, 1e-5) << "lane " << l << " c" << i;
    }
}

}  // namespace
}  // namespace mn::kernels::mma
