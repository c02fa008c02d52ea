// A CPU model of the tensor-core implicit GEMM (kernels/cuda/mma_igemm.cuh), built from
// the same header the kernel uses (kernels/mma_layout.h) and, independently, from the
// PTX ISA's definitions of what the instructions do:
//   - ldmatrix.x4 (each lane receives, from matrix j, row lane/4, 32-bit word lane%4; the
//     row addresses come from lanes 8 j .. 8 j + 7),
//   - mma.m16n8k8 .tf32 and mma.m16n8k16 .bf16 (the fragment tables written out below
//     from the ISA's "Matrix Fragments" sections, not taken from the header),
//   - cp.async with zero-fill (src-size 0), its commit groups and wait_group N.
// emulate_igemm runs one launch block by block, thread by thread, lane by lane, with the
// kernel's pipeline schedule (run_pipeline in kernels/mma_layout.h), loaders, fragment
// loads, rounding and epilogue. A wrong index anywhere gives a wrong product (or a NaN:
// a stage is filled with NaN when its refill is issued, so a fragment that reads an
// element no copy wrote, or one whose copy has not landed, poisons its outputs); an
// out-of-range address is caught by the copy check below and, in the sanitizer build,
// by ASan. The copies land in one of two ways, and a right pipeline passes both:
//   Late   a group's copies land only when a wait_group retires it (a read that does not
//          wait long enough sees NaN);
//   Eager  every copy lands when it is issued (a refill issued into a stage that is still
//          being multiplied overwrites it with NaN and then the next tile).
// Fault injects the mistakes the tests must catch: a k-tile never multiplied, a ring one
// stage shorter than the schedule assumes, a wait that leaves one group too many in flight.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <array>
#include <cstdint>
#include <deque>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/mma_layout.h"

namespace mn::kernels::mma::emu {

enum class Math { TF32, BF16 };

// ---- the PTX ISA's fragment tables (m16n8k8 .tf32, m16n8k16 .bf16), written out here ----
inline RC spec_tf32_a(int lane, int reg) {  // a0 (g, t) a1 (g+8, t) a2 (g, t+4) a3 (g+8, t+4)
  const int g = lane / 4, t = lane % 4;
  const int rows[4] = {g, g + 8, g, g + 8}, cols[4] = {t, t, t + 4, t + 4};
  return {rows[reg], cols[reg]};
}
inline RC spec_tf32_b(int lane, int reg) {  // b0 (t, g) b1 (t+4, g)
  const int g = lane / 4, t = lane % 4;
  return {reg == 0 ? t : t + 4, g};
}
inline RC spec_acc(int lane, int reg) {  // c0 (g, 2t) c1 (g, 2t+1) c2 (g+8, 2t) c3 (g+8, 2t+1)
  const int g = lane / 4, t = lane % 4;
  return {reg < 2 ? g : g + 8, 2 * t + (reg & 1)};
}
// .bf16 A, element e of 0..7 (register e / 2, low half for even e):
// row g for a0, a1, a4, a5, g + 8 otherwise; col 2t + (e & 1), + 8 for e >= 4.
inline RC spec_bf16_a(int lane, int e) {
  const int g = lane / 4, t = lane % 4;
  const bool upper_rows = e == 2 || e == 3 || e == 6 || e == 7;
  return {upper_rows ? g + 8 : g, 2 * t + (e & 1) + (e >= 4 ? 8 : 0)};
}
// .bf16 B, element e of 0..3: row (k) 2t + (e & 1), + 8 for e >= 2; col g.
inline RC spec_bf16_b(int lane, int e) {
  const int g = lane / 4, t = lane % 4;
  return {2 * t + (e & 1) + (e >= 2 ? 8 : 0), g};
}
inline float bf16_half(uint32_t reg, int half) {
  const uint32_t bits = half == 0 ? (reg & 0xFFFFu) << 16 : reg & 0xFFFF0000u;
  return u2f(bits);
}

// Shared memory of one block: floats, every stage filled with NaN before its copies.
struct HostMem {
  const std::vector<float>* smem;
  // ldmatrix.x4: lane `lane` gets, from matrix j, the word lane % 4 of the row whose
  // address lane 8 j + lane / 4 supplied.
  template <class F>
  void ldsm4(uint32_t (&r)[4], int lane, F addr) const {
    for (int j = 0; j < 4; ++j) {
      const int row_addr = addr(8 * j + lane / 4);
      EXPECT_EQ(row_addr % 4, 0) << "ldmatrix row address not 16-byte aligned";
      r[j] = f2u(smem->at(size_t(row_addr + lane % 4)));
    }
  }
  uint32_t lds(int off) const { return f2u(smem->at(size_t(off))); }
};

enum class Landing { Late, Eager };
struct Fault {
  int drop_tile = -1;  // this k-tile (of each block and split) is never multiplied
  int short_ring = 0;  // the ring has STAGES - short_ring stages
  int wait_slack = 0;  // wait_group N + wait_slack
};
struct EmuOptions {
  Landing landing = Landing::Late;
  Fault fault;
};

// The buffers a copy may read (each operand's whole allocation).
struct Span {
  const float* lo;
  const float* hi;
};
// cp.async: each copy checked, then landed at once (Eager) or kept in its commit group
// until a wait retires the group (Late).
struct HostCopy {
  struct Pending {
    int off;
    float v;
  };
  struct State {
    std::vector<Pending> open;
    std::deque<std::vector<Pending>> groups;
  };
  std::vector<float>* smem;
  std::vector<Span> allowed;
  Landing landing = Landing::Late;
  State* st = nullptr;
  template <int V>
  void copy(int off, const float* src, bool ok) const {
    bool inside_any = false;
    for (const Span& s : allowed) inside_any |= src >= s.lo && src + (ok ? V : 1) <= s.hi;
    ASSERT_TRUE(inside_any) << "cp.async source outside every operand (ok=" << ok << ")";
    if (V == 4) {
      ASSERT_EQ(off % 4, 0) << "16-byte cp.async to an unaligned shared address";
      if (ok) {
        ASSERT_EQ(reinterpret_cast<uintptr_t>(src) % 16, 0u) << "16-byte cp.async from an unaligned source";
      }
    }
    for (int v = 0; v < V; ++v) {
      ASSERT_LT(size_t(off + v), smem->size()) << "cp.async past the end of shared memory";
      const float val = ok ? src[v] : 0.f;
      if (landing == Landing::Eager) (*smem)[size_t(off + v)] = val;
      else st->open.push_back({off + v, val});
    }
  }
  void commit() const {
    st->groups.push_back(std::move(st->open));
    st->open.clear();
  }
  void wait(int n) const {  // cp.async.wait_group n: all but the newest n groups land
    while (int(st->groups.size()) > n) {
      for (const Pending& p : st->groups.front()) (*smem)[size_t(p.off)] = p.v;
      st->groups.pop_front();
    }
  }
};

// An aligned float buffer (the kernel's 16-byte copies need aligned operands).
struct Buf {
  std::vector<float> store;
  float* p = nullptr;
  size_t n = 0;
  explicit Buf(size_t n_ = 0, float fill = 0.f) : store(n_ + 8, fill), n(n_) {
    p = store.data();
    while (reinterpret_cast<uintptr_t>(p) % 16) ++p;
  }
  Span span() const { return {p, p + n}; }
  float& operator[](size_t i) { return p[i]; }
  float operator[](size_t i) const { return p[i]; }
};

// One warp-wide MMA over fragments held by all 32 lanes (TF32 m16n8k8 or BF16 m16n8k16).
inline void mma_tf32(float (&d)[32][4], const uint32_t (&a)[32][4], const uint32_t (&b)[32][2]) {
  double A[16][8], B[8][8];
  for (int l = 0; l < 32; ++l) {
    for (int i = 0; i < 4; ++i) A[spec_tf32_a(l, i).r][spec_tf32_a(l, i).c] = u2f(a[l][i] & 0xFFFFE000u);
    for (int i = 0; i < 2; ++i) B[spec_tf32_b(l, i).r][spec_tf32_b(l, i).c] = u2f(b[l][i] & 0xFFFFE000u);
  }
  for (int l = 0; l < 32; ++l)
    for (int i = 0; i < 4; ++i) {
      const RC e = spec_acc(l, i);
      double s = 0;
      for (int k = 0; k < 8; ++k) s += A[e.r][k] * B[k][e.c];
      d[l][i] = float(double(d[l][i]) + s);
    }
}
inline void mma_bf16(float (&d)[32][4], const uint32_t (&a)[32][4], const uint32_t (&b)[32][2]) {
  double A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    for (int e = 0; e < 8; ++e) A[spec_bf16_a(l, e).r][spec_bf16_a(l, e).c] = bf16_half(a[l][e / 2], e % 2);
    for (int e = 0; e < 4; ++e) B[spec_bf16_b(l, e).r][spec_bf16_b(l, e).c] = bf16_half(b[l][e / 2], e % 2);
  }
  for (int l = 0; l < 32; ++l)
    for (int i = 0; i < 4; ++i) {
      const RC e = spec_acc(l, i);
      double s = 0;
      for (int k = 0; k < 16; ++k) s += A[e.r][k] * B[k][e.c];
      d[l][i] = float(double(d[l][i]) + s);
    }
}

// One warp's product of k-step ks of one stage, as warp_kstep_mma in mma_igemm.cuh.
template <class Cfg>
using WarpAcc = std::vector<std::array<std::array<std::array<float, 4>, Cfg::FN>, Cfg::FM>>;  // [lane]
template <class Cfg, class Layout>
void warp_kstep(const HostMem& mem, int stage, int ks, int wm0, int wn0, Math math, WarpAcc<Cfg>& acc) {
  using AT = typename Layout::ATile;
  using BT = typename Layout::BTile;
  const int ab = Layout::a_off(stage), bb = Layout::b_off(stage);
  const int kk = math == Math::TF32 ? 8 * ks : 16 * ks;
  static thread_local uint32_t a[32][Cfg::FM][4], b[32][Cfg::FN][2];
  for (int l = 0; l < 32; ++l) {
    if (math == Math::TF32) {
      load_a_frags<Cfg, AT>(mem, ab, l, wm0, kk, a[l]);
      load_b_frags<Cfg, BT>(mem, bb, l, wn0, kk, b[l]);
      for (auto& f : a[l])
        for (auto& r : f) r = to_tf32(r);
      for (auto& f : b[l])
        for (auto& r : f) r = to_tf32(r);
    } else {
      uint32_t h0[Cfg::FM][4], h1[Cfg::FM][4], g0[Cfg::FN][2], g1[Cfg::FN][2];
      load_a_frags<Cfg, AT>(mem, ab, l, wm0, kk, h0);
      load_a_frags<Cfg, AT>(mem, ab, l, wm0, kk + 8, h1);
      load_b_frags<Cfg, BT>(mem, bb, l, wn0, kk, g0);
      load_b_frags<Cfg, BT>(mem, bb, l, wn0, kk + 8, g1);
      for (int fm = 0; fm < Cfg::FM; ++fm) bf16_a_from_halves(h0[fm], h1[fm], a[l][fm]);
      for (int fn = 0; fn < Cfg::FN; ++fn) bf16_b_from_halves(g0[fn], g1[fn], b[l][fn]);
    }
  }
  for (int fm = 0; fm < Cfg::FM; ++fm)
    for (int fn = 0; fn < Cfg::FN; ++fn) {
      uint32_t fa[32][4], fb[32][2];
      float d[32][4];
      for (int l = 0; l < 32; ++l) {
        for (int i = 0; i < 4; ++i) fa[l][i] = a[l][fm][i], d[l][i] = acc[l][fm][fn][i];
        for (int i = 0; i < 2; ++i) fb[l][i] = b[l][fn][i];
      }
      if (math == Math::TF32) mma_tf32(d, fa, fb);
      else mma_bf16(d, fa, fb);
      for (int l = 0; l < 32; ++l)
        for (int i = 0; i < 4; ++i) acc[l][fm][fn][i] = d[l][i];
    }
}

// The whole block's side of run_pipeline: each op for every thread (copies) or warp
// (MMAs) in turn.
template <class Cfg, class Layout, class LA, class LB>
struct HostPipeOps {
  std::vector<LA>& las;
  std::vector<LB>& lbs;
  const HostCopy& cp;
  const HostMem& mem;
  std::vector<float>& smem;
  const Entry* ktable;
  int kbeg, kend, ntiles;
  Math math;
  Fault fault;
  std::vector<WarpAcc<Cfg>>& acc;
  static constexpr int KSTEPS_TF32 = ksteps(false, Cfg::BK), KSTEPS_BF16 = ksteps(true, Cfg::BK);
  int ring() const { return Cfg::STAGES - fault.short_ring; }
  const Entry* kents(int t) const {
    return reinterpret_cast<const Entry*>(smem.data() + Layout::kt_off(t % ring()));
  }
  void ktab(int t) const {
    if (ktable == nullptr || t >= ntiles) return;
    const int off = Layout::kt_off(t % ring());
    for (int j = 0; j < Cfg::BK; ++j) {  // poisoned until the copies land: entries that fail the bounds test
      const Entry bad = bad_entry();
      std::memcpy(smem.data() + off + 4 * j, &bad, sizeof bad);
    }
    for (int j = 0; j < Cfg::BK; ++j)
      cp.template copy<4>(off + 4 * j, reinterpret_cast<const float*>(ktable + kbeg + t * Cfg::BK + j), true);
  }
  template <int KSTEPS>
  void data_k(int t, int c) const {
    if (t >= ntiles) return;
    const int stage = t % ring(), k0 = kbeg + t * Cfg::BK;
    if (c == 0)
      std::fill(smem.begin() + Layout::a_off(stage), smem.begin() + Layout::a_off(stage) + Layout::STAGE,
                std::numeric_limits<float>::quiet_NaN());
    for (int tid = 0; tid < Cfg::THREADS; ++tid) {
      las[size_t(tid)].template load<KSTEPS>(cp, Layout::a_off(stage), tid, k0, kend, kents(t), c);
      lbs[size_t(tid)].template load<KSTEPS>(cp, Layout::b_off(stage), tid, k0, kend, kents(t), c);
    }
  }
  void data(int t, int c) const {
    if (math == Math::TF32) data_k<KSTEPS_TF32>(t, c);
    else data_k<KSTEPS_BF16>(t, c);
  }
  void commit() const { cp.commit(); }
  template <int N>
  void wait() const {
    cp.wait(N + fault.wait_slack);
  }
  void barrier() const {}
  void compute(int t, int ks) const {
    if (t == fault.drop_tile) return;
    for (int w = 0; w < Cfg::WARPS; ++w)
      warp_kstep<Cfg, Layout>(mem, t % ring(), ks, Cfg::warp_m0(w), Cfg::warp_n0(w), math, acc[size_t(w)]);
  }
};

// One launch: grid (N tiles, M tiles, gz), as mma_igemm_kernel; ktable is the k table
// the pipeline stages into shared memory (null for dense operands); `operands` the
// buffers the copies may read.
template <class Cfg, class Layout, class LA, class LB, class Epi>
void emulate_igemm(const LA& la, const LB& lb, const Epi& epi, int M, int N, int Kd, int k_per_z, int64_t a_zoff,
                   int64_t b_zoff, int gz, Math math, std::vector<Span> operands, const Entry* ktable = nullptr,
                   size_t ktable_len = 0, const EmuOptions& opt = {}) {
  std::vector<float> smem(size_t(Layout::FLOATS), std::numeric_limits<float>::quiet_NaN());
  if (ktable != nullptr)
    operands.push_back({reinterpret_cast<const float*>(ktable), reinterpret_cast<const float*>(ktable + ktable_len)});
  HostCopy::State st;
  const HostCopy cp{&smem, operands, opt.landing, &st};
  const HostMem mem{&smem};
  for (int z = 0; z < gz; ++z)
    for (int by = 0; by * Cfg::BM < M; ++by)
      for (int bx = 0; bx * Cfg::BN < N; ++bx) {
        const int m0 = by * Cfg::BM, n0 = bx * Cfg::BN;
        int kbeg = 0, kend = Kd;
        if (k_per_z > 0) kbeg = z * k_per_z, kend = std::min(Kd, kbeg + k_per_z);
        std::vector<LA> las(Cfg::THREADS, la);
        std::vector<LB> lbs(Cfg::THREADS, lb);
        for (int t = 0; t < Cfg::THREADS; ++t) {
          las[size_t(t)].begin_block(m0, t, int64_t(z) * a_zoff);
          lbs[size_t(t)].begin_block(n0, t, int64_t(z) * b_zoff);
        }
        std::vector<WarpAcc<Cfg>> acc(Cfg::WARPS, WarpAcc<Cfg>(32));
        for (auto& w : acc)
          for (auto& l : w)
            for (auto& f : l)
              for (auto& g : f) g.fill(0.f);
        const int ntiles = kend > kbeg ? (kend - kbeg + Cfg::BK - 1) / Cfg::BK : 0;
        HostPipeOps<Cfg, Layout, LA, LB> ops{las, lbs, cp, mem, smem, ktable, kbeg, kend, ntiles, math, opt.fault, acc};
        if (math == Math::TF32) run_pipeline<Cfg::STAGES, ksteps(false, Cfg::BK)>(ops, ntiles);
        else run_pipeline<Cfg::STAGES, ksteps(true, Cfg::BK)>(ops, ntiles);
        if (opt.fault.wait_slack == 0) {
          EXPECT_TRUE(st.open.empty() && st.groups.empty()) << "copies still in flight after the k loop";
        }
        cp.wait(0);
        for (int w = 0; w < Cfg::WARPS; ++w)
          for (int l = 0; l < 32; ++l)
            for (int fm = 0; fm < Cfg::FM; ++fm)
              for (int fn = 0; fn < Cfg::FN; ++fn)
                for (int i = 0; i < 4; ++i) {
                  const RC e = acc_rc(l, i);
                  epi.store(m0 + Cfg::warp_m0(w) + 16 * fm + e.r, n0 + Cfg::warp_n0(w) + 8 * fn + e.c,
                            acc[size_t(w)][size_t(l)][size_t(fm)][size_t(fn)][size_t(i)], z);
                }
      }
}

// The rounding the kernel applies to each input, for references.
inline double round_input(float v, Math m) {
  if (m == Math::TF32) return u2f(to_tf32(f2u(v)));
  return bf16_half(pack_bf16(f2u(v), 0), 0);
}

}  // namespace mn::kernels::mma::emu
