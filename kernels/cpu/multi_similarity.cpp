// Multi-Similarity loss: the CPU oracle (a readable loop per anchor row) and the
// Tensor-level entry with its device x dtype dispatch (kernels/multi_similarity.h).
// Sums in the reduction are in double.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/multi_similarity.h"
#include "kernels/miners.h"  // exclusive_scan_cuda
#include "runtime/dispatch.h"
#include "runtime/graph.h"
#include "runtime/parallel.h"

namespace mn::kernels {
namespace {

// The miner's thresholds of row i: min positive and max negative similarity
// (+inf / -inf when the row has none).
template <typename T>
void row_thresholds(int64_t i, int64_t B, const T* s, const int64_t* labels, T* min_pos, T* max_neg) {
  *min_pos = std::numeric_limits<T>::infinity();
  *max_neg = -*min_pos;
  for (int64_t j = 0; j < B; ++j) {
    if (j == i) continue;
    if (labels[j] == labels[i]) *min_pos = std::min(*min_pos, s[j]);
    else *max_neg = std::max(*max_neg, s[j]);
  }
}

int64_t grain(int64_t B) { return std::max<int64_t>(1, 4096 / std::max<int64_t>(B, 1)); }

MultiSimilarityParams miner_params(double epsilon) {
  MultiSimilarityParams P;
  P.mine = true;
  P.epsilon = epsilon;
  return P;
}

}  // namespace

template <typename T>
void multi_similarity_forward_cpu(const MultiSimilarityParams& P, int64_t B, const T* S,
                                  const int64_t* labels, T* grad, const MsRowOut<T>& o) {
  parallel_for(0, B, grain(B), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const T* s = S + i * B;
      T* g = grad + i * B;
      // Pass 1: hardest similarities of the row (the miner's thresholds).
      T min_pos, max_neg;
      row_thresholds(i, B, s, labels, &min_pos, &max_neg);
      // Pass 2: the shift of each log-sum-exp (0 stands for the "1 +").
      T mp = T(0), mn = T(0);
      for (int64_t j = 0; j < B; ++j) {
        if (j == i) continue;
        const bool same = labels[j] == labels[i];
        if (!ms_math::kept(P, same, s[j], min_pos, max_neg)) continue;
        T x = ms_math::expo(P, same, s[j]);
        if (same) mp = std::max(mp, x);
        else mn = std::max(mn, x);
      }
      // Pass 3: the sums, counts and similarity sums.
      T sp = std::exp(-mp), sn = std::exp(-mn), np = 0, nn = 0, simp = 0, simn = 0;
      for (int64_t j = 0; j < B; ++j) {
        if (j == i) continue;
        const bool same = labels[j] == labels[i];
        if (!ms_math::kept(P, same, s[j], min_pos, max_neg)) continue;
        T x = ms_math::expo(P, same, s[j]);
        if (same) { sp += std::exp(x - mp); np += 1; simp += s[j]; }
        else { sn += std::exp(x - mn); nn += 1; simn += s[j]; }
      }
      o.loss[i] = (mp + std::log(sp)) / T(P.alpha) + (mn + std::log(sn)) / T(P.beta);
      o.npos[i] = np;
      o.nneg[i] = nn;
      o.spos[i] = simp;
      o.sneg[i] = simn;
      // Pass 4: dL_i/dS_ij (softmax weights of the kept pairs, 0 elsewhere).
      for (int64_t j = 0; j < B; ++j) {
        const bool same = labels[j] == labels[i];
        if (j == i || !ms_math::kept(P, same, s[j], min_pos, max_neg)) { g[j] = T(0); continue; }
        T x = ms_math::expo(P, same, s[j]);
        g[j] = same ? -std::exp(x - mp) / sp : std::exp(x - mn) / sn;
      }
    }
  });
}

template <typename T>
void multi_similarity_reduce_cpu(Reduction r, int64_t B, const MsRowOut<T>& o, T* stats) {
  double loss = 0, np = 0, nn = 0, sp = 0, sn = 0;
  int64_t nonzero = 0;
  for (int64_t i = 0; i < B; ++i) {
    loss += o.loss[i];
    np += o.npos[i];
    nn += o.nneg[i];
    sp += o.spos[i];
    sn += o.sneg[i];
    if (o.npos[i] + o.nneg[i] > 0) ++nonzero;
  }
  double norm = r == Reduction::Sum ? 1.0
                : r == Reduction::Mean ? 1.0 / static_cast<double>(std::max<int64_t>(B, 1))
                                       : 1.0 / static_cast<double>(std::max<int64_t>(nonzero, 1));
  stats[0] = T(loss * norm);
  stats[1] = T(np + nn);
  stats[2] = T(np > 0 ? sp / np : 0.0);
  stats[3] = T(nn > 0 ? sn / nn : 0.0);
  stats[4] = T(norm);
}

template <typename T>
void multi_similarity_scale_cpu(int64_t n, const T* grad, const T* grad_out, const T* stats, T* out) {
  const T k = grad_out[0] * stats[4];
  for (int64_t i = 0; i < n; ++i) out[i] = grad[i] * k;
}

namespace {
// Count pass (offsets null: counts[i] = kept pairs of row i) or fill pass (row
// i's kept pairs written from offsets[i] on, row-major), as the CUDA kernel.
template <typename T>
void mine_rows(double epsilon, int64_t B, const T* S, const int64_t* labels, int64_t* counts,
               const int64_t* offsets, int64_t* pairs, int64_t* is_pos) {
  const MultiSimilarityParams P = miner_params(epsilon);
  parallel_for(0, B, grain(B), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const T* s = S + i * B;
      T min_pos, max_neg;
      row_thresholds(i, B, s, labels, &min_pos, &max_neg);
      int64_t k = offsets ? offsets[i] : 0;
      for (int64_t j = 0; j < B; ++j) {
        const bool same = labels[j] == labels[i];
        if (j == i || !ms_math::kept(P, same, s[j], min_pos, max_neg)) continue;
        if (offsets) {
          pairs[2 * k] = i;
          pairs[2 * k + 1] = j;
          is_pos[k] = same ? 1 : 0;
        }
        ++k;
      }
      if (!offsets) counts[i] = k;
    }
  });
}
}  // namespace

template <typename T>
void multi_similarity_count_cpu(double epsilon, int64_t B, const T* S, const int64_t* labels,
                                int64_t* counts) {
  mine_rows<T>(epsilon, B, S, labels, counts, nullptr, nullptr, nullptr);
}

template <typename T>
void multi_similarity_fill_cpu(double epsilon, int64_t B, const T* S, const int64_t* labels,
                               const int64_t* offsets, int64_t* pairs, int64_t* is_pos) {
  mine_rows<T>(epsilon, B, S, labels, nullptr, offsets, pairs, is_pos);
}

#define MN_MS_INST(T)                                                                          \
  template void multi_similarity_forward_cpu<T>(const MultiSimilarityParams&, int64_t, const T*, \
                                                const int64_t*, T*, const MsRowOut<T>&);        \
  template void multi_similarity_reduce_cpu<T>(Reduction, int64_t, const MsRowOut<T>&, T*);     \
  template void multi_similarity_scale_cpu<T>(int64_t, const T*, const T*, const T*, T*);       \
  template void multi_similarity_count_cpu<T>(double, int64_t, const T*, const int64_t*, int64_t*); \
  template void multi_similarity_fill_cpu<T>(double, int64_t, const T*, const int64_t*,          \
                                             const int64_t*, int64_t*, int64_t*);
MN_MS_INST(float)
MN_MS_INST(double)
#undef MN_MS_INST

// ---- Tensor level ---------------------------------------------------------------
namespace {
template <typename T>
MsRowOut<T> row_views(const Tensor& rows, int64_t B) {
  T* p = rows.data<T>();
  return {p, p + B, p + 2 * B, p + 3 * B, p + 4 * B};
}
// Checks sim (B, B) and labels (B); returns B.
int64_t check_inputs(const char* op, const Tensor& sim, const Tensor& labels) {
  MN_CHECK(sim.defined() && labels.defined(), op, ": similarity matrix and labels are required");
  MN_CHECK(sim.dim() == 2 && sim.size(0) == sim.size(1), op,
           ": expected a square (B, B) similarity matrix, got ", shape_str(sim.shape()));
  const int64_t B = sim.size(0);
  MN_CHECK(labels.numel() == B, op, ": labels must have ", B, " elements (one per row of the ",
           shape_str(sim.shape()), " similarity matrix), got ", shape_str(labels.shape()));
  MN_CHECK(labels.dtype() == DType::I64 || labels.dtype() == DType::I32, op,
           ": labels must be int32 or int64, got ", dtype_name(labels.dtype()));
  MN_CHECK(labels.device() == sim.device(), op, ": labels are on ", labels.device().str(),
           " but the similarity matrix on ", sim.device().str());
  return B;
}
}  // namespace

MultiSimilarityResult multi_similarity_terms(const MultiSimilarityParams& P, const Tensor& sim,
                                             const Tensor& labels, Reduction red) {
  const char* op = "multi_similarity_loss";
  const int64_t B = check_inputs(op, sim, labels);
  MN_CHECK(P.alpha > 0 && P.beta > 0, op, ": alpha and beta must be positive, got alpha ", P.alpha,
           ", beta ", P.beta);
  MN_CHECK(!P.mine || P.epsilon >= 0, op, ": the miner's epsilon must be >= 0, got ", P.epsilon);
  Tensor s = sim.contiguous();
  Tensor lab = labels.reshape({B}).to(DType::I64).contiguous();
  MultiSimilarityResult r;
  r.grad = Tensor::empty({B, B}, s.dtype(), s.device());
  r.rows = Tensor::empty({5, B}, s.dtype(), s.device());
  r.stats = Tensor::empty({kStatsLen}, s.dtype(), s.device());
  MN_DISPATCH_FLOAT(s.dtype(), op, [&] {
    MsRowOut<scalar_t> rows = row_views<scalar_t>(r.rows, B);
    if (s.is_cuda()) {
#ifdef MN_WITH_CUDA
      multi_similarity_forward_cuda<scalar_t>(P, B, s.data<scalar_t>(), lab.data<int64_t>(),
                                              r.grad.data<scalar_t>(), rows);
      multi_similarity_reduce_cuda<scalar_t>(red, B, rows, r.stats.data<scalar_t>());
#else
      MN_THROW(op, ": the similarity matrix is on ", s.device().str(), " but this build has no CUDA");
#endif
    } else {
      multi_similarity_forward_cpu<scalar_t>(P, B, s.data<scalar_t>(), lab.data<int64_t>(),
                                             r.grad.data<scalar_t>(), rows);
      multi_similarity_reduce_cpu<scalar_t>(red, B, rows, r.stats.data<scalar_t>());
    }
  });
  return r;
}

Tensor multi_similarity_grad(const MultiSimilarityResult& res, const Tensor& grad_out) {
  const char* op = "multi_similarity_loss backward";
  MN_CHECK(grad_out.numel() == 1, op, ": expected a one-element upstream gradient, got ",
           shape_str(grad_out.shape()));
  Tensor go = grad_out.to(res.grad.device()).to(res.grad.dtype()).contiguous();
  Tensor out = Tensor::empty(res.grad.shape(), res.grad.dtype(), res.grad.device());
  MN_DISPATCH_FLOAT(out.dtype(), op, [&] {
    if (out.is_cuda()) {
#ifdef MN_WITH_CUDA
      multi_similarity_scale_cuda<scalar_t>(out.numel(), res.grad.data<scalar_t>(), go.data<scalar_t>(),
                                            res.stats.data<scalar_t>(), out.data<scalar_t>());
#endif
    } else {
      multi_similarity_scale_cpu<scalar_t>(out.numel(), res.grad.data<scalar_t>(), go.data<scalar_t>(),
                                           res.stats.data<scalar_t>(), out.data<scalar_t>());
    }
  });
  return out;
}

MultiSimilarityPairs multi_similarity_mine(const Tensor& sim, const Tensor& labels, double epsilon,
                                           bool fixed_size) {
  const char* op = "multi_similarity_mine";
  const int64_t B = check_inputs(op, sim, labels);
  MN_CHECK(epsilon >= 0, op, ": epsilon must be >= 0, got ", epsilon);
  Tensor s = sim.contiguous();
  Tensor lab = labels.reshape({B}).to(DType::I64).contiguous();
  const Device dev = s.device();
  Tensor counts = Tensor::empty({B}, DType::I64, dev);
  Tensor offsets = Tensor::empty({B + 1}, DType::I64, dev);
  MultiSimilarityPairs out;
  MN_DISPATCH_FLOAT(s.dtype(), op, [&] {
    using T = scalar_t;
    if (dev.is_cuda()) {
#ifdef MN_WITH_CUDA
      multi_similarity_count_cuda<T>(epsilon, B, s.data<T>(), lab.data<int64_t>(), counts.data<int64_t>());
      exclusive_scan_cuda(B, counts.data<int64_t>(), offsets.data<int64_t>());
#else
      MN_THROW(op, ": the similarity matrix is on ", dev.str(), " but this build has no CUDA");
#endif
    } else {
      multi_similarity_count_cpu<T>(epsilon, B, s.data<T>(), lab.data<int64_t>(), counts.data<int64_t>());
      int64_t* o = offsets.data<int64_t>();
      const int64_t* c = counts.data<int64_t>();
      o[0] = 0;
      for (int64_t i = 0; i < B; ++i) o[i + 1] = o[i] + c[i];
    }
    out.count = offsets.narrow(0, B, 1);
    int64_t P = B * (B - 1);  // fixed_size: every ordered pair fits
    if (fixed_size) {
      out.pairs = Tensor::zeros({P, 2}, DType::I64, dev);
      out.is_pos = Tensor::zeros({P}, DType::I64, dev);
    } else {
      // The output size: one scalar to the host, as every compacting miner needs.
      graph_unsafe("the multi-similarity miner without a fixed size (its output size is read from the device)");
      P = dev.is_cuda() ? static_cast<int64_t>(out.count.item()) : offsets.data<int64_t>()[B];
      out.pairs = Tensor::empty({P, 2}, DType::I64, dev);
      out.is_pos = Tensor::empty({P}, DType::I64, dev);
    }
    if (P == 0) return;
    if (dev.is_cuda()) {
#ifdef MN_WITH_CUDA
      multi_similarity_fill_cuda<T>(epsilon, B, s.data<T>(), lab.data<int64_t>(), offsets.data<int64_t>(),
                                    out.pairs.data<int64_t>(), out.is_pos.data<int64_t>());
#endif
    } else {
      multi_similarity_fill_cpu<T>(epsilon, B, s.data<T>(), lab.data<int64_t>(), offsets.data<int64_t>(),
                                   out.pairs.data<int64_t>(), out.is_pos.data<int64_t>());
    }
  });
  return out;
}

}  // namespace mn::kernels
