// Test-time classification of the informed-pair-selection study (Eqs. 4-5):
// every query is paired with one prototype per class; a pair is "genuine" when
// D < M, and each genuine prototype votes for its class with weight 1 / D.
//
// With one prototype per class the vote reduces to "the nearest prototype
// among those within M". When no prototype is within M, Eqs. 4-5 give every
// class zero votes: we count that query as WRONG (the strict reading, the
// primary number) and also report the plain nearest-prototype accuracy and the
// share of such abstentions, so the effect of the rule is visible. A prototype
// at D = 0 (weight 1 / 0) wins outright.
#pragma once
#include <cstdint>
#include <vector>

namespace mn::pairsel {

struct VoteResult {
  double accuracy = 0.0;          // Eqs. 4-5, abstentions wrong
  double nearest_accuracy = 0.0;  // plain nearest prototype (no margin)
  double abstain_share = 0.0;     // queries with no prototype within M
};

// Class decided by the vote for one query, or -1 when no prototype is within
// `margin`. dist (C): distance to each class's prototype; proto_class (C).
int32_t vote_class(const float* dist, const std::vector<int32_t>& proto_class, double margin);

// queries (n, d) and prototypes (C, d) in the embedding; labels (n).
VoteResult vote_accuracy(const float* queries, int64_t n, const float* prototypes,
                         const std::vector<int32_t>& proto_class, int64_t d,
                         const std::vector<int32_t>& labels, double margin);

// Class centroids (C, in) of rows x (n, in) with labels in [0, C): the
// prototypes, computed in input space (the authors' code) and then embedded.
std::vector<float> class_centroids(const float* x, int64_t n, int64_t in,
                                   const std::vector<int32_t>& labels, int32_t num_classes);

}  // namespace mn::pairsel
