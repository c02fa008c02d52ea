// Vectorised direct convolution (AVX2 + FMA, float) for stride-1 layers on
// small images: the conv4 trunk's 3x3 layers on 14x14, 7x7 and 3x3 maps, the
// sampling study's 5x5 layer on 12x12 maps; forward, backward-data (either run
// as the forward correlation of dy with flipped weights, or by the scatter
// kernel direct_conv_data_avx2 at the end of this file; conv2d.cpp picks) and
// backward-weight.
//
// Why not the implicit-GEMM path of conv2d.cpp for these: its row source fills
// im2col rows a few positions at a time (Q = 3..14), and `perf` put 22-24 % of
// those layers' time in the fills and 5-18 % in packing, against 46-65 % in the
// micro-kernel (bench/README.md, 2026-11-27); the layers ran at 0.24-0.76x
// PyTorch's oneDNN, which convolves directly. Here nothing is packed per call
// but the weights (K*C*R*S floats; backward-weight: dy transposed) and one
// zero-padded copy of each image. On the 2-core AVX2 EPYC it runs the sampling
// net's conv2 forward at 112-118 GFLOP/s, our SGEMM's 1024^3 at 125 (2026-11-27).
//
// The register tile is 6 output positions x 16 output channels (12 ymm
// accumulators, as the GEMM micro-kernel): per step (i, r, s) of the reduction
// it loads the 16 weights w[o0..o0+15, i, r, s] as two vectors, broadcasts the
// 6 padded-input values those positions read, and issues 12 FMAs. The six
// positions are consecutive in P*Q order (they may span output rows), so no
// vector lane is ever wasted on padding columns. Each output element is one
// sum over (i, r, s) in that order, whoever computes it.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/conv2d_direct.h"
#include "runtime/parallel.h"

namespace mn::kernels::detail {
namespace {

constexpr int kNP = 6;  // output positions per register tile

// out[j * 8*KV + lane] = sum over t < depth of wp[t * 16 + (lane)] * xp[base[j] + off[t]],
// off[t] the padded-input offset of reduction step t = (i, r, s). One flat loop
// over the steps (the s loop alone is 3-5 long); the accumulators are named
// variables: as an array GCC kept them in memory and stored all 12 every step.
// With accumulate, the sums continue from the values in out (the previous
// channel chunk's); else they start at zero.
// One reduction step of the 6 x 16 register tile (both tiles below): broadcast the
// six input values SRC[b0..b5], multiply by the weight vectors w0 (and w1) and add
// into the named accumulators aJ0 (aJ1).
#define MN_DIRECT_STEP(SRC, J)                                     \
  b = _mm256_broadcast_ss((SRC) + b##J);                           \
  a##J##0 = _mm256_fmadd_ps(w0, b, a##J##0);                       \
  if constexpr (KV == 2) a##J##1 = _mm256_fmadd_ps(w1, b, a##J##1);
#define MN_DIRECT_STEPS(SRC)                                       \
  __m256 b;                                                        \
  MN_DIRECT_STEP(SRC, 0) MN_DIRECT_STEP(SRC, 1) MN_DIRECT_STEP(SRC, 2) \
  MN_DIRECT_STEP(SRC, 3) MN_DIRECT_STEP(SRC, 4) MN_DIRECT_STEP(SRC, 5)

template <int KV>
__attribute__((target("avx2,fma"))) void tile(const float* xp, const int64_t* base,
                                              const float* wp, const int32_t* off, int64_t depth,
                                              bool accumulate, float* out) {
  constexpr int ld = 8 * KV;
  // Base + index addressing: one add per step (xo), then every broadcast reads
  // xo[bJ]. As xp + base[J] + off[t], GCC spent a lea per broadcast (six per
  // step, ~36 instructions per 12 FMAs: at Zen 3's dispatch width).
  const int64_t b0 = base[0], b1 = base[1], b2 = base[2], b3 = base[3], b4 = base[4],
                b5 = base[5];
  __m256 a00 = _mm256_setzero_ps(), a10 = a00, a20 = a00, a30 = a00, a40 = a00, a50 = a00;
  __m256 a01 = a00, a11 = a00, a21 = a00, a31 = a00, a41 = a00, a51 = a00;
  if (accumulate) {
    a00 = _mm256_loadu_ps(out + 0 * ld), a10 = _mm256_loadu_ps(out + 1 * ld);
    a20 = _mm256_loadu_ps(out + 2 * ld), a30 = _mm256_loadu_ps(out + 3 * ld);
    a40 = _mm256_loadu_ps(out + 4 * ld), a50 = _mm256_loadu_ps(out + 5 * ld);
    if constexpr (KV == 2) {
      a01 = _mm256_loadu_ps(out + 0 * ld + 8), a11 = _mm256_loadu_ps(out + 1 * ld + 8);
      a21 = _mm256_loadu_ps(out + 2 * ld + 8), a31 = _mm256_loadu_ps(out + 3 * ld + 8);
      a41 = _mm256_loadu_ps(out + 4 * ld + 8), a51 = _mm256_loadu_ps(out + 5 * ld + 8);
    }
  }
  for (int64_t t = 0; t < depth; ++t, wp += kDirectBlock) {
    const float* xo = xp + off[t];
    const __m256 w0 = _mm256_loadu_ps(wp);
    const __m256 w1 = KV == 2 ? _mm256_loadu_ps(wp + 8) : w0;
    MN_DIRECT_STEPS(xo)
  }
  _mm256_storeu_ps(out + 0 * ld, a00);
  _mm256_storeu_ps(out + 1 * ld, a10);
  _mm256_storeu_ps(out + 2 * ld, a20);
  _mm256_storeu_ps(out + 3 * ld, a30);
  _mm256_storeu_ps(out + 4 * ld, a40);
  _mm256_storeu_ps(out + 5 * ld, a50);
  if constexpr (KV == 2) {
    _mm256_storeu_ps(out + 0 * ld + 8, a01);
    _mm256_storeu_ps(out + 1 * ld + 8, a11);
    _mm256_storeu_ps(out + 2 * ld + 8, a21);
    _mm256_storeu_ps(out + 3 * ld + 8, a31);
    _mm256_storeu_ps(out + 4 * ld + 8, a41);
    _mm256_storeu_ps(out + 5 * ld + 8, a51);
  }
}

// xp (Ci, H + 2 ph, W + 2 pw) = image xn (Ci, H, W) with zero borders. (Writing
// each element once, rows by a plain loop and the borders separately, measured
// slower: conv4 blocks 3-4 backward-weight 4.8-5.1 -> 7.3-8.2 ms and 1.9-2.2 ->
// 3.1 ms, likely as GCC turns each short piece into a memset or memcpy call.)
void pad_image(const DirectConv& d, const float* xn, float* xp) {
  const int64_t Wp = d.W + 2 * d.pw, CS = (d.H + 2 * d.ph) * Wp;
  std::fill(xp, xp + d.Ci * CS, 0.0f);
  for (int64_t i = 0; i < d.Ci; ++i)
    for (int64_t h = 0; h < d.H; ++h)
      std::memcpy(xp + i * CS + (h + d.ph) * Wp + d.pw, xn + (i * d.H + h) * d.W,
                  sizeof(float) * d.W);
}

// dst[l * H*W + h*W + w] = buf[((h + oh) * Wp + w + ow) * 16 + l] (+ bias[l]) for
// l < width, h < H, w < W: a (rows, 16) buffer of 16-channel rows transposed into
// `width` channel planes (backward-data: the interior of the padded dx; forward:
// all P*Q positions as one row, H = 1). Rows of at least 8 columns go through
// 8x8 register transposes (8 channels x 8 columns) where the block has 8
// channels; the rest element by element. (An element-by-element copy took ~7 %
// of the scatter's time on conv4 block 2, perf, 2026-11-27; in the forward of
// the sampling net's conv1, depth 25, it made the layer 2.15-2.51 ms against
// 1.58-1.87 ms with the transposes, batch 128, 3 alternating runs each.)
__attribute__((target("avx2,fma"))) void unpack_rows(const float* buf, int64_t H, int64_t W,
                                                     int64_t Wp, int64_t oh, int64_t ow,
                                                     int64_t width, const float* bias,
                                                     float* dst_planes) {
  static_assert(kDirectBlock == 16, "the loads below step over 16-float rows");
  const int64_t HW = H * W;
  for (int64_t l0 = 0; l0 < width; l0 += 8) {
    const bool full = l0 + 8 <= width;
    __m256 bv[8];
    for (int j = 0; j < 8; ++j)
      bv[j] = _mm256_set1_ps(bias && l0 + j < width ? bias[l0 + j] : 0.0f);
    for (int64_t h = 0; h < H; ++h) {
      const float* src = buf + ((h + oh) * Wp + ow) * kDirectBlock + l0;
      float* dst = dst_planes + l0 * HW + h * W;
      if (full && W >= 8) {
        for (int64_t w8 = 0; w8 < W; w8 += 8) {
          // The last group overlaps the one before where W % 8 != 0 (the same
          // values are written twice).
          const int64_t w = std::min(w8, W - 8);
          // r_k: column w+k's 8 channels; the stores: channel l0+j's 8 columns.
          const float* s = src + w * kDirectBlock;
          const __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + 16);
          const __m256 r2 = _mm256_loadu_ps(s + 32), r3 = _mm256_loadu_ps(s + 48);
          const __m256 r4 = _mm256_loadu_ps(s + 64), r5 = _mm256_loadu_ps(s + 80);
          const __m256 r6 = _mm256_loadu_ps(s + 96), r7 = _mm256_loadu_ps(s + 112);
          const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
          const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
          const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
          const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
          const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
          const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
          const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
          const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
          __m256 c[8] = {_mm256_permute2f128_ps(u0, u4, 0x20), _mm256_permute2f128_ps(u1, u5, 0x20),
                         _mm256_permute2f128_ps(u2, u6, 0x20), _mm256_permute2f128_ps(u3, u7, 0x20),
                         _mm256_permute2f128_ps(u0, u4, 0x31), _mm256_permute2f128_ps(u1, u5, 0x31),
                         _mm256_permute2f128_ps(u2, u6, 0x31), _mm256_permute2f128_ps(u3, u7, 0x31)};
          for (int j = 0; j < 8; ++j) {
            if (bias) c[j] = _mm256_add_ps(c[j], bv[j]);
            _mm256_storeu_ps(dst + j * HW + w, c[j]);
          }
        }
        continue;
      }
      for (int64_t lane = 0; lane < std::min<int64_t>(8, width - l0); ++lane) {
        const float b = bias ? bias[l0 + lane] : 0.0f;
        for (int64_t w = 0; w < W; ++w)
          dst[lane * HW + w] = bias ? src[w * kDirectBlock + lane] + b : src[w * kDirectBlock + lane];
      }
    }
  }
}

}  // namespace

void direct_conv_avx2(const DirectConv& d, const float* x, const float* wp, const float* bias,
                      float* y) {
  const int64_t P = d.P(), Q = d.Q(), PQ = P * Q;
  const int64_t Hp = d.H + 2 * d.ph, Wp = d.W + 2 * d.pw, CS = Hp * Wp;
  const int64_t CRS = d.Ci * d.R * d.S, HW = d.H * d.W;
  const int64_t blocks = (d.Co + kDirectBlock - 1) / kDirectBlock;
  const int64_t tiles = (PQ + kNP - 1) / kNP;
  const bool unpadded = d.ph == 0 && d.pw == 0;  // then x itself is the padded image
  std::vector<int32_t> off(static_cast<size_t>(CRS));  // (i, r, s) -> i*CS + r*Wp + s
  for (int64_t i = 0, t = 0; i < d.Ci; ++i)
    for (int64_t r = 0; r < d.R; ++r)
      for (int64_t s = 0; s < d.S; ++s) off[t++] = static_cast<int32_t>(i * CS + r * Wp + s);
  // Input channels per pass over the tiles: the chunk's weights (16 per step)
  // and padded input should stay in L1 together (half of a 32 KiB L1; without
  // chunks conv4's 14x14 layer re-read 100 KB per 6-position tile from L2), but
  // a chunk keeps at least 32 steps so that reloading the 12 running sums per
  // tile stays cheap.
  const int64_t per_channel = (d.R * d.S * kDirectBlock + CS) * int64_t(sizeof(float));
  const int64_t chunk = std::min(d.Ci, std::max<int64_t>({1, (16 * 1024) / per_channel,
                                                           (32 + d.R * d.S - 1) / (d.R * d.S)}));
  // Whole images per chunk when there are enough of them (each image padded once
  // per thread); else single (image, block) items so that every thread works.
  const int64_t grain = d.N >= num_threads() ? blocks : 1;
  parallel_for(0, d.N * blocks, grain, [&](int64_t i0, int64_t i1) {
    thread_local std::vector<float> padded;
    if (static_cast<int64_t>(padded.size()) < d.Ci * CS)
      padded.resize(static_cast<size_t>(d.Ci * CS));
    const float* xp = padded.data();
    int64_t have = -1;  // the image now in xp
    thread_local std::vector<float> acc;  // tiles x (6 x 16) running sums
    acc.resize(static_cast<size_t>(tiles * kNP * kDirectBlock));
    std::vector<int64_t> bases(static_cast<size_t>(tiles * kNP));
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t pos0 = t * kNP, count = std::min<int64_t>(kNP, PQ - pos0);
      for (int j = 0; j < kNP; ++j) {  // a short last tile repeats its last position
        const int64_t pos = pos0 + std::min<int64_t>(j, count - 1);
        bases[t * kNP + j] = (pos / Q) * Wp + pos % Q;
      }
    }
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t n = item / blocks, ob = item % blocks;
      if (n != have) {
        if (unpadded) {
          xp = x + n * d.Ci * HW;
        } else {
          pad_image(d, x + n * d.Ci * HW, padded.data());
        }
        have = n;
      }
      const int64_t o0 = ob * kDirectBlock, width = std::min(kDirectBlock, d.Co - o0);
      const int64_t ld = width > 8 ? 16 : 8;
      const float* wb = wp + ob * CRS * kDirectBlock;
      // Channel chunks, in order; every tile's sums continue across them.
      for (int64_t c0 = 0; c0 < d.Ci; c0 += chunk) {
        const int64_t t0 = c0 * d.R * d.S, depth = std::min(chunk, d.Ci - c0) * d.R * d.S;
        for (int64_t t = 0; t < tiles; ++t) {
          float* out = acc.data() + t * kNP * kDirectBlock;
          if (width > 8) {
            tile<2>(xp, &bases[t * kNP], wb + t0 * kDirectBlock, off.data() + t0, depth, c0 > 0,
                    out);
          } else {
            tile<1>(xp, &bases[t * kNP], wb + t0 * kDirectBlock, off.data() + t0, depth, c0 > 0,
                    out);
          }
        }
      }
      if (ld == kDirectBlock) {  // acc is (tiles * 6, 16): all P*Q positions as one row
        unpack_rows(acc.data(), 1, PQ, PQ, 0, 0, width, bias ? bias + o0 : nullptr,
                    y + (n * d.Co + o0) * PQ);
        continue;
      }
      for (int64_t lane = 0; lane < width; ++lane) {
        const float bo = bias ? bias[o0 + lane] : 0.0f;
        float* yrow = y + (n * d.Co + o0 + lane) * PQ;
        for (int64_t t = 0; t < tiles; ++t) {
          const float* out = acc.data() + t * kNP * kDirectBlock;
          const int64_t pos0 = t * kNP, count = std::min<int64_t>(kNP, PQ - pos0);
          for (int64_t j = 0; j < count; ++j) yrow[pos0 + j] = out[j * ld + lane] + bo;
        }
      }
    }
  });
}

// Backward-weight with the same register tile, roles exchanged: 6 taps (i, r, s)
// x 16 output channels, the reduction running over the output positions of
// every image: dW^T[tap, o] = sum_n sum_pos dy_n^T[pos, o] * xpad_n[tap_off + base(pos)],
// dy_n^T (P*Q, 16 per block) transposed per image so that 16 channels load as
// two vectors. The (block, tap-tile) items are split over the threads; each
// thread walks all images in order (padding and transposing each for itself,
// ~1/depth of the work), so every weight gradient is one sum over n, then pos,
// whatever the thread count (and whatever the image grouping below).
void direct_conv_weight_avx2(const DirectConv& d, const float* x, const float* dy, float* dw) {
  const int64_t P = d.P(), Q = d.Q(), PQ = P * Q;
  const int64_t Hp = d.H + 2 * d.ph, Wp = d.W + 2 * d.pw, CS = Hp * Wp;
  const int64_t CRS = d.Ci * d.R * d.S, HW = d.H * d.W;
  const int64_t blocks = (d.Co + kDirectBlock - 1) / kDirectBlock;
  const int64_t tap_tiles = (CRS + kNP - 1) / kNP, items = blocks * tap_tiles;
  // Unpadded layers read x in place: a copy of each image per thread (the
  // sampling net's conv2: 384 memcpy calls of 48 bytes per image) cost ~3 % of
  // its training step (perf, 2026-11-27).
  const bool unpadded = d.ph == 0 && d.pw == 0;
  std::vector<int64_t> taps(static_cast<size_t>(tap_tiles * kNP));  // padded-input offsets
  for (int64_t t = 0; t < tap_tiles * kNP; ++t) {
    const int64_t tap = std::min(t, CRS - 1);  // a short last tile repeats its last tap
    const int64_t i = tap / (d.R * d.S), r = (tap / d.S) % d.R, s = tap % d.S;
    taps[t] = i * CS + r * Wp + s;
  }
  // Images in groups of G, padded side by side, so that one tile call sums at
  // least ~128 positions (conv4's 3x3 maps: 9 per image; the 12 running sums are
  // reloaded once per group instead of per image). Within a call the order is
  // still image by image, position by position.
  const int64_t G = std::min<int64_t>(std::max<int64_t>(1, (128 + PQ - 1) / PQ), std::max<int64_t>(d.N, 1));
  const int64_t IS = d.Ci * CS;  // one padded image
  std::vector<int32_t> pbase(static_cast<size_t>(G * PQ));  // (image g, position) -> g*IS + p*Wp + q
  for (int64_t g = 0; g < G; ++g)
    for (int64_t pos = 0; pos < PQ; ++pos)
      pbase[g * PQ + pos] = static_cast<int32_t>(g * IS + (pos / Q) * Wp + pos % Q);
  std::vector<float> acc(static_cast<size_t>(items * kNP * kDirectBlock));
  parallel_for(0, items, 1, [&](int64_t i0, int64_t i1) {
    thread_local std::vector<float> padded, dyt;
    padded.resize(static_cast<size_t>(G * IS));
    dyt.resize(static_cast<size_t>(blocks * G * PQ * kDirectBlock));
    const float* xp = padded.data();
    const int64_t ob0 = i0 / tap_tiles, ob1 = (i1 - 1) / tap_tiles + 1;  // blocks this thread needs
    for (int64_t n0 = 0; n0 < d.N; n0 += G) {
      const int64_t gn = std::min(G, d.N - n0), steps = gn * PQ;
      if (unpadded) {  // the group's images lie side by side in x already
        xp = x + n0 * IS;
      } else {
        for (int64_t g = 0; g < gn; ++g) pad_image(d, x + (n0 + g) * d.Ci * HW, padded.data() + g * IS);
      }
      // dyt[ob][g*PQ + pos][lane] = dy_{n0+g}[ob*16 + lane][pos]
      for (int64_t ob = ob0; ob < ob1; ++ob) {
        float* blk = dyt.data() + ob * G * PQ * kDirectBlock;
        for (int64_t g = 0; g < gn; ++g) {
          const float* dyn = dy + (n0 + g) * d.Co * PQ;
          float* bg = blk + g * PQ * kDirectBlock;
          for (int64_t lane = 0; lane < kDirectBlock; ++lane) {
            const int64_t o = ob * kDirectBlock + lane;
            if (o < d.Co) {
              const float* src = dyn + o * PQ;
              for (int64_t pos = 0; pos < PQ; ++pos) bg[pos * kDirectBlock + lane] = src[pos];
            } else {
              for (int64_t pos = 0; pos < PQ; ++pos) bg[pos * kDirectBlock + lane] = 0.0f;
            }
          }
        }
      }
      for (int64_t item = i0; item < i1; ++item) {
        const int64_t ob = item / tap_tiles, tt = item % tap_tiles;
        const float* blk = dyt.data() + ob * G * PQ * kDirectBlock;
        float* out = acc.data() + item * kNP * kDirectBlock;
        if (d.Co - ob * kDirectBlock > 8) {
          tile<2>(xp, &taps[tt * kNP], blk, pbase.data(), steps, n0 > 0, out);
        } else {
          tile<1>(xp, &taps[tt * kNP], blk, pbase.data(), steps, n0 > 0, out);
        }
      }
    }
  });
  // dw (Co, CRS) from the items' (6 taps x 16 channels) tiles.
  parallel_for(0, items, 16, [&](int64_t i0, int64_t i1) {
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t ob = item / tap_tiles, tt = item % tap_tiles;
      const int64_t width = std::min(kDirectBlock, d.Co - ob * kDirectBlock), ld = width > 8 ? 16 : 8;
      const float* out = acc.data() + item * kNP * kDirectBlock;
      for (int64_t j = 0; j < kNP && tt * kNP + j < CRS; ++j)
        for (int64_t lane = 0; lane < width; ++lane)
          dw[(ob * kDirectBlock + lane) * CRS + tt * kNP + j] = out[j * ld + lane];
    }
  });
}

// ---- backward-data by scatter --------------------------------------------------
// Why: backward-data as a correlation of dy padded by R-1-ph computes H*W
// outputs at depth Co*R*S; for an unpadded 5x5 layer on 12x12 (the sampling
// net's conv2: 144 outputs vs 64 positions) that is 2.25x the forward's work,
// and the GEMM path (col = W^T dY, then col2im) ran at ~0.7x PyTorch's oneDNN.
// The scatter does exactly the forward's multiply-adds at any padding:
//   dx[c, p - ph + r, q - pw + s] += sum_o w[o, c, r, s] * dy[o, p, q]
// Same register tile as above, roles changed: 6 dy positions (consecutive in
// P*Q order, so no lane idles at row ends) x 16 input channels, reduced over
// o (per step: two weight loads, six broadcasts of dy[o, pos..pos+5], 12 FMAs).
// The 12 sums then go to six rows of a per-thread buffer holding the padded dx
// of one 16-channel block transposed, (Hp*Wp, 16): tap (r, s) of position
// (p, q) lands on row (p + r)*Wp + q + s, so every tile adds to six whole
// 64-byte rows and padding needs no bounds checks (border rows are dropped).
// Per (image, channel block) the loop is tap, then tile, so one tap's weights
// (Co x 16 floats, 4 KiB at Co = 64) stay in L1. (Tile-outer order and groups
// of tiles that keep dy in L1 measured the same, single thread, 2026-11-27.)
// Every dx element is one running sum over the taps in (r, s) order, each tap
// over o in order, continued from the buffer's value: a fixed order whoever
// computes it. Single thread, batch 32 (GFLOP/s, scatter / flip / forward):
// sampling conv2 81-83 / 39 / 83-86, conv4 block 2 72-76 / 82-85 / 81-86,
// block 3 76-81 / 76-78, block 4 66-67 / 61-62.
namespace {

// The 6 positions x 16 input channels of one tap (r, s), summed over o and added
// into the transposed dx buffer:
//   buf[row[j] + lane] += sum_{o < depth} wp[o * 16 + lane] * dy[o * PQ + pos[j]],
// each row[j] + lane one running sum continued from the buffer's value, over o
// in order. A short last tile repeats its last position: the repeated rows
// compute and store the same value twice.
template <int KV>
__attribute__((target("avx2,fma"))) void scatter_tile(const float* dy, const int64_t* pos,
                                                      int64_t PQ, const float* wp, int64_t depth,
                                                      float* buf, const int64_t* row) {
  const int64_t b0 = pos[0], b1 = pos[1], b2 = pos[2], b3 = pos[3], b4 = pos[4], b5 = pos[5];
  float* const o0 = buf + row[0];
  float* const o1 = buf + row[1];
  float* const o2 = buf + row[2];
  float* const o3 = buf + row[3];
  float* const o4 = buf + row[4];
  float* const o5 = buf + row[5];
  __m256 a00 = _mm256_loadu_ps(o0), a10 = _mm256_loadu_ps(o1), a20 = _mm256_loadu_ps(o2);
  __m256 a30 = _mm256_loadu_ps(o3), a40 = _mm256_loadu_ps(o4), a50 = _mm256_loadu_ps(o5);
  __m256 a01 = a00, a11 = a00, a21 = a00, a31 = a00, a41 = a00, a51 = a00;
  if constexpr (KV == 2) {
    a01 = _mm256_loadu_ps(o0 + 8), a11 = _mm256_loadu_ps(o1 + 8), a21 = _mm256_loadu_ps(o2 + 8);
    a31 = _mm256_loadu_ps(o3 + 8), a41 = _mm256_loadu_ps(o4 + 8), a51 = _mm256_loadu_ps(o5 + 8);
  }
  const float* dyo = dy;
  for (int64_t t = 0; t < depth; ++t, wp += kDirectBlock, dyo += PQ) {
    const __m256 w0 = _mm256_loadu_ps(wp);
    const __m256 w1 = KV == 2 ? _mm256_loadu_ps(wp + 8) : w0;
    MN_DIRECT_STEPS(dyo)
  }
  _mm256_storeu_ps(o0, a00);
  _mm256_storeu_ps(o1, a10);
  _mm256_storeu_ps(o2, a20);
  _mm256_storeu_ps(o3, a30);
  _mm256_storeu_ps(o4, a40);
  _mm256_storeu_ps(o5, a50);
  if constexpr (KV == 2) {
    _mm256_storeu_ps(o0 + 8, a01);
    _mm256_storeu_ps(o1 + 8, a11);
    _mm256_storeu_ps(o2 + 8, a21);
    _mm256_storeu_ps(o3 + 8, a31);
    _mm256_storeu_ps(o4 + 8, a41);
    _mm256_storeu_ps(o5 + 8, a51);
  }
}

}  // namespace

void direct_conv_data_avx2(const DirectConv& d, const float* dy, const float* wpT, float* dx) {
  const int64_t P = d.P(), Q = d.Q(), PQ = P * Q;
  const int64_t Hp = d.H + 2 * d.ph, Wp = d.W + 2 * d.pw, HW = d.H * d.W;
  const int64_t RS = d.R * d.S;
  const int64_t blocks = (d.Ci + kDirectBlock - 1) / kDirectBlock;
  const int64_t tiles = (PQ + kNP - 1) / kNP;
  // Per tile slot: the dy position (a short last tile repeats its last one) and
  // the buffer row of its tap (0, 0) target, (p*Wp + q) * 16.
  std::vector<int64_t> pos(static_cast<size_t>(tiles * kNP)), row(pos.size());
  for (int64_t t = 0; t < tiles * kNP; ++t) {
    const int64_t ps = std::min(t, PQ - 1);
    pos[t] = ps;
    row[t] = ((ps / Q) * Wp + ps % Q) * kDirectBlock;
  }
  const int64_t grain = d.N >= num_threads() ? blocks : 1;
  parallel_for(0, d.N * blocks, grain, [&](int64_t i0, int64_t i1) {
    // buf (Hp*Wp, 16): the padded dx of one block of 16 channels, transposed
    // (channels last) so that a position's 16 channels are one 64-byte line.
    thread_local std::vector<float> storage;
    const size_t need = static_cast<size_t>(Hp * Wp * kDirectBlock + 16);  // + room to align
    if (storage.size() < need) storage.resize(need);
    float* buf = storage.data();
    buf += (64 - reinterpret_cast<uintptr_t>(buf) % 64) % 64 / sizeof(float);
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t n = item / blocks, cb = item % blocks;
      const int64_t c0 = cb * kDirectBlock, width = std::min(kDirectBlock, d.Ci - c0);
      const float* dyn = dy + n * d.Co * PQ;
      std::fill(buf, buf + Hp * Wp * kDirectBlock, 0.0f);
      for (int64_t tap = 0; tap < RS; ++tap) {
        const int64_t r = tap / d.S, s = tap % d.S;
        const float* wt = wpT + (cb * RS + tap) * d.Co * kDirectBlock;
        float* bt = buf + (r * Wp + s) * kDirectBlock;
        for (int64_t t = 0; t < tiles; ++t) {
          if (width > 8) {
            scatter_tile<2>(dyn, &pos[t * kNP], PQ, wt, d.Co, bt, &row[t * kNP]);
          } else {
            scatter_tile<1>(dyn, &pos[t * kNP], PQ, wt, d.Co, bt, &row[t * kNP]);
          }
        }
      }
      unpack_rows(buf, d.H, d.W, Wp, d.ph, d.pw, width, nullptr, dx + (n * d.Ci + c0) * HW);
    }
  });
}

#undef MN_DIRECT_STEPS
#undef MN_DIRECT_STEP

}  // namespace mn::kernels::detail
