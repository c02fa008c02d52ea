// The sampling study's evaluation on host embeddings (N, D) (D = 2 in the
// study): the study's own accuracies, computed as its code does, and the
// metrics a user needs (study-protocols.md, "Sampling study", section 5):
//   * study_offline_pair_accuracy: the code's offline-pair metric, per batch of
//     128 fixed test pairs (positives stored first) the count of NEGATIVE pairs
//     with a distance > 0, divided by a hard-coded 64, averaged over batches.
//     It depends on the set size, not the model (98.89 % on 10,000 images);
//   * triplet_accuracy: the share of triplets with d(a, n) > d(a, p) (the
//     study's triplet metric; the matched-couple accuracy on fixed triplets);
//   * couple_accuracy: the share of index-aligned (positive pair k, negative
//     pair k) couples with d_neg > d_pos (the study's online-pair metric and
//     what its Eq. 4 intends);
//   * knn_accuracy: k-NN classification of queries against a labelled gallery
//     (k = 1 and k = 5, majority vote, ties to the nearest);
//   * recall_at_1: the share of images whose nearest other image has their label;
//   * unseen_auroc: how well the unseen class separates: AUROC of the distance
//     to the nearest seen-class centroid (centroids of the gallery), unseen
//     test images positive (ties count half).
// Distances are plain Euclidean.
#pragma once
#include <cstdint>
#include <vector>

#include "experiments/sampling/data.h"

namespace mn::exp::sampling {

struct HostEmb {
  std::vector<float> v;  // (n, d)
  int64_t n = 0, d = 0;
  double dist(int64_t i, int64_t j) const;
  const float* row(int64_t i) const { return v.data() + i * d; }
};

double study_offline_pair_accuracy(const HostEmb& e, const FixedPairs& p, int64_t batch = 128, double per = 64);
double triplet_accuracy(const HostEmb& e, const FixedTriplets& t);
double couple_accuracy(const std::vector<double>& d_pos, const std::vector<double>& d_neg);

struct KnnResult {
  double acc1 = 0, acc5 = 0;
};
// gallery rows with labels gl; query rows `qi` (indices into q) with labels ql.
KnnResult knn_accuracy(const HostEmb& gallery, const std::vector<int32_t>& gl, const HostEmb& q,
                       const std::vector<int32_t>& ql, const std::vector<int64_t>& qi);
double recall_at_1(const HostEmb& e, const std::vector<int32_t>& labels);
double unseen_auroc(const HostEmb& gallery, const std::vector<int32_t>& gl, const HostEmb& test,
                    const std::vector<int32_t>& tl, int32_t unseen);

}  // namespace mn::exp::sampling
