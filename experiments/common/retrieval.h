// Retrieval metrics of an embedding, as pytorch-metric-learning's AccuracyCalculator
// reports them with the query set as its own reference set (each item a query against
// all the others, itself left out):
//   Recall@K   the share of queries with at least one item of their class among their
//              K nearest (the "Recall@K" of the metric-learning papers; pml's
//              precision_at_1 is Recall@1);
//   MAP@R      mean over queries of (1/R) sum_{i<=R} P(i) rel(i), R = the number of
//              other items of the query's class, P(i) the precision at rank i
//              (Musgrave et al., "A Metric Learning Reality Check", 2020);
//   R-precision the share of the R nearest that are of the query's class.
// Queries whose class has no other item are left out (counted in `skipped`).
// And N-way one-shot accuracy: tasks of N classes, one random support item each and a
// query item of one of them (not its support), right when the nearest support is of
// the query's class.
// Distances are Euclidean, or cosine (1 - cosine similarity) for losses that train on it.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/rng.h"
#include "runtime/tensor.h"

namespace mn::exp {

struct RetrievalMetrics {
  std::map<int, double> recall_at;  // K -> Recall@K in %
  double map_at_r = 0;              // %
  double r_precision = 0;           // %
  int64_t queries = 0, skipped = 0;
};

// emb (N, D) float32/float64 on any device (read once); labels (N), >= 0.
RetrievalMetrics retrieval_metrics(const Tensor& emb, const std::vector<int32_t>& labels, const std::vector<int>& ks,
                                   bool cosine = false);

// N-way one-shot accuracy in % over `tasks` seeded tasks (classes with >= 2 items only;
// throws when fewer than N such classes exist).
double one_shot_accuracy(const Tensor& emb, const std::vector<int32_t>& labels, int n_way, int tasks, uint64_t seed,
                         bool cosine = false);

// The K nearest of each query among the gallery (both (n, D)), nearest first:
// indices into the gallery and distances. `exclude_self`: query i is gallery item i
// (the same set) and is not its own neighbour.
struct Neighbours {
  std::vector<std::vector<int64_t>> index;
  std::vector<std::vector<double>> distance;
};
Neighbours nearest_neighbours(const Tensor& queries, const Tensor& gallery, int k, bool cosine, bool exclude_self);

}  // namespace mn::exp
