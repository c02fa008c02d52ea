// CPU fused metric-learning losses: the readable oracle for kernels/cuda/losses.cu.
// Same scalar formulas (kernels/losses.h, loss_math); terms run in parallel over
// mn::parallel_for; sums for the reduction and the global means in double.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/distance_math.h"
#include "kernels/losses.h"
#include "runtime/parallel.h"

namespace mn::kernels {
namespace {

inline int64_t row_of(const int64_t* idx, int64_t t) { return idx ? idx[t] : t; }

using dist_math::row_sq_l2;  // the one per-row squared distance (kernels/cpu/distance_math.h)

// Rows per parallel chunk: 32768 / D, so a loss over fewer than 32768 elements
// runs on the calling thread. Measured (bench_losses, 2026-11-27, 2-core AMD EPYC,
// median of 5): at 150 x 128 (19,200 elements, ~26-30 us) two threads were 5-10 %
// slower than one with 16384 / D (two chunks of ~10 us: the hand-off costs more
// than the half it saves).
int64_t grain_for(int64_t D) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(D, 1)); }

}  // namespace

const char* triplet_kind_name(TripletKind k) {
  switch (k) {
    case TripletKind::Schroff: return "schroff";
    case TripletKind::Kumar: return "kumar";
    case TripletKind::MarginL2: return "margin_l2";
    case TripletKind::SoftMargin: return "soft_margin";
    case TripletKind::SoftmaxRatio: return "softmax_ratio";
    case TripletKind::Pull: return "pull";
    case TripletKind::Global: return "global";
    case TripletKind::GlobalTriplet: return "global_triplet";
  }
  return "?";
}

template <typename T>
void triplet_loss_forward_cpu(const TripletLossParams& P, int64_t N, int64_t D,
                              const TermRows<T>& r, const TermOut<T>& o) {
  const bool global = triplet_kind_is_global(P.kind);
  const bool pair = r.En == nullptr;
  const T m = T(P.margin), w = T(P.weight);
  const int64_t terms = r.count ? std::min(std::max<int64_t>(*r.count, 0), N) : N;
  // Pass 1 (the only pass for per-term kinds): distances, loss, coefficients.
  parallel_for(0, N, grain_for(D), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      if (t >= terms) {  // padding (TermRows::count): no loss, no gradient
        o.dp[t] = o.wp[t] = o.loss[t] = T(0);
        if (o.dn) o.dn[t] = T(0);
        if (o.wn) o.wn[t] = T(0);
        o.active[t] = o.is_pos[t] = 0;
        continue;
      }
      // A pull pair is a same-class pair: the reduction's positive-distance mean
      // is the pull terms' (is_pos was left unwritten before, and that mean read
      // whatever the buffer held).
      o.is_pos[t] = 1;
      const T* a = r.Ea + row_of(r.ia, t) * D;
      T dp, kp, dn = T(0), kn = T(0);
      loss_math::dist_from_sq(P.dist, row_sq_l2(a, r.Ep + row_of(r.ip, t) * D, D), &dp, &kp);
      if (!pair)
        loss_math::dist_from_sq(P.dist, row_sq_l2(a, r.En + row_of(r.in, t) * D, D), &dn, &kn);
      o.dp[t] = dp;
      if (o.dn) o.dn[t] = dn;
      if (global) {  // remember the factors for pass 2
        o.wp[t] = kp;
        o.wn[t] = kn;
        continue;
      }
      T gdp, gdn;
      bool act;
      T l = loss_math::triplet_term(P.kind, dp, dn, m, &gdp, &gdn, &act);
      o.loss[t] = w * l;
      o.wp[t] = w * gdp * kp;
      if (o.wn) o.wn[t] = -w * gdn * kn;
      o.active[t] = act ? 1 : 0;
    }
  });
  if (!global) return;
  // Batch means (double), then pass 2 over the terms (no second pass over D).
  double sp = 0, sn = 0;
  for (int64_t t = 0; t < N; ++t) {
    sp += o.dp[t];
    sn += o.dn[t];
  }
  const T mup = N ? T(sp / N) : T(0), mun = N ? T(sn / N) : T(0);
  parallel_for(0, N, 1024, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      T gdp, gdn;
      bool act;
      T l = loss_math::global_term(P, o.dp[t], o.dn[t], mup, mun, N, &gdp, &gdn, &act);
      o.loss[t] = w * l;
      o.wp[t] = w * gdp * o.wp[t];
      o.wn[t] = -w * gdn * o.wn[t];
      o.active[t] = act ? 1 : 0;
    }
  });
}

template <typename T>
void contrastive_forward_cpu(ContrastiveForm form, double margin, int64_t N, int64_t D,
                             const TermRows<T>& r, const int64_t* label, const TermOut<T>& o) {
  const T M = T(margin);
  const int64_t terms = r.count ? std::min(std::max<int64_t>(*r.count, 0), N) : N;
  parallel_for(0, N, grain_for(D), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      if (t >= terms) {  // padding (TermRows::count): no loss, no gradient
        o.loss[t] = o.wp[t] = o.dp[t] = T(0);
        o.active[t] = o.is_pos[t] = 0;
        continue;
      }
      const T s = row_sq_l2(r.Ea + row_of(r.ia, t) * D, r.Ep + row_of(r.ip, t) * D, D);
      T d, k;
      loss_math::dist_from_sq(DistKind::Plain, s, &d, &k);
      T l, w;
      bool pos;
      if (form == ContrastiveForm::Hadsell) {
        pos = label[t] == 0;  // Y = 0: genuine pair
        if (pos) {
          l = s;  // D^2, exact from the squared norm; dL/dx = 2 (x1 - x2)
          w = T(2);
        } else {
          T h = M - d > T(0) ? M - d : T(0);
          l = h * h;
          w = T(-2) * h * k;
        }
      } else {
        pos = label[t] == 1;  // y = 1: positive pair
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
  });
}

template <typename T>
void loss_reduce_cpu(Reduction red, int64_t N, const T* loss, const T* d1, const T* d2,
                     const uint8_t* is_pos, const uint8_t* active, T* stats, const int64_t* count) {
  if (count) N = std::min(std::max<int64_t>(*count, 0), N);  // the padding is not reduced
  // cnt: active terms (the stat); nz: terms with a loss > 0, MeanNonZero's
  // divisor (pml AvgNonZeroReducer). They differ for soft-margin, whose every
  // term is > 0 while only dp - dn + m > 0 counts as active.
  double sum = 0, cnt = 0, nz = 0, s1 = 0, s2 = 0, c1 = 0, c2 = 0;
  for (int64_t t = 0; t < N; ++t) {
    sum += loss[t];
    cnt += active ? (active[t] ? 1 : 0) : (loss[t] > T(0) ? 1 : 0);
    nz += loss[t] > T(0) ? 1 : 0;
    if (d2) {
      s1 += d1[t];
      s2 += d2[t];
      c1 += 1;
      c2 += 1;
    } else if (is_pos && is_pos[t]) {
      s1 += d1[t];
      c1 += 1;
    } else {
      s2 += d1[t];
      c2 += 1;
    }
  }
  double norm = red == Reduction::Sum ? 1.0
                : red == Reduction::Mean ? (N > 0 ? 1.0 / N : 0.0)
                                         : 1.0 / std::max(nz, 1.0);
  stats[0] = T(sum * norm);
  stats[1] = T(cnt);
  stats[2] = T(c1 > 0 ? s1 / c1 : 0.0);
  stats[3] = T(c2 > 0 ? s2 / c2 : 0.0);
  stats[4] = T(norm);
}

template <typename T>
void loss_apply_grad_cpu(int64_t N, int64_t D, const TermRows<T>& r, const T* wp, const T* wn,
                         const T* grad_out, const T* stats, T extra, T* ga, T* gp, T* gn) {
  const T s = grad_out[0] * stats[4] * extra;
  const bool indexed = r.ia || r.ip || r.in;
  const bool pair = r.En == nullptr;
  if (!indexed) {  // dense rows: each term owns its output rows; overwrite
    parallel_for(0, N, grain_for(D), [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const T* a = r.Ea + t * D;
        const T* p = r.Ep + t * D;
        const T cp = s * wp[t];
        if (pair) {
          for (int64_t j = 0; j < D; ++j) {
            T g = cp * (a[j] - p[j]);
            ga[t * D + j] = g;
            gp[t * D + j] = -g;
          }
        } else {
          const T* n = r.En + t * D;
          const T cn = s * wn[t];
          for (int64_t j = 0; j < D; ++j) {
            T u = a[j] - p[j], v = a[j] - n[j];
            ga[t * D + j] = cp * u - cn * v;
            gp[t * D + j] = -cp * u;
            gn[t * D + j] = cn * v;
          }
        }
      }
    });
    return;
  }
  // Index lists: rows repeat across terms, so threads split the columns and every
  // thread walks all terms in order (deterministic, no races even when ga/gp/gn alias).
  const int64_t chunk = 16;
  parallel_for(0, (D + chunk - 1) / chunk, 1, [&](int64_t cb, int64_t ce) {
    const int64_t j0 = cb * chunk, j1 = std::min(D, ce * chunk);
    for (int64_t t = 0; t < N; ++t) {
      const int64_t ra = row_of(r.ia, t), rp = row_of(r.ip, t);
      const T* a = r.Ea + ra * D;
      const T* p = r.Ep + rp * D;
      const T cp = s * wp[t];
      if (pair) {
        if (cp == T(0)) continue;
        for (int64_t j = j0; j < j1; ++j) {
          T g = cp * (a[j] - p[j]);
          ga[ra * D + j] += g;
          gp[rp * D + j] -= g;
        }
      } else {
        const T cn = s * wn[t];
        if (cp == T(0) && cn == T(0)) continue;
        const int64_t rn = row_of(r.in, t);
        const T* n = r.En + rn * D;
        for (int64_t j = j0; j < j1; ++j) {
          T u = a[j] - p[j], v = a[j] - n[j];
          ga[ra * D + j] += cp * u - cn * v;
          gp[rp * D + j] -= cp * u;
          gn[rn * D + j] += cn * v;
        }
      }
    }
  });
}

template <typename T>
void koch_forward_cpu(int64_t N, int64_t D, const T* h1, const T* h2, const T* alpha,
                      const T* bias, const T* target, T* loss, T* dz, T* dist, uint8_t* is_pos) {
  parallel_for(0, N, grain_for(D), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      T s = T(0);
      for (int64_t j = 0; j < D; ++j) s += alpha[j] * std::abs(h1[i * D + j] - h2[i * D + j]);
      const T z = s + bias[0], t = target[i];
      loss[i] = (z > T(0) ? z : T(0)) - t * z + std::log1p(std::exp(-std::abs(z)));
      dz[i] = loss_math::sigmoid(z) - t;
      dist[i] = s;
      is_pos[i] = t > T(0.5) ? 1 : 0;
    }
  });
}

template <typename T>
void koch_backward_cpu(int64_t N, int64_t D, const T* h1, const T* h2, const T* alpha,
                       const T* dz, const T* grad_out, const T* stats, T* g1, T* g2, T* galpha,
                       T* gbias) {
  const T s = grad_out[0] * stats[4];
  parallel_for(0, N, grain_for(D), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      for (int64_t j = 0; j < D; ++j) {
        T d = h1[i * D + j] - h2[i * D + j];
        T sg = d > T(0) ? T(1) : (d < T(0) ? T(-1) : T(0));
        T g = s * dz[i] * alpha[j] * sg;
        g1[i * D + j] = g;
        g2[i * D + j] = -g;
      }
  });
  parallel_for(0, D, 64, [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) {
      T acc = T(0);
      for (int64_t i = 0; i < N; ++i) acc += dz[i] * std::abs(h1[i * D + j] - h2[i * D + j]);
      galpha[j] = s * acc;
    }
  });
  T acc = T(0);
  for (int64_t i = 0; i < N; ++i) acc += dz[i];
  gbias[0] = s * acc;
}

template <typename T>
void lmnn_stats_combine_cpu(const T* pull, const T* push, T* out) {
  out[0] = pull[0] + push[0];
  out[1] = push[1];
  out[2] = pull[2];
  out[3] = push[3];
  out[4] = T(1);
}

#define MN_INST(T)                                                                             \
  template void triplet_loss_forward_cpu<T>(const TripletLossParams&, int64_t, int64_t,        \
                                            const TermRows<T>&, const TermOut<T>&);            \
  template void contrastive_forward_cpu<T>(ContrastiveForm, double, int64_t, int64_t,          \
                                           const TermRows<T>&, const int64_t*,                 \
                                           const TermOut<T>&);                                 \
  template void loss_reduce_cpu<T>(Reduction, int64_t, const T*, const T*, const T*,           \
                                   const uint8_t*, const uint8_t*, T*, const int64_t*);        \
  template void loss_apply_grad_cpu<T>(int64_t, int64_t, const TermRows<T>&, const T*,         \
                                       const T*, const T*, const T*, T, T*, T*, T*);           \
  template void koch_forward_cpu<T>(int64_t, int64_t, const T*, const T*, const T*, const T*,  \
                                    const T*, T*, T*, T*, uint8_t*);                           \
  template void koch_backward_cpu<T>(int64_t, int64_t, const T*, const T*, const T*,           \
                                     const T*, const T*, const T*, T*, T*, T*, T*);            \
  template void lmnn_stats_combine_cpu<T>(const T*, const T*, T*);
MN_INST(float)
MN_INST(double)
#undef MN_INST

}  // namespace mn::kernels
