// Pair selection of the informed-pair-selection study; see pairs.h.
#include "experiments/pair_selection/pairs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/cpu/gemm.h"  // raw host-array GEMM launcher (no Tensor on this hot path)
#include "runtime/error.h"

namespace mn::pairsel {

namespace {
std::vector<std::vector<int32_t>> by_class(const std::vector<int32_t>& labels) {
  int32_t c_max = -1;
  for (int32_t y : labels) {
    MN_CHECK(y >= 0, "pair_selection", "negative class label ", y);
    c_max = std::max(c_max, y);
  }
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(c_max + 1));
  for (size_t i = 0; i < labels.size(); ++i) out[labels[i]].push_back(static_cast<int32_t>(i));
  return out;
}
}  // namespace

std::vector<int64_t> stratified_sample(const std::vector<int32_t>& labels, int64_t n,
                                       Generator& g) {
  const int64_t total = static_cast<int64_t>(labels.size());
  MN_CHECK(n > 0 && n <= total, "pair_selection: fold sampling", "cannot draw ", n, " of ", total,
           " examples");
  std::vector<std::vector<int64_t>> cls;
  for (int64_t i = 0; i < total; ++i) {
    const size_t y = static_cast<size_t>(labels[i]);
    if (cls.size() <= y) cls.resize(y + 1);
    cls[y].push_back(i);
  }
  // Largest remainder: floor shares first, then one more to the classes with
  // the largest fractional parts (ties to the lower class) until n is reached.
  std::vector<int64_t> take(cls.size());
  std::vector<std::pair<double, size_t>> rem;
  int64_t taken = 0;
  for (size_t c = 0; c < cls.size(); ++c) {
    const double share = static_cast<double>(n) * cls[c].size() / total;
    take[c] = static_cast<int64_t>(std::floor(share));
    taken += take[c];
    rem.push_back({share - take[c], c});
  }
  std::stable_sort(rem.begin(), rem.end(), [](auto& x, auto& y) { return x.first > y.first; });
  for (size_t r = 0; taken < n; ++r, ++taken) ++take[rem[r].second];
  std::vector<int64_t> out;
  for (size_t c = 0; c < cls.size(); ++c) {
    const auto pick = sample_without_replacement(static_cast<int64_t>(cls[c].size()), take[c], g);
    for (int64_t p : pick) out.push_back(cls[c][p]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<Pair> random_pairs(const std::vector<int32_t>& labels, Generator& g) {
  const auto cls = by_class(labels);
  const int32_t n = static_cast<int32_t>(labels.size());
  int classes_present = 0;
  for (size_t c = 0; c < cls.size(); ++c) {
    if (cls[c].empty()) continue;
    ++classes_present;
    MN_CHECK(cls[c].size() >= 2, "pair_selection: random pairs", "class ", c,
             " has one example; a genuine partner other than itself is impossible");
  }
  MN_CHECK(classes_present >= 2, "pair_selection: random pairs",
           "need two classes for impostor pairs, got ", classes_present);
  std::vector<Pair> out;
  out.reserve(2 * static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    const auto& same = cls[labels[i]];
    // Genuine: uniform over the class's other members: draw one of size-1 slots;
    // the slot that holds i itself stands for the last member (never i then).
    const int64_t r = g.next_int(0, static_cast<int64_t>(same.size()) - 1);
    int32_t partner = same[r];
    if (partner == i) partner = same.back();
    out.push_back({i, partner, 0});
    // Impostor: uniform over all examples of other classes.
    const int64_t others = n - static_cast<int64_t>(same.size());
    int64_t k = g.next_int(0, others);
    // Walk to the k-th index whose class differs (n is small: 600).
    int32_t j = 0;
    for (;; ++j) {
      if (labels[j] == labels[i]) continue;
      if (k-- == 0) break;
    }
    out.push_back({i, j, 1});
  }
  return out;
}

std::vector<int32_t> nearest_neighbours(const float* emb, int64_t n, int64_t d, int k,
                                        bool include_self) {
  MN_CHECK(k >= 1 && k <= n - (include_self ? 0 : 1), "pair_selection: nearest neighbours",
           "k = ", k, " with ", n, " points");
  // Squared distances from the Gram matrix: |x|^2 + |y|^2 - 2 x.y (n, n).
  std::vector<float> gram(static_cast<size_t>(n * n));
  kernels::gemm_cpu<float>(false, true, n, n, d, 1.0f, emb, d, emb, d, 0.0f, gram.data(), n);
  std::vector<int32_t> out(static_cast<size_t>(n * k));
  std::vector<int32_t> idx(static_cast<size_t>(n));
  std::vector<float> dist(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j)
      dist[j] = gram[i * n + i] + gram[j * n + j] - 2.0f * gram[i * n + j];
    int m = 0;
    if (include_self) out[i * k + m++] = static_cast<int32_t>(i);
    idx.resize(static_cast<size_t>(n));
    std::iota(idx.begin(), idx.end(), 0);
    idx.erase(idx.begin() + i);
    std::partial_sort(idx.begin(), idx.begin() + (k - m), idx.end(), [&](int32_t x, int32_t y) {
      return dist[x] < dist[y] || (dist[x] == dist[y] && x < y);
    });
    for (int j = 0; m < k; ++m, ++j) out[i * k + m] = idx[j];
  }
  return out;
}

std::vector<Pair> exploit_pairs(const std::vector<Pair>& current, const std::vector<float>& loss,
                                int64_t b, const std::vector<int32_t>& nn1,
                                const std::vector<int32_t>& nn2,
                                const std::vector<int32_t>& labels, std::vector<Pair> explore,
                                Generator& g) {
  MN_CHECK(loss.size() == current.size(), "pair_selection: exploit", loss.size(),
           " losses for ", current.size(), " pairs");
  MN_CHECK(b >= 0 && b <= static_cast<int64_t>(std::min(current.size(), explore.size())),
           "pair_selection: exploit", "b = ", b, " with ", current.size(), " pairs");
  std::vector<int64_t> order(current.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t x, int64_t y) { return loss[x] > loss[y]; });
  std::vector<Pair> out;
  out.reserve(explore.size());
  for (int64_t r = 0; r < b; ++r) {
    const Pair& p = current[order[r]];
    const int32_t a = nn1[p.a];
    int32_t c = nn1[p.b];
    if (c == a) c = nn2[p.b];  // no self-pair (see pairs.h)
    out.push_back({a, c, static_cast<uint8_t>(labels[a] != labels[c])});
  }
  // Fresh explore pairs with b of them deleted at random.
  auto drop = sample_without_replacement(static_cast<int64_t>(explore.size()), b, g);
  std::vector<uint8_t> dropped(explore.size(), 0);
  for (int64_t x : drop) dropped[x] = 1;
  for (size_t i = 0; i < explore.size(); ++i)
    if (!dropped[i]) out.push_back(explore[i]);
  return out;
}

std::vector<double> pair_complexity(const std::vector<Pair>& pairs, const std::vector<int32_t>& knn,
                                    int k, const std::vector<int32_t>& labels) {
  std::vector<double> out(pairs.size());
  for (size_t p = 0; p < pairs.size(); ++p) {
    int agree = 0, disagree = 0;
    for (int i = 0; i < k; ++i) {
      const int32_t yi = labels[knn[static_cast<size_t>(pairs[p].a) * k + i]];
      for (int j = 0; j < k; ++j) {
        const int32_t yj = labels[knn[static_cast<size_t>(pairs[p].b) * k + j]];
        const uint8_t imp = yi != yj;
        (imp == pairs[p].impostor ? agree : disagree) += 1;
      }
    }
    out[p] = (1.0 + agree) / (1.0 + disagree);
  }
  return out;
}

std::vector<Pair> order_by_complexity(const std::vector<Pair>& pairs,
                                      const std::vector<double>& complexity) {
  MN_CHECK(pairs.size() == complexity.size(), "pair_selection: order", complexity.size(),
           " complexities for ", pairs.size(), " pairs");
  std::vector<size_t> idx(pairs.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](size_t x, size_t y) { return complexity[x] > complexity[y]; });
  std::vector<Pair> out;
  out.reserve(pairs.size());
  for (size_t i : idx) out.push_back(pairs[i]);
  return out;
}

}  // namespace mn::pairsel
