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

template <typename DistFn>
double LmnnProblem::evaluate(DistFn&& compute, const std::vector<int32_t>* subset, Mat* grad,
                             std::vector<int32_t>* active) const {
  // Each pair's distance at most once per call; the stamp avoids clearing (P).
  if (++generation_ == 0) {
    std::fill(stamp_.begin(), stamp_.end(), 0);
    generation_ = 1;
  }
  auto dist = [&](int32_t p) {
    if (stamp_[p] != generation_) {
      stamp_[p] = generation_;
      dist_[p] = compute(p);
    }
    return dist_[p];
  };
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
    f += pull_w_[p] * dist(p);
    if (grad) weigh(p, pull_w_[p]);
  }
  if (active) active->clear();
  const int64_t count = subset ? static_cast<int64_t>(subset->size()) : num_triplets();
  for (int64_t q = 0; q < count; ++q) {
    const int32_t t = subset ? (*subset)[q] : static_cast<int32_t>(q);
    const auto& tr = trip_[t];
    const double h = 1.0 + dist(tr[0]) - dist(tr[1]);
    if (h > 0) {
      f += c_ * h;
      if (active) active->push_back(t);
      if (grad) {
        weigh(tr[0], c_);
        weigh(tr[1], -c_);
      }
    }
  }
  if (grad) {  // the buffer is reused: no fresh pages per step
    Y_.rows = X_.rows;
    Y_.cols = d_;
    Y_.a.assign(static_cast<size_t>(X_.rows * d_), 0.0);
  }
  Mat& Y = Y_;
  // Y_a += w v_p, Y_b -= w v_p: then sum_p w_p v_p v_p^T = X^T Y.
  for (int32_t p : touched_) {
    const double w = pair_w_[p];
    pair_w_[p] = 0.0;
    if (w == 0.0) continue;  // the terms cancelled
    const double* v = V_.row(p);
    double* ya = Y.row(pairs_[p][0]);
    double* yb = Y.row(pairs_[p][1]);
    for (int64_t q = 0; q < d_; ++q) {
      ya[q] += w * v[q];
      yb[q] -= w * v[q];
    }
  }
  touched_.clear();
  if (grad) {
    if (X_.rows > 0)
      matmul_into(X_, Y, true, false, *grad);
    else
      *grad = Mat(d_, d_);
    for (int64_t a = 0; a < d_; ++a)  // exact symmetry
      for (int64_t b = 0; b < a; ++b) (*grad)(a, b) = (*grad)(b, a) = 0.5 * ((*grad)(a, b) + (*grad)(b, a));
  }
  return f;
}

double LmnnProblem::eval(const Mat& M, const std::vector<int32_t>* subset, Mat* grad,
                         std::vector<int32_t>* active) const {
  MN_CHECK(M.rows == d_ && M.cols == d_, "lmnn objective: M is (", M.rows, ", ", M.cols,
           "), the data have d = ", d_);
  auto quad = [&](int32_t p) {  // v^T M v
    const double* v = V_.row(p);
    double s = 0;
    for (int64_t a = 0; a < d_; ++a) {
      double r = 0;
      for (int64_t b = 0; b < d_; ++b) r += M(a, b) * v[b];
      s += v[a] * r;
    }
    return s;
  };
  return evaluate(quad, subset, grad, active);
}

double LmnnProblem::eval_factored(const Mat& L, const std::vector<int32_t>* subset, Mat* grad,
                                  std::vector<int32_t>* active) const {
  MN_CHECK(L.rows == d_, "lmnn objective: L has ", L.rows, " rows, the data have d = ", d_);
  matmul_into(X_, L, false, false, Z_);  // (m, r), the buffer reused
  const Mat& Z = Z_;
  auto sq = [&](int32_t p) {  // |z_a - z_b|^2
    const double* za = Z.row(pairs_[p][0]);
    const double* zb = Z.row(pairs_[p][1]);
    // Four partial sums: one chain of dependent adds (d of them) was the
    // solver's bottleneck; four chains run in parallel and vectorise.
    double s4[4] = {0, 0, 0, 0};
    int64_t q = 0;
    for (; q + 4 <= Z.cols; q += 4)
      for (int u = 0; u < 4; ++u) s4[u] += (za[q + u] - zb[q + u]) * (za[q + u] - zb[q + u]);
    for (; q < Z.cols; ++q) s4[0] += (za[q] - zb[q]) * (za[q] - zb[q]);
    return (s4[0] + s4[1]) + (s4[2] + s4[3]);
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
