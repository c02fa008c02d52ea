// Test-time prototype vote of the informed-pair-selection study; see vote.h.
#include "experiments/pair_selection/vote.h"

#include <cmath>
#include <limits>

#include "runtime/error.h"

namespace mn::pairsel {

int32_t vote_class(const float* dist, const std::vector<int32_t>& proto_class, double margin) {
  // Accumulate 1 / D per class over prototypes with D < M (several prototypes
  // per class are allowed here, though the study uses one).
  int32_t c_max = 0;
  for (int32_t c : proto_class) c_max = std::max(c_max, c);
  std::vector<double> votes(static_cast<size_t>(c_max) + 1, 0.0);
  bool any = false;
  for (size_t j = 0; j < proto_class.size(); ++j) {
    if (!(dist[j] < margin)) continue;
    if (dist[j] <= 0.0f) return proto_class[j];  // weight 1 / 0: wins outright
    votes[proto_class[j]] += 1.0 / dist[j];
    any = true;
  }
  if (!any) return -1;
  int32_t best = 0;
  for (size_t c = 1; c < votes.size(); ++c)
    if (votes[c] > votes[best]) best = static_cast<int32_t>(c);
  return best;
}

VoteResult vote_accuracy(const float* queries, int64_t n, const float* prototypes,
                         const std::vector<int32_t>& proto_class, int64_t d,
                         const std::vector<int32_t>& labels, double margin) {
  MN_CHECK(static_cast<int64_t>(labels.size()) == n && n > 0, "pair_selection: vote",
           labels.size(), " labels for ", n, " queries");
  const size_t C = proto_class.size();
  std::vector<float> dist(C);
  int64_t correct = 0, nearest_correct = 0, abstain = 0;
  for (int64_t i = 0; i < n; ++i) {
    size_t nearest = 0;
    for (size_t j = 0; j < C; ++j) {
      double s = 0.0;
      for (int64_t k = 0; k < d; ++k) {
        const double t = static_cast<double>(queries[i * d + k]) - prototypes[j * d + k];
        s += t * t;
      }
      dist[j] = static_cast<float>(std::sqrt(s));
      if (dist[j] < dist[nearest]) nearest = j;
    }
    const int32_t c = vote_class(dist.data(), proto_class, margin);
    if (c < 0) ++abstain;
    if (c == labels[i]) ++correct;
    if (proto_class[nearest] == labels[i]) ++nearest_correct;
  }
  VoteResult r;
  r.accuracy = static_cast<double>(correct) / n;
  r.nearest_accuracy = static_cast<double>(nearest_correct) / n;
  r.abstain_share = static_cast<double>(abstain) / n;
  return r;
}

std::vector<float> class_centroids(const float* x, int64_t n, int64_t in,
                                   const std::vector<int32_t>& labels, int32_t num_classes) {
  std::vector<double> sum(static_cast<size_t>(num_classes * in), 0.0);
  std::vector<int64_t> count(static_cast<size_t>(num_classes), 0);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t c = labels[i];
    MN_CHECK(c >= 0 && c < num_classes, "pair_selection: centroids", "label ", c, " of row ", i,
             " is not in [0, ", num_classes, ")");
    ++count[c];
    for (int64_t k = 0; k < in; ++k) sum[c * in + k] += x[i * in + k];
  }
  std::vector<float> out(sum.size());
  for (int32_t c = 0; c < num_classes; ++c) {
    MN_CHECK(count[c] > 0, "pair_selection: centroids", "class ", c, " has no training example");
    for (int64_t k = 0; k < in; ++k) out[c * in + k] = static_cast<float>(sum[c * in + k] / count[c]);
  }
  return out;
}

}  // namespace mn::pairsel
