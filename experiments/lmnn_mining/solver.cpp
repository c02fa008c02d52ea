// LMNN objective and projected sub-gradient solver; see solver.h.
#include "experiments/lmnn_mining/solver.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "runtime/error.h"

namespace mn::lmnn {

LmnnProblem::LmnnProblem(const Mat& X, const Mined& terms, double c) : d_(X.cols), c_(c) {
  // Compact the points in play (rows of X) and the distinct pairs (a, b).
  std::vector<int32_t> local(static_cast<size_t>(X.rows), -1);
  std::vector<int64_t> rows;
  auto point = [&](int32_t i) {
    MN_CHECK(i >= 0 && i < X.rows, "lmnn objective: point index ", i, " outside the ", X.rows,
             " points");
    if (local[i] < 0) {
      local[i] = static_cast<int32_t>(rows.size());
      rows.push_back(i);
    }
    return local[i];
  };
  std::unordered_map<int64_t, int32_t> pair_index;
  auto pair = [&](int32_t a, int32_t b) {
    const int32_t la = point(a), lb = point(b);
    const int64_t key = static_cast<int64_t>(la) * X.rows + lb;
    auto [it, fresh] = pair_index.emplace(key, static_cast<int32_t>(pairs_.size()));
    if (fresh) {
      pairs_.push_back({la, lb});
      pull_w_.push_back(0.0);
    }
    return it->second;
  };
  for (const auto& p : terms.pull) pull_w_[pair(p[0], p[1])] += 1.0;
  for (const auto& t : terms.triplets) trip_.push_back({pair(t[0], t[1]), pair(t[0], t[2])});
  for (size_t p = 0; p < pull_w_.size(); ++p)
    if (pull_w_[p] != 0.0) pull_idx_.push_back(static_cast<int32_t>(p));
  stamp_.assign(pairs_.size(), 0);
  pair_w_.assign(pairs_.size(), 0.0);
  dist_.assign(pairs_.size(), 0.0);
  X_ = take_rows(X, rows);
  V_ = Mat(static_cast<int64_t>(pairs_.size()), d_);
  for (size_t p = 0; p < pairs_.size(); ++p)
    for (int64_t q = 0; q < d_; ++q) V_(p, q) = X_(pairs_[p][0], q) - X_(pairs_[p][1], q);
}

namespace {

using Pair = std::array<int32_t, 2>;

// dist[p] = |z_a - z_b|^2 for p = list[i] (p = i when list is null), i < n.
// Four partial sums: one chain of dependent adds (r of them) was the solver's
// bottleneck; four chains run in parallel and vectorise.
MN_LMNN_BODY void pair_sq_dists_body(const double* Z, int64_t r, const Pair* pairs,
                                     const int32_t* list, int64_t n, double* dist) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = list ? list[i] : i;
    const double* za = Z + static_cast<int64_t>(pairs[p][0]) * r;
    const double* zb = Z + static_cast<int64_t>(pairs[p][1]) * r;
    double s4[4] = {0, 0, 0, 0};
    int64_t q = 0;
    for (; q + 4 <= r; q += 4)
      for (int u = 0; u < 4; ++u) s4[u] += (za[q + u] - zb[q + u]) * (za[q + u] - zb[q + u]);
    for (; q < r; ++q) s4[0] += (za[q] - zb[q]) * (za[q] - zb[q]);
    dist[p] = (s4[0] + s4[1]) + (s4[2] + s4[3]);
  }
}
MN_LMNN_SIMD(void, pair_sq_dists,
             (const double* Z, int64_t r, const Pair* pairs, const int32_t* list, int64_t n, double* dist),
             (Z, r, pairs, list, n, dist))

// Y_a += w_p v_p, Y_b -= w_p v_p for p = list[i], i < n (then
// sum_p w_p v_p v_p^T = X^T Y); w_p is reset to 0 on the way.
MN_LMNN_BODY void scatter_pair_rows_body(const double* V, int64_t d, const Pair* pairs,
                                         const int32_t* list, int64_t n, double* w, double* Y) {
  for (int64_t i = 0; i < n; ++i) {
    const int32_t p = list[i];
    const double wp = w[p];
    w[p] = 0.0;
    if (wp == 0.0) continue;  // the terms cancelled
    const double* v = V + static_cast<int64_t>(p) * d;
    double* ya = Y + static_cast<int64_t>(pairs[p][0]) * d;
    double* yb = Y + static_cast<int64_t>(pairs[p][1]) * d;
    for (int64_t q = 0; q < d; ++q) {
      ya[q] += wp * v[q];
      yb[q] -= wp * v[q];
    }
  }
}
MN_LMNN_SIMD(void, scatter_pair_rows,
             (const double* V, int64_t d, const Pair* pairs, const int32_t* list, int64_t n, double* w,
              double* Y),
             (V, d, pairs, list, n, w, Y))

}  // namespace

template <typename DistBatch>
double LmnnProblem::evaluate(DistBatch&& distances, const std::vector<int32_t>* subset,
                             Mat* grad, std::vector<int32_t>* active) const {
  const int64_t count = subset ? static_cast<int64_t>(subset->size()) : num_triplets();
  // The distances first, each pair once, in one batch: all pairs for a full
  // evaluation (every pair is in some term), else the pairs the pull terms and
  // the subset's triplets touch (the stamp avoids clearing).
  if (subset) {
    if (++generation_ == 0) {
      std::fill(stamp_.begin(), stamp_.end(), 0);
      generation_ = 1;
    }
    need_.clear();
    auto mark = [&](int32_t p) {
      if (stamp_[p] != generation_) {
        stamp_[p] = generation_;
        need_.push_back(p);
      }
    };
    for (int32_t p : pull_idx_) mark(p);
    for (int64_t q = 0; q < count; ++q) {
      const auto& tr = trip_[(*subset)[q]];
      mark(tr[0]);
      mark(tr[1]);
    }
    distances(need_.data(), static_cast<int64_t>(need_.size()));
  } else {
    distances(nullptr, static_cast<int64_t>(pairs_.size()));
  }
  // The gradient's weight per pair, summed over the terms first (a pair of an
  // anchor and a positive sits in up to k triplets, one of an anchor and a
  // negative in one per positive): then one d-long row update per touched pair,
  // not one per term. pair_w_ is all zero between calls; touched_ lists the
  // entries to reset.
  auto weigh = [&](int32_t p, double w) {
    if (pair_w_[p] == 0.0) touched_.push_back(p);
    pair_w_[p] += w;
  };
  double f = 0;
  for (int32_t p : pull_idx_) {
    f += pull_w_[p] * dist_[p];
    if (grad) weigh(p, pull_w_[p]);
  }
  if (active) active->clear();
  for (int64_t q = 0; q < count; ++q) {
    const int32_t t = subset ? (*subset)[q] : static_cast<int32_t>(q);
    const auto& tr = trip_[t];
    const double h = 1.0 + dist_[tr[0]] - dist_[tr[1]];
    if (h > 0) {
      f += c_ * h;
      if (active) active->push_back(t);
      if (grad) {
        weigh(tr[0], c_);
        weigh(tr[1], -c_);
      }
    }
  }
  if (!grad) return f;
  // The buffer is reused: no fresh pages per step.
  Y_.rows = X_.rows;
  Y_.cols = d_;
  Y_.a.assign(static_cast<size_t>(X_.rows * d_), 0.0);
  scatter_pair_rows(V_.a.data(), d_, pairs_.data(), touched_.data(),
                    static_cast<int64_t>(touched_.size()), pair_w_.data(), Y_.a.data());
  touched_.clear();
  if (X_.rows > 0)
    matmul_into(X_, Y_, true, false, *grad);
  else
    *grad = Mat(d_, d_);
  for (int64_t a = 0; a < d_; ++a)  // exact symmetry
    for (int64_t b = 0; b < a; ++b) (*grad)(a, b) = (*grad)(b, a) = 0.5 * ((*grad)(a, b) + (*grad)(b, a));
  return f;
}

double LmnnProblem::eval(const Mat& M, const std::vector<int32_t>* subset, Mat* grad,
                         std::vector<int32_t>* active) const {
  MN_CHECK(M.rows == d_ && M.cols == d_, "lmnn objective: M is (", M.rows, ", ", M.cols,
           "), the data have d = ", d_);
  auto quads = [&](const int32_t* list, int64_t n) {  // v^T M v
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = list ? list[i] : i;
      const double* v = V_.row(p);
      double s = 0;
      for (int64_t a = 0; a < d_; ++a) {
        double r = 0;
        for (int64_t b = 0; b < d_; ++b) r += M(a, b) * v[b];
        s += v[a] * r;
      }
      dist_[p] = s;
    }
  };
  return evaluate(quads, subset, grad, active);
}

double LmnnProblem::eval_factored(const Mat& L, const std::vector<int32_t>* subset, Mat* grad,
                                  std::vector<int32_t>* active) const {
  MN_CHECK(L.rows == d_, "lmnn objective: L has ", L.rows, " rows, the data have d = ", d_);
  matmul_into(X_, L, false, false, Z_);  // (m, r), the buffer reused
  auto sq = [&](const int32_t* list, int64_t n) {
    pair_sq_dists(Z_.a.data(), Z_.cols, pairs_.data(), list, n, dist_.data());
  };
  return evaluate(sq, subset, grad, active);
}

SolveResult solve_lmnn(const Mat& X, const Mined& terms, const SolverOptions& o, const Mat* M0) {
  MN_CHECK(o.c >= 0 && o.max_iter >= 1 && o.tol >= 0 && o.full_every >= 1 && o.step0 > 0,
           "lmnn solver: bad settings (c = ", o.c, ", max_iter = ", o.max_iter, ", tol = ", o.tol,
           ", full_every = ", o.full_every, ", step0 = ", o.step0, ")");
  const LmnnProblem prob(X, terms, o.c);
  const int64_t d = X.cols;
  SolveResult res;
  res.triplets = prob.num_triplets();
  Mat M = M0 ? project_psd(*M0) : Mat::identity(d);
  Mat L = psd_factor(M);
  Mat G, Gn;
  std::vector<int32_t> act, act_new;
  double f = prob.eval_factored(L, nullptr, &G, &act);
  std::vector<uint8_t> in_active(static_cast<size_t>(prob.num_triplets()), 0);
  for (int32_t t : act) in_active[t] = 1;
  const double gnorm = frobenius(G);
  if (gnorm == 0.0) {  // nothing to learn (no terms): the start is optimal
    res.M = M;
    res.L = L;
    res.objective = f;
    res.converged = true;
    return res;
  }
  const double alpha0 = o.step0 * std::max(frobenius(M), 1.0) / gnorm;
  double alpha = alpha0;
  int64_t since_full = 0;
  const double tiny = std::numeric_limits<double>::min();
  struct Checkpoint {
    Mat M, L, G;
    double f;
    std::vector<int32_t> act;
  } chk{M, L, G, f, act};  // the state at the last full check
  for (int64_t it = 0; it < o.max_iter; ++it) {
    res.iterations = it + 1;
    Mat step = M;
    for (size_t q = 0; q < step.a.size(); ++q) step.a[q] -= alpha * G.a[q];
    Mat Ln;
    Mat Mn = project_psd_factored(step, &Ln);
    const double fn = prob.eval_factored(Ln, &act, &Gn, nullptr);
    if (!(fn <= f)) {
      alpha *= 0.5;
      if (alpha < 1e-12 * alpha0) {  // no descent at any useful step: a (sub)optimum
        res.converged = true;
        break;
      }
      continue;
    }
    const double rel = (f - fn) / std::max(std::abs(f), tiny);
    M = std::move(Mn);
    L = std::move(Ln);
    G = std::move(Gn);
    f = fn;
    res.history.push_back(f);
    alpha *= 1.05;
    const bool small = rel < o.tol / static_cast<double>(o.full_every);
    if (small || ++since_full >= o.full_every) {
      since_full = 0;
      f = prob.eval_factored(L, nullptr, &G, &act_new);
      if (f > chk.f) {
        // Steps judged on the active set made the true objective worse (new
        // violators): go back to the last full check with half the step.
        M = chk.M;
        L = chk.L;
        G = chk.G;
        f = chk.f;
        act = chk.act;
        alpha *= 0.5;
        if (alpha < 1e-12 * alpha0) {
          res.converged = true;
          break;
        }
        continue;
      }
      bool grew = false;
      for (int32_t t : act_new) grew = grew || !in_active[t];
      std::fill(in_active.begin(), in_active.end(), 0);
      for (int32_t t : act_new) in_active[t] = 1;
      act.swap(act_new);
      // Settled: no new violated triplet after a tiny step, or the full
      // objective fell by less than tol since the last full check (triplets
      // hovering at their margin make the active set flicker forever).
      const bool settled = chk.f - f <= o.tol * std::max(std::abs(f), tiny);
      chk = {M, L, G, f, act};
      if ((small && !grew) || settled) {
        res.converged = true;
        break;
      }
    }
  }
  res.M = M;
  res.L = L;
  std::vector<int32_t> final_active;
  res.objective = prob.eval_factored(L, nullptr, nullptr, &final_active);
  res.active = static_cast<int64_t>(final_active.size());
  return res;
}

}  // namespace mn::lmnn
