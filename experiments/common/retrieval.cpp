// Retrieval metrics (retrieval.h): distances by blocks of queries through our GEMM,
// the ranking on the host.
#include "experiments/common/retrieval.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/gemm.h"
#include "runtime/error.h"

namespace mn::exp {
namespace {

// (n, D) float32 on the CPU, rows L2-normalised for the cosine distance.
Tensor host_rows(const Tensor& e, bool cosine) {
  MN_CHECK(e.dim() == 2, "retrieval: embeddings must be (N, D), got ", e.desc());
  Tensor h = e.to(Device::cpu()).to(DType::F32).contiguous().clone();
  if (cosine) {
    float* p = h.data<float>();
    const int64_t n = h.size(0), d = h.size(1);
    for (int64_t i = 0; i < n; ++i) {
      double s = 0;
      for (int64_t j = 0; j < d; ++j) s += double(p[i * d + j]) * p[i * d + j];
      const double inv = s > 0 ? 1.0 / std::sqrt(s) : 0.0;
      for (int64_t j = 0; j < d; ++j) p[i * d + j] = float(p[i * d + j] * inv);
    }
  }
  return h;
}

std::vector<double> squared_norms(const Tensor& h) {
  const int64_t n = h.size(0), d = h.size(1);
  const float* p = h.data<float>();
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (int64_t j = 0; j < d; ++j) s += double(p[i * d + j]) * p[i * d + j];
    out[size_t(i)] = s;
  }
  return out;
}

// Calls fn(query index, distances to every gallery item) for each query, by blocks.
template <typename Fn>
void for_each_query(const Tensor& q, const Tensor& g, bool cosine, Fn fn) {
  MN_CHECK(q.size(1) == g.size(1), "retrieval: queries have ", q.size(1), " dimensions, the gallery ", g.size(1));
  const std::vector<double> qn = squared_norms(q), gn = squared_norms(g);
  const int64_t nq = q.size(0), ng = g.size(0), block = 512;
  std::vector<double> d(static_cast<size_t>(ng));
  for (int64_t b0 = 0; b0 < nq; b0 += block) {
    const int64_t b1 = std::min(nq, b0 + block);
    const Tensor dots = kernels::matmul(q.narrow(0, b0, b1 - b0).contiguous(), g, false, true);
    const float* p = dots.data<float>();
    for (int64_t i = b0; i < b1; ++i) {
      for (int64_t j = 0; j < ng; ++j) {
        const double dot = p[(i - b0) * ng + j];
        d[size_t(j)] = cosine ? 1.0 - dot : std::sqrt(std::max(0.0, qn[size_t(i)] + gn[size_t(j)] - 2 * dot));
      }
      fn(i, d);
    }
  }
}

// The first `k` gallery indices by distance (ties by index), leaving out `self` (or -1).
std::vector<int64_t> top_k(const std::vector<double>& d, int64_t k, int64_t self) {
  std::vector<int64_t> idx(d.size());
  std::iota(idx.begin(), idx.end(), 0);
  if (self >= 0) idx.erase(idx.begin() + self);
  k = std::min<int64_t>(k, static_cast<int64_t>(idx.size()));
  auto less = [&](int64_t a, int64_t b) { return d[size_t(a)] < d[size_t(b)] || (d[size_t(a)] == d[size_t(b)] && a < b); };
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), less);
  idx.resize(size_t(k));
  return idx;
}

}  // namespace

RetrievalMetrics retrieval_metrics(const Tensor& emb, const std::vector<int32_t>& labels, const std::vector<int>& ks,
                                   bool cosine) {
  MN_CHECK(emb.dim() == 2 && emb.size(0) == static_cast<int64_t>(labels.size()), "retrieval_metrics: ",
           labels.size(), " labels for embeddings ", emb.desc());
  std::map<int32_t, int64_t> class_size;
  for (int32_t l : labels) {
    MN_CHECK(l >= 0, "retrieval_metrics: labels must be >= 0 (an unlabelled item cannot be scored)");
    ++class_size[l];
  }
  const int kmax = ks.empty() ? 1 : *std::max_element(ks.begin(), ks.end());
  RetrievalMetrics m;
  std::map<int, int64_t> hits;
  double ap_sum = 0, rp_sum = 0;
  const Tensor h = host_rows(emb, cosine);
  for_each_query(h, h, cosine, [&](int64_t i, const std::vector<double>& d) {
    const int32_t y = labels[size_t(i)];
    const int64_t R = class_size[y] - 1;
    if (R == 0) {
      ++m.skipped;
      return;
    }
    const std::vector<int64_t> nn = top_k(d, std::max<int64_t>(R, kmax), i);
    for (int k : ks) {
      bool hit = false;
      for (int64_t r = 0; r < std::min<int64_t>(k, int64_t(nn.size())) && !hit; ++r) hit = labels[size_t(nn[size_t(r)])] == y;
      hits[k] += hit;
    }
    int64_t rel = 0;
    double ap = 0;
    for (int64_t r = 0; r < R; ++r)
      if (labels[size_t(nn[size_t(r)])] == y) ap += double(++rel) / double(r + 1);
    ap_sum += ap / double(R);
    rp_sum += double(rel) / double(R);
    ++m.queries;
  });
  const double q = std::max<int64_t>(1, m.queries);
  for (int k : ks) m.recall_at[k] = 100.0 * double(hits[k]) / q;
  m.map_at_r = 100.0 * ap_sum / q;
  m.r_precision = 100.0 * rp_sum / q;
  return m;
}

double one_shot_accuracy(const Tensor& emb, const std::vector<int32_t>& labels, int n_way, int tasks, uint64_t seed,
                         bool cosine) {
  std::map<int32_t, std::vector<int64_t>> by_class;
  for (size_t i = 0; i < labels.size(); ++i) by_class[labels[i]].push_back(static_cast<int64_t>(i));
  std::vector<const std::vector<int64_t>*> usable;
  for (const auto& [c, v] : by_class)
    if (v.size() >= 2) usable.push_back(&v);
  MN_CHECK(n_way >= 2 && static_cast<int64_t>(usable.size()) >= n_way, "one-shot: ", n_way, "-way tasks need ",
           n_way, " classes with at least 2 images; these data have ", usable.size(),
           " (lower the way, or add classes)");
  const Tensor h = host_rows(emb, cosine);
  const int64_t d = h.size(1);
  const float* p = h.data<float>();
  auto dist = [&](int64_t a, int64_t b) {
    double s = 0;
    for (int64_t j = 0; j < d; ++j) {
      const double t = double(p[a * d + j]) - p[b * d + j];
      s += t * t;
    }
    return s;  // squared Euclidean: the same ranking as Euclidean, and as cosine on normalised rows
  };
  Generator g(seed);
  int64_t right = 0;
  for (int t = 0; t < tasks; ++t) {
    const std::vector<int64_t> perm = randperm(static_cast<int64_t>(usable.size()), g);
    std::vector<int64_t> support;
    for (int c = 0; c < n_way; ++c) {
      const std::vector<int64_t>& items = *usable[size_t(perm[size_t(c)])];
      support.push_back(items[size_t(g.next_int(0, static_cast<int64_t>(items.size())))]);
    }
    const std::vector<int64_t>& target = *usable[size_t(perm[0])];
    int64_t query = support[0];
    while (query == support[0]) query = target[size_t(g.next_int(0, static_cast<int64_t>(target.size())))];
    int best = 0;
    for (int c = 1; c < n_way; ++c)
      if (dist(query, support[size_t(c)]) < dist(query, support[size_t(best)])) best = c;
    right += best == 0;
  }
  return 100.0 * double(right) / std::max(1, tasks);
}

Neighbours nearest_neighbours(const Tensor& queries, const Tensor& gallery, int k, bool cosine, bool exclude_self) {
  MN_CHECK(k >= 1, "nearest_neighbours: k must be >= 1");
  MN_CHECK(!exclude_self || queries.size(0) == gallery.size(0), "nearest_neighbours: exclude_self needs the queries "
           "to be the gallery");
  Neighbours out;
  const Tensor q = host_rows(queries, cosine), g = host_rows(gallery, cosine);
  for_each_query(q, g, cosine, [&](int64_t i, const std::vector<double>& d) {
    const std::vector<int64_t> nn = top_k(d, k, exclude_self ? i : -1);
    std::vector<double> dd;
    for (int64_t j : nn) dd.push_back(d[size_t(j)]);
    out.index.push_back(nn);
    out.distance.push_back(dd);
  });
  return out;
}

}  // namespace mn::exp
