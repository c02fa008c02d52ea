// Pair selection of the informed-pair-selection study (Martin et al., SGAI 2018):
// fold sampling, random (explore) pairs, the DynEE exploit step, and the
// neighbourhood-complexity ordering of the self-paced (*) variants.
//
// Everything here works on plain index lists and row-major float embeddings
// (n, d) of the fold's training examples, so it can be tested on hand-built toy
// embeddings without a network. Label convention (Hadsell, the paper's §3):
// impostor = 1 for a pair of different classes, 0 for a genuine pair.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/rng.h"

namespace mn::pairsel {

struct Pair {
  int32_t a = 0, b = 0;  // indices into the fold's training examples
  uint8_t impostor = 0;  // Y: 1 = different classes, 0 = same class
};

// A stratified sample of exactly `n` of `labels` (largest-remainder rounding of
// n * class share, so 600 of MNIST's 60,000 is exactly 600), shuffled within
// class by `g`; returned in ascending order.
std::vector<int64_t> stratified_sample(const std::vector<int32_t>& labels, int64_t n,
                                       Generator& g);

// Explore pairs (Algorithm 1 as the authors' code does it): every example is a
// pivot once with a random genuine partner and once with a random impostor
// partner, so |P| = 2|X|, half genuine. Unlike the code, the genuine partner is
// never the pivot itself. Every class needs >= 2 examples and there must be
// >= 2 classes (throws otherwise). Order: (pivot i genuine, pivot i impostor), i = 0..n-1.
std::vector<Pair> random_pairs(const std::vector<int32_t>& labels, Generator& g);

// Index of the nearest other row of `emb` (n, d) for every row (Euclidean;
// ties to the lower index). With k > 1: the k nearest, row-major (n, k).
// `include_self` puts the point itself first (Eq. 6's neighbourhood).
std::vector<int32_t> nearest_neighbours(const float* emb, int64_t n, int64_t d, int k,
                                        bool include_self);

// DynEE (Algorithms 2-3): the b pairs with the highest current loss (`loss`,
// one per pair of `current`; ties to the earlier pair) are replaced by the pair
// of their members' nearest neighbours (nn1: the first neighbour excluding the
// point itself); the label follows the neighbours' classes. When both members
// share one nearest neighbour the second member takes its second neighbour
// (nn2) so no self-pair is formed. The rest of the returned set are `explore`
// pairs with b of them deleted at random (the authors' code). Result size:
// |explore|; exploit pairs first.
std::vector<Pair> exploit_pairs(const std::vector<Pair>& current, const std::vector<float>& loss,
                                int64_t b, const std::vector<int32_t>& nn1,
                                const std::vector<int32_t>& nn2,
                                const std::vector<int32_t>& labels, std::vector<Pair> explore,
                                Generator& g);

// Eq. 6 with the authors' reading: knn (n, k) holds each example's k nearest
// neighbours with the example itself first. For pair p = (x, x'), over the k*k
// neighbour pairs (NN_i(x), NN_j(x')) count those whose label (same class or
// not) agrees with p's; C(p) = (1 + agree) / (1 + disagree).
std::vector<double> pair_complexity(const std::vector<Pair>& pairs, const std::vector<int32_t>& knn,
                                    int k, const std::vector<int32_t>& labels);

// The self-paced order: pairs sorted by C(p) descending (most homogeneous,
// easiest first); equal C keeps the given order (stable). The authors' sorting
// loop drops the last pair and duplicates the first; we do not copy that bug.
std::vector<Pair> order_by_complexity(const std::vector<Pair>& pairs,
                                      const std::vector<double>& complexity);

}  // namespace mn::pairsel
