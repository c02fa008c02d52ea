// The sampling study's metrics (see eval.h).
#include "experiments/sampling/eval.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "runtime/error.h"
#include "runtime/parallel.h"

namespace mn::exp::sampling {

double HostEmb::dist(int64_t i, int64_t j) const {
  double s = 0;
  const float *a = row(i), *b = row(j);
  for (int64_t k = 0; k < d; ++k) s += (static_cast<double>(a[k]) - b[k]) * (static_cast<double>(a[k]) - b[k]);
  return std::sqrt(s);
}

double study_offline_pair_accuracy(const HostEmb& e, const FixedPairs& p, int64_t batch, double per) {
  const int64_t n = static_cast<int64_t>(p.a.size());
  if (n == 0) return 0;
  double sum = 0;
  int64_t batches = 0;
  for (int64_t s = 0; s < n; s += batch, ++batches) {
    int64_t neg = 0;
    for (int64_t i = s; i < std::min(n, s + batch); ++i)
      if (p.same[i] == 0 && e.dist(p.a[i], p.b[i]) > 0) ++neg;
    sum += static_cast<double>(neg) / per;
  }
  return sum / static_cast<double>(batches);
}

double triplet_accuracy(const HostEmb& e, const FixedTriplets& t) {
  if (t.a.empty()) return 0;
  int64_t ok = 0;
  for (size_t i = 0; i < t.a.size(); ++i)
    if (e.dist(t.a[i], t.n[i]) > e.dist(t.a[i], t.p[i])) ++ok;
  return static_cast<double>(ok) / static_cast<double>(t.a.size());
}

double couple_accuracy(const std::vector<double>& d_pos, const std::vector<double>& d_neg) {
  const size_t n = std::min(d_pos.size(), d_neg.size());
  if (n == 0) return 0;
  int64_t ok = 0;
  for (size_t k = 0; k < n; ++k)
    if (d_neg[k] > d_pos[k]) ++ok;
  return static_cast<double>(ok) / static_cast<double>(n);
}

namespace {
double sq(const float* a, const float* b, int64_t d) {
  double s = 0;
  for (int64_t k = 0; k < d; ++k) {
    const double t = static_cast<double>(a[k]) - b[k];
    s += t * t;
  }
  return s;
}
}  // namespace

KnnResult knn_accuracy(const HostEmb& g, const std::vector<int32_t>& gl, const HostEmb& q,
                       const std::vector<int32_t>& ql, const std::vector<int64_t>& qi) {
  MN_CHECK(g.d == q.d && g.n == static_cast<int64_t>(gl.size()) && g.n >= 5, "knn_accuracy: gallery (", g.n, ", ",
           g.d, ") with ", gl.size(), " labels, queries of dim ", q.d, " (needs >= 5 gallery images, equal dims)");
  const int64_t nq = static_cast<int64_t>(qi.size());
  std::vector<uint8_t> ok1(nq), ok5(nq);
  // Brute force: 9,000 queries x 54,000 gallery images x D = 2 is ~1 s on two
  // cores; a k-d tree would pay off only for much larger galleries.
  parallel_for(0, nq, 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float* x = q.row(qi[i]);
      double bd[5];
      int64_t bi[5];
      int m = 0;
      for (int64_t j = 0; j < g.n; ++j) {
        const double dd = sq(x, g.row(j), g.d);
        if (m == 5 && dd >= bd[4]) continue;
        int k = m < 5 ? m++ : 4;
        while (k > 0 && bd[k - 1] > dd) {
          bd[k] = bd[k - 1];
          bi[k] = bi[k - 1];
          --k;
        }
        bd[k] = dd;
        bi[k] = j;
      }
      const int32_t y = ql[qi[i]];
      ok1[i] = gl[bi[0]] == y;
      // Majority of the 5; a tie goes to the class of the nearer neighbour.
      int best_c = gl[bi[0]], best_n = 0;
      for (int a = 0; a < 5; ++a) {
        int cnt = 0;
        for (int b2 = 0; b2 < 5; ++b2) cnt += gl[bi[b2]] == gl[bi[a]];
        if (cnt > best_n) {
          best_n = cnt;
          best_c = gl[bi[a]];
        }
      }
      ok5[i] = best_c == y;
    }
  });
  KnnResult r;
  for (int64_t i = 0; i < nq; ++i) {
    r.acc1 += ok1[i];
    r.acc5 += ok5[i];
  }
  if (nq) {
    r.acc1 /= static_cast<double>(nq);
    r.acc5 /= static_cast<double>(nq);
  }
  return r;
}

double recall_at_1(const HostEmb& e, const std::vector<int32_t>& labels) {
  const int64_t n = e.n;
  if (n < 2) return 0;
  std::vector<uint8_t> ok(n);
  parallel_for(0, n, 16, [&](int64_t b, int64_t end) {
    for (int64_t i = b; i < end; ++i) {
      double best = std::numeric_limits<double>::infinity();
      int64_t bj = -1;
      for (int64_t j = 0; j < n; ++j) {
        if (j == i) continue;
        const double dd = sq(e.row(i), e.row(j), e.d);
        if (dd < best) {
          best = dd;
          bj = j;
        }
      }
      ok[i] = labels[bj] == labels[i];
    }
  });
  int64_t s = 0;
  for (uint8_t v : ok) s += v;
  return static_cast<double>(s) / static_cast<double>(n);
}

double unseen_auroc(const HostEmb& g, const std::vector<int32_t>& gl, const HostEmb& t,
                    const std::vector<int32_t>& tl, int32_t unseen) {
  std::map<int32_t, std::vector<double>> sum;
  std::map<int32_t, int64_t> cnt;
  for (int64_t i = 0; i < g.n; ++i) {
    auto& s = sum[gl[i]];
    s.resize(g.d, 0.0);
    for (int64_t k = 0; k < g.d; ++k) s[k] += g.row(i)[k];
    ++cnt[gl[i]];
  }
  std::vector<std::vector<float>> cent;
  for (auto& [c, s] : sum) {
    std::vector<float> m(g.d);
    for (int64_t k = 0; k < g.d; ++k) m[k] = static_cast<float>(s[k] / cnt[c]);
    cent.push_back(m);
  }
  // score = distance to the nearest seen-class centroid; label 1 = unseen.
  std::vector<std::pair<double, int>> sc;
  for (int64_t i = 0; i < t.n; ++i) {
    double best = std::numeric_limits<double>::infinity();
    for (const auto& c : cent) best = std::min(best, sq(t.row(i), c.data(), t.d));
    sc.emplace_back(std::sqrt(best), tl[i] == unseen ? 1 : 0);
  }
  // Mann-Whitney U with average ranks for ties.
  std::sort(sc.begin(), sc.end());
  double rank_sum = 0;
  int64_t npos = 0, nneg = 0;
  for (size_t i = 0; i < sc.size();) {
    size_t j = i;
    while (j < sc.size() && sc[j].first == sc[i].first) ++j;
    const double avg = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    for (size_t k = i; k < j; ++k)
      if (sc[k].second) rank_sum += avg;
    i = j;
  }
  for (const auto& s : sc) (s.second ? npos : nneg)++;
  if (npos == 0 || nneg == 0) return std::nan("");
  return (rank_sum - static_cast<double>(npos) * (npos + 1) / 2.0) / (static_cast<double>(npos) * nneg);
}

}  // namespace mn::exp::sampling
