// Batch-all triplet loss on the CPU (kernels/batch_all.h): per anchor row, the
// negatives' distances sorted once, each positive's active negatives from a
// binary search and a prefix sum, each negative's active positives from the
// sorted thresholds. Rows are independent (parallel over anchors, each writing
// only its own row), sums in double, the reduction over rows in a fixed order:
// the result does not depend on the thread count.
#include <algorithm>
#include <vector>

#include "kernels/batch_all.h"
#include "kernels/multi_similarity.h"  // multi_similarity_scale_*: grad * grad_out * normaliser
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace mn::kernels {

template <typename T>
void batch_all_forward_cpu(const BatchAllParams& P, int64_t B, const T* D, const int64_t* labels, T* grad,
                           const BatchAllRowOut<T>& o) {
  const T m = T(P.margin);
  parallel_for(0, B, std::max<int64_t>(1, 2048 / std::max<int64_t>(B, 1)), [&](int64_t b, int64_t e) {
    std::vector<T> dn, ts;
    std::vector<double> prefix;
    for (int64_t a = b; a < e; ++a) {
      const T* row = D + a * B;
      T* g = grad + a * B;
      const int64_t la = labels[a];
      dn.clear();
      ts.clear();
      double spos = 0, sneg = 0, npos = 0;
      for (int64_t j = 0; j < B; ++j) {
        if (labels[j] != la) {
          dn.push_back(row[j]);
          sneg += row[j];
        } else if (j != a) {
          spos += row[j];
          npos += 1;
          if (!P.unordered_positives || j > a) ts.push_back(row[j] + m);  // t = D[a,p] + m
        }
      }
      std::sort(dn.begin(), dn.end());
      prefix.assign(dn.size() + 1, 0.0);
      for (size_t k = 0; k < dn.size(); ++k) prefix[k + 1] = prefix[k] + static_cast<double>(dn[k]);
      double loss = 0, active = 0;
      for (int64_t j = 0; j < B; ++j) {
        if (j == a || (labels[j] == la && P.unordered_positives && j < a)) {
          g[j] = T(0);
        } else if (labels[j] == la) {  // a chosen positive: its negatives with D[a,n] < t
          const T t = row[j] + m;
          const size_t c = static_cast<size_t>(std::lower_bound(dn.begin(), dn.end(), t) - dn.begin());
          loss += static_cast<double>(c) * static_cast<double>(t) - prefix[c];
          active += static_cast<double>(c);
          g[j] = T(c);
        } else {
          g[j] = T(0);  // negatives: filled below
        }
      }
      std::sort(ts.begin(), ts.end());
      for (int64_t j = 0; j < B; ++j) {
        if (labels[j] == la) continue;
        // The chosen positives with t > D[a,n].
        const size_t c = ts.end() - std::upper_bound(ts.begin(), ts.end(), row[j]);
        g[j] = -T(c);
      }
      o.loss[a] = T(loss);
      o.active[a] = T(active);
      o.triplets[a] = T(static_cast<double>(ts.size()) * static_cast<double>(dn.size()));
      o.spos[a] = T(spos);
      o.npos[a] = T(npos);
      o.sneg[a] = T(sneg);
      o.nneg[a] = T(dn.size());
    }
  });
}

template <typename T>
void batch_all_reduce_cpu(Reduction r, int64_t B, const BatchAllRowOut<T>& o, T* stats) {
  double loss = 0, active = 0, trip = 0, sp = 0, np = 0, sn = 0, nn = 0;
  for (int64_t i = 0; i < B; ++i) {
    loss += o.loss[i];
    active += o.active[i];
    trip += o.triplets[i];
    sp += o.spos[i];
    np += o.npos[i];
    sn += o.sneg[i];
    nn += o.nneg[i];
  }
  const double norm = r == Reduction::Sum ? 1.0
                      : r == Reduction::Mean ? 1.0 / std::max(trip, 1.0)
                                             : 1.0 / std::max(active, 1.0);
  stats[0] = T(loss * norm);
  stats[1] = T(active);
  stats[2] = T(np > 0 ? sp / np : 0.0);
  stats[3] = T(nn > 0 ? sn / nn : 0.0);
  stats[4] = T(norm);
}

#define MN_BA_INST(T)                                                                                      \
  template void batch_all_forward_cpu<T>(const BatchAllParams&, int64_t, const T*, const int64_t*, T*,     \
                                         const BatchAllRowOut<T>&);                                        \
  template void batch_all_reduce_cpu<T>(Reduction, int64_t, const BatchAllRowOut<T>&, T*);
MN_BA_INST(float)
MN_BA_INST(double)
#undef MN_BA_INST

// ---- Tensor level ---------------------------------------------------------------
namespace {
template <typename T>
BatchAllRowOut<T> row_views(const Tensor& rows, int64_t B) {
  T* p = rows.data<T>();
  return {p, p + B, p + 2 * B, p + 3 * B, p + 4 * B, p + 5 * B, p + 6 * B};
}
}  // namespace

BatchAllResult batch_all_terms(const BatchAllParams& P, const Tensor& D, const Tensor& labels) {
  const char* op = "batch_all_triplet_loss";
  MN_CHECK(D.defined() && labels.defined(), op, ": distance matrix and labels are required");
  MN_CHECK(D.dim() == 2 && D.size(0) == D.size(1), op, ": expected a square (B, B) distance matrix, got ",
           shape_str(D.shape()));
  const int64_t B = D.size(0);
  MN_CHECK(labels.numel() == B, op, ": labels must have ", B, " elements (one per row of the ", shape_str(D.shape()),
           " distance matrix), got ", shape_str(labels.shape()));
  MN_CHECK(labels.dtype() == DType::I64 || labels.dtype() == DType::I32, op, ": labels must be int32 or int64, got ",
           dtype_name(labels.dtype()));
  MN_CHECK(labels.device() == D.device(), op, ": labels are on ", labels.device().str(), " but the distances on ",
           D.device().str());
  MN_CHECK(P.margin >= 0, op, ": the margin must be >= 0, got ", P.margin);
  Tensor d = D.contiguous();
  Tensor lab = labels.reshape({B}).to(DType::I64).contiguous();
  BatchAllResult r;
  r.grad = Tensor::empty({B, B}, d.dtype(), d.device());
  r.rows = Tensor::empty({kBatchAllRows, B}, d.dtype(), d.device());
  r.stats = Tensor::empty({kStatsLen}, d.dtype(), d.device());
  MN_DISPATCH_FLOAT(d.dtype(), op, [&] {
    BatchAllRowOut<scalar_t> rows = row_views<scalar_t>(r.rows, B);
    if (d.is_cuda()) {
#ifdef MN_WITH_CUDA
      batch_all_forward_cuda<scalar_t>(P, B, d.data<scalar_t>(), lab.data<int64_t>(), r.grad.data<scalar_t>(), rows);
      batch_all_reduce_cuda<scalar_t>(P.reduction, B, rows, r.stats.data<scalar_t>());
#else
      MN_THROW(op, ": the distance matrix is on ", d.device().str(), " but this build has no CUDA");
#endif
    } else {
      batch_all_forward_cpu<scalar_t>(P, B, d.data<scalar_t>(), lab.data<int64_t>(), r.grad.data<scalar_t>(), rows);
      batch_all_reduce_cpu<scalar_t>(P.reduction, B, rows, r.stats.data<scalar_t>());
    }
  });
  return r;
}

Tensor batch_all_grad(const BatchAllResult& res, const Tensor& grad_out) {
  const char* op = "batch_all_triplet_loss backward";
  MN_CHECK(grad_out.numel() == 1, op, ": expected a one-element upstream gradient, got ", shape_str(grad_out.shape()));
  Tensor go = grad_out.to(res.grad.device()).to(res.grad.dtype()).contiguous();
  Tensor out = Tensor::empty(res.grad.shape(), res.grad.dtype(), res.grad.device());
  // The same scaling as the multi-similarity loss's: grad * grad_out * stats[4].
  MN_DISPATCH_FLOAT(out.dtype(), op, [&] {
    if (out.is_cuda()) {
#ifdef MN_WITH_CUDA
      multi_similarity_scale_cuda<scalar_t>(out.numel(), res.grad.data<scalar_t>(), go.data<scalar_t>(),
                                            res.stats.data<scalar_t>(), out.data<scalar_t>());
#else
      MN_THROW(op, ": the gradient is on ", out.device().str(), " but this build has no CUDA");
#endif
    } else {
      multi_similarity_scale_cpu<scalar_t>(out.numel(), res.grad.data<scalar_t>(), go.data<scalar_t>(),
                                           res.stats.data<scalar_t>(), out.data<scalar_t>());
    }
  });
  return out;
}

}  // namespace mn::kernels
