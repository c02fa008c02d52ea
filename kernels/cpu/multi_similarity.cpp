// Multi-Similarity loss: the CPU oracle (a readable loop per anchor row) and the
// Tensor-level entry with its device x dtype dispatch (kernels/multi_similarity.h).
// Sums in the reduction are in double.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/multi_similarity.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace mn::kernels {

template <typename T>
void multi_similarity_forward_cpu(const MultiSimilarityParams& P, int64_t B, const T* S,
                                  const int64_t* labels, T* grad, const MsRowOut<T>& o) {
  parallel_for(0, B, std::max<int64_t>(1, 4096 / std::max<int64_t>(B, 1)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const T* s = S + i * B;
      T* g = grad + i * B;
      // Pass 1: hardest similarities of the row (the miner's thresholds).
      T min_pos = std::numeric_limits<T>::infinity(), max_neg = -min_pos;
      for (int64_t j = 0; j < B; ++j) {
        if (j == i) continue;
        if (labels[j] == labels[i]) min_pos = std::min(min_pos, s[j]);
        else max_neg = std::max(max_neg, s[j]);
      }
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

#define MN_MS_INST(T)                                                                          \
  template void multi_similarity_forward_cpu<T>(const MultiSimilarityParams&, int64_t, const T*, \
                                                const int64_t*, T*, const MsRowOut<T>&);        \
  template void multi_similarity_reduce_cpu<T>(Reduction, int64_t, const MsRowOut<T>&, T*);     \
  template void multi_similarity_scale_cpu<T>(int64_t, const T*, const T*, const T*, T*);
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
}  // namespace

MultiSimilarityResult multi_similarity_terms(const MultiSimilarityParams& P, const Tensor& sim,
                                             const Tensor& labels, Reduction red) {
  const char* op = "multi_similarity_loss";
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

}  // namespace mn::kernels
