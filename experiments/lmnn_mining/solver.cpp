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
  X_ = take_rows(X, rows);
  V_ = Mat(static_cast<int64_t>(pairs_.size()), d_);
  for (size_t p = 0; p < pairs_.size(); ++p)
    for (int64_t q = 0; q < d_; ++q) V_(p, q) = X_(pairs_[p][0], q) - X_(pairs_[p][1], q);
}

double LmnnProblem::finish(const std::vector<double>& dist, const std::vector<int32_t>* subset,
                           Mat* grad, std::vector<int32_t>* active) const {
  const size_t P = pairs_.size();
  double f = 0;
  std::vector<double> w = pull_w_;
  for (size_t p = 0; p < P; ++p) f += pull_w_[p] * dist[p];
  if (active) active->clear();
  const int64_t count = subset ? static_cast<int64_t>(subset->size()) : num_triplets();
  for (int64_t q = 0; q < count; ++q) {
    const int32_t t = subset ? (*subset)[q] : static_cast<int32_t>(q);
    const auto& tr = trip_[t];
    const double h = 1.0 + dist[tr[0]] - dist[tr[1]];
    if (h > 0) {
      f += c_ * h;
      w[tr[0]] += c_;
      w[tr[1]] -= c_;
      if (active) active->push_back(t);
    }
  }
  if (grad) {
    // G = sum_p w_p v_p v_p^T = X^T Y with Y_a += w_p v_p, Y_b -= w_p v_p.
    Mat Y(X_.rows, d_);
    for (size_t p = 0; p < P; ++p) {
      if (w[p] == 0.0) continue;
      const double* v = V_.row(static_cast<int64_t>(p));
      double* ya = Y.row(pairs_[p][0]);
      double* yb = Y.row(pairs_[p][1]);
      for (int64_t q = 0; q < d_; ++q) {
        ya[q] += w[p] * v[q];
        yb[q] -= w[p] * v[q];
      }
    }
    *grad = X_.rows > 0 ? matmul(X_, Y, true, false) : Mat(d_, d_);
    for (int64_t a = 0; a < d_; ++a)  // exact symmetry
      for (int64_t b = 0; b < a; ++b) (*grad)(a, b) = (*grad)(b, a) = 0.5 * ((*grad)(a, b) + (*grad)(b, a));
  }
  return f;
}

double LmnnProblem::eval(const Mat& M, const std::vector<int32_t>* subset, Mat* grad,
                         std::vector<int32_t>* active) const {
  MN_CHECK(M.rows == d_ && M.cols == d_, "lmnn objective: M is (", M.rows, ", ", M.cols,
           "), the data have d = ", d_);
  std::vector<double> dist(pairs_.size(), 0.0);
  if (!pairs_.empty()) {
    const Mat VM = matmul(V_, M);  // (P, d)
    for (size_t p = 0; p < pairs_.size(); ++p) {
      double s = 0;
      for (int64_t q = 0; q < d_; ++q) s += VM(static_cast<int64_t>(p), q) * V_(static_cast<int64_t>(p), q);
      dist[p] = s;
    }
  }
  return finish(dist, subset, grad, active);
}

double LmnnProblem::eval_factored(const Mat& L, const std::vector<int32_t>* subset, Mat* grad,
                                  std::vector<int32_t>* active) const {
  MN_CHECK(L.rows == d_, "lmnn objective: L has ", L.rows, " rows, the data have d = ", d_);
  std::vector<double> dist(pairs_.size(), 0.0);
  if (!pairs_.empty()) {
    const Mat Z = matmul(X_, L);  // (m, r)
    // With an active subset only its pairs and the pull pairs are needed (for
    // k-BA most of the 10^5 pairs belong to inactive triplets).
    std::vector<uint8_t> need;
    if (subset) {
      need.assign(pairs_.size(), 0);
      for (size_t p = 0; p < pairs_.size(); ++p) need[p] = pull_w_[p] != 0.0;
      for (int32_t t : *subset) need[trip_[t][0]] = need[trip_[t][1]] = 1;
    }
    for (size_t p = 0; p < pairs_.size(); ++p) {
      if (subset && !need[p]) continue;
      const double* za = Z.row(pairs_[p][0]);
      const double* zb = Z.row(pairs_[p][1]);
      double s = 0;
      for (int64_t q = 0; q < Z.cols; ++q) s += (za[q] - zb[q]) * (za[q] - zb[q]);
      dist[p] = s;
    }
  }
  return finish(dist, subset, grad, active);
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
  double f_full = f;
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
      bool grew = false;
      for (int32_t t : act_new) grew = grew || !in_active[t];
      std::fill(in_active.begin(), in_active.end(), 0);
      for (int32_t t : act_new) in_active[t] = 1;
      act.swap(act_new);
      // Settled: no new violated triplet after a tiny step, or the full
      // objective moved by less than tol since the last full check (triplets
      // hovering at their margin make the active set flicker forever).
      const bool settled = std::abs(f_full - f) <= o.tol * std::max(std::abs(f), tiny);
      f_full = f;
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
