// The per-anchor and per-(anchor, positive) logic of the triplet miners
// (kernels/miners.h), written once as __host__ __device__ code so the CPU loops
// and the CUDA kernels mine exactly the same sets. Each function reads one row
// of the distance matrix; none allocates.
#pragma once
#include <cstdint>

#include "kernels/miners.h"
#include "runtime/philox.h"

namespace mn::kernels::miner_math {

// Order used for "nearest" (d ascending) or "farthest" (d descending); ties by index.
template <typename T>
MN_HD bool better(T d1, int64_t i1, T d2, int64_t i2, bool far) {
  if (d1 != d2) return far ? d1 > d2 : d1 < d2;
  return i1 < i2;
}

MN_HD bool k_pos_far(KMiner k) {
  return k == KMiner::BH || k == KMiner::HPHN || k == KMiner::HPEN;
}
MN_HD bool k_neg_far(KMiner k) { return k == KMiner::EPEN || k == KMiner::HPEN; }
MN_HD bool k_neg_listed(KMiner k) { return k != KMiner::BSH && k != KMiner::NS; }

// Writes up to k indices of row `row` passing `want_pos` (same label as la, != a)
// or negatives, best-first in the (d, index) order; returns how many.
template <typename T>
MN_HD int64_t select_k(const T* row, const int64_t* labels, int64_t B, int64_t a, bool positives,
                       bool far, int k, int64_t* out) {
  const int64_t la = labels[a];
  int64_t cnt = 0, prev = -1;
  for (int r = 0; r < k; ++r) {
    int64_t best = -1;
    for (int64_t j = 0; j < B; ++j) {
      if (j == a) continue;
      if ((labels[j] == la) != positives) continue;
      if (prev >= 0 && !better(row[prev], prev, row[j], j, far)) continue;  // already taken
      if (best < 0 || better(row[j], j, row[best], best, far)) best = j;
    }
    if (best < 0) break;
    out[r] = best;
    prev = best;
    ++cnt;
  }
  for (int r = static_cast<int>(cnt); r < k; ++r) out[r] = -1;
  return cnt;
}

template <typename T>
MN_HD void prepass_anchor(const MinerArgs<T>& A, int64_t a) {
  const int64_t B = A.B;
  const T* row = A.dist + a * B;
  const int64_t la = A.labels[a];
  int64_t hp = -1, hn = -1;
  for (int64_t j = 0; j < B; ++j) {
    if (j == a) continue;
    if (A.labels[j] == la) {
      if (hp < 0 || better(row[j], j, row[hp], hp, true)) hp = j;
    } else if (hn < 0 || better(row[j], j, row[hn], hn, false)) {
      hn = j;
    }
  }
  A.hp[a] = hp;
  A.hn[a] = hn;
  if (A.p.kind != MinerKind::KTriplets) return;
  const int k = A.p.k;
  A.npos[a] = select_k(row, A.labels, B, a, true, k_pos_far(A.p.kminer), k, A.possel + a * k);
  if (k_neg_listed(A.p.kminer))
    A.nneg[a] = select_k(row, A.labels, B, a, false, k_neg_far(A.p.kminer), k, A.negsel + a * k);
  else
    A.nneg[a] = 0;
}

// -log q(D) for the distance-weighted samplers: q(D) = D^(d-2) (1 - D^2/4)^((d-3)/2)
// is (up to a constant) the density of pairwise distances of points uniform on
// the unit sphere in d dimensions (Wu et al. 2017, Eq. 3); D is clamped to
// [cutoff, 1.9999] (cutoff 0.5 as in Wu et al.; the density vanishes at 2).
template <typename T>
MN_HD double dw_neg_log_q(const MinerArgs<T>& A, int64_t a, int64_t n) {
  double D = static_cast<double>(A.dist[a * A.B + n]);
  const double lo = A.p.dw_cutoff > 1e-6 ? A.p.dw_cutoff : 1e-6;
  D = D < lo ? lo : (D > 1.9999 ? 1.9999 : D);
  const double d = static_cast<double>(A.p.dw_dim);
  return -fp::add(fp::mul(d - 2.0, philox_log(D)),
                  fp::mul((d - 3.0) * 0.5, philox_log(fp::sub(1.0, fp::mul(0.25, fp::mul(D, D))))));
}

// A Gumbel(0, 1) draw for candidate n of the ordered pair (a, p): Philox block
// offset + (a B + p) B + n, in double with philox_log (identical on both devices).
template <typename T>
MN_HD double gumbel_noise(const MinerArgs<T>& A, int64_t a, int64_t p, int64_t n) {
  const uint64_t block = A.offset + (static_cast<uint64_t>(a) * A.B + p) * A.B + n;
  const Philox4 r = philox4x32_10(A.seed, block);
  const uint64_t b52 = philox_bits53(r.v[0], r.v[1]) >> 1;
  const double u = static_cast<double>(2 * b52 + 1) * (1.0 / 9007199254740992.0);  // (0, 1), exact
  return -philox_log(-philox_log(u));
}

// k-NS (the LMNN paper's Eqs. 10-11, not Wu et al.'s miner): log weight
// min(log λ, -log q(D)), unnormalised, no cutoff, plus a Gumbel draw.
template <typename T>
MN_HD double dw_key(const MinerArgs<T>& A, int64_t a, int64_t p, int64_t n, double log_lambda) {
  const double nlq = dw_neg_log_q(A, a, n);
  const double lw = nlq < log_lambda ? nlq : log_lambda;
  return fp::add(lw, gumbel_noise(A, a, p, n));
}

// Distance-weighted (Wu et al. 2017; pml DistanceWeightedMiner): negative n of
// anchor a has weight 1/q(max(D, cutoff)) normalised over the anchor's
// negatives, and weight 0 at or beyond dw_nonzero_cutoff (D >= 1.4: its
// triplet has zero loss for any useful margin). Sampling from the normalised
// weights is Gumbel-max on the unnormalised log weights (the normaliser is a
// constant per anchor), so nothing overflows. False: weight 0.
template <typename T>
MN_HD bool dw_wu_key(const MinerArgs<T>& A, int64_t a, int64_t p, int64_t n, double* key) {
  const double lo = A.p.dw_cutoff > 1e-6 ? A.p.dw_cutoff : 1e-6;
  const double D = static_cast<double>(A.dist[a * A.B + n]);
  if (!((D < lo ? lo : D) < A.p.dw_nonzero_cutoff)) return false;  // pml: clamped dist < cutoff
  *key = fp::add(dw_neg_log_q(A, a, n), gumbel_noise(A, a, p, n));
  return true;
}

struct CountEmit {
  MN_HD void operator()(int64_t) const {}
};
struct WriteEmit {
  int64_t* out;  // (count, 3) at this pair's offset
  int64_t a, p;
  mutable int64_t k = 0;
  MN_HD void operator()(int64_t n) const {
    out[3 * k] = a;
    out[3 * k + 1] = p;
    out[3 * k + 2] = n;
    ++k;
  }
};

// mine_pair's cases, one per miner kind: each emits the negatives of the
// ordered same-class pair (a, p) (row = dist row a, dap = d(a, p), m = margin).
template <typename T, typename Emit>
MN_HD int64_t mine_all(const MinerArgs<T>& A, int64_t la, const T* row, T dap, T m, const Emit& emit) {
  int64_t c = 0;
  for (int64_t n = 0; n < A.B; ++n)
    if (A.labels[n] != la && (!A.p.only_violating || dap - row[n] + m > T(0))) {
      emit(n);
      ++c;
    }
  return c;
}

template <typename T, typename Emit>
MN_HD int64_t mine_semi_hard(const MinerArgs<T>& A, int64_t a, int64_t la, const T* row, T dap, T m,
                             const Emit& emit) {
  int64_t best = -1;
  for (int64_t n = 0; n < A.B; ++n)
    if (A.labels[n] != la && row[n] > dap && row[n] < dap + m &&
        (best < 0 || better(row[n], n, row[best], best, false)))
      best = n;
  if (best < 0 && A.p.fallback == SemiHardFallback::Hardest) best = A.hn[a];
  if (best < 0) return 0;
  emit(best);
  return 1;
}

// One negative drawn uniformly among the violating (or semi-hard) ones, by a
// counter-based draw of (a, p): the same on every device.
template <typename T, typename Emit>
MN_HD int64_t mine_random(const MinerArgs<T>& A, int64_t a, int64_t p, int64_t la, const T* row, T dap, T m,
                          const Emit& emit) {
  const int64_t B = A.B;
  const bool semi = A.p.kind == MinerKind::RandomSemiHard;
  uint64_t c = 0;
  for (int64_t n = 0; n < B; ++n)
    if (A.labels[n] != la && (semi ? (row[n] > dap && row[n] < dap + m) : (dap - row[n] + m > T(0)))) ++c;
  if (c == 0) return 0;
  const uint32_t u = philox4x32_10(A.seed, A.offset + static_cast<uint64_t>(a) * B + p).v[0];
  uint64_t r = (static_cast<uint64_t>(u) * c) >> 32;  // uniform in [0, c)
  for (int64_t n = 0; n < B; ++n)
    if (A.labels[n] != la && (semi ? (row[n] > dap && row[n] < dap + m) : (dap - row[n] + m > T(0)))) {
      if (r == 0) {
        emit(n);
        return 1;
      }
      --r;
    }
  return 0;
}

// One negative per (a, p), drawn by weight.
template <typename T, typename Emit>
MN_HD int64_t mine_distance_weighted(const MinerArgs<T>& A, int64_t a, int64_t p, int64_t la, const Emit& emit) {
  int64_t best = -1;
  double bestkey = 0;
  for (int64_t n = 0; n < A.B; ++n) {
    double key = 0;
    if (A.labels[n] == la || !dw_wu_key(A, a, p, n, &key)) continue;
    if (best < 0 || better(key, n, bestkey, best, true)) {
      best = n;
      bestkey = key;
    }
  }
  if (best < 0) return 0;  // every negative at or beyond the cutoff: no triplet (as pml)
  emit(best);
  return 1;
}

// k-BSH: the k nearest negatives farther than p.
template <typename T, typename Emit>
MN_HD int64_t mine_k_bsh(const MinerArgs<T>& A, int64_t la, const T* row, T dap, const Emit& emit) {
  int64_t cnt = 0, prev = -1;
  for (int r = 0; r < A.p.k; ++r) {
    int64_t best = -1;
    for (int64_t n = 0; n < A.B; ++n) {
      if (A.labels[n] == la || !(row[n] > dap)) continue;
      if (prev >= 0 && !better(row[prev], prev, row[n], n, false)) continue;
      if (best < 0 || better(row[n], n, row[best], best, false)) best = n;
    }
    if (best < 0) break;
    emit(best);
    prev = best;
    ++cnt;
  }
  return cnt;
}

// k-NS: Gumbel-top-k (keys descending, ties by index).
template <typename T, typename Emit>
MN_HD int64_t mine_k_ns(const MinerArgs<T>& A, int64_t a, int64_t p, int64_t la, const Emit& emit) {
  const double ll = philox_log(A.p.dw_lambda > 1e-300 ? A.p.dw_lambda : 1e-300);
  int64_t cnt = 0, prev = -1;
  double prevkey = 0;
  for (int r = 0; r < A.p.k; ++r) {
    int64_t best = -1;
    double bestkey = 0;
    for (int64_t n = 0; n < A.B; ++n) {
      if (A.labels[n] == la) continue;
      const double key = dw_key(A, a, p, n, ll);
      if (prev >= 0 && !better(prevkey, prev, key, n, true)) continue;
      if (best < 0 || better(key, n, bestkey, best, true)) {
        best = n;
        bestkey = key;
      }
    }
    if (best < 0) break;
    emit(best);
    prev = best;
    prevkey = bestkey;
    ++cnt;
  }
  return cnt;
}

// The k-triplets miners: only the anchor's chosen positives; their negatives listed
// by the pre-pass, or searched here (BSH, NS).
template <typename T, typename Emit>
MN_HD int64_t mine_k(const MinerArgs<T>& A, int64_t a, int64_t p, int64_t la, const T* row, T dap,
                     const Emit& emit) {
  const int k = A.p.k;
  bool chosen = false;
  for (int64_t r = 0; r < A.npos[a]; ++r) chosen = chosen || A.possel[a * k + r] == p;
  if (!chosen) return 0;
  if (k_neg_listed(A.p.kminer)) {
    for (int64_t r = 0; r < A.nneg[a]; ++r) emit(A.negsel[a * k + r]);
    return A.nneg[a];
  }
  if (A.p.kminer == KMiner::BSH) return mine_k_bsh(A, la, row, dap, emit);
  return mine_k_ns(A, a, p, la, emit);
}

// The negatives of the ordered pair (a, p), emitted in order; returns how many.
template <typename T, typename Emit>
MN_HD int64_t mine_pair(const MinerArgs<T>& A, int64_t a, int64_t p, const Emit& emit) {
  const int64_t la = A.labels[a];
  if (a == p || A.labels[p] != la || (A.p.unordered_positives && p < a)) return 0;
  const T* row = A.dist + a * A.B;
  const T dap = row[p], m = T(A.p.margin);
  switch (A.p.kind) {
    case MinerKind::AllTriplets: return mine_all(A, la, row, dap, m, emit);
    case MinerKind::BatchHard:
      if (p != A.hp[a] || A.hn[a] < 0) return 0;
      emit(A.hn[a]);
      return 1;
    case MinerKind::SemiHard: return mine_semi_hard(A, a, la, row, dap, m, emit);
    case MinerKind::RandomViolating:
    case MinerKind::RandomSemiHard: return mine_random(A, a, p, la, row, dap, m, emit);
    case MinerKind::DistanceWeighted: return mine_distance_weighted(A, a, p, la, emit);
    case MinerKind::KTriplets: return mine_k(A, a, p, la, row, dap, emit);
  }
  return 0;
}

}  // namespace mn::kernels::miner_math
