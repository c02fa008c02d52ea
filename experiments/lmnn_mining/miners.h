// The seven triplet-mining variants of the LMNN study (Poorheravi et al., §3,
// Eqs. 4-12). Each picks, for every anchor i, which same-class points j are
// pulled (the pull term) and which (i, j, l) triplets get a hinge, from the
// Euclidean distances in the current space X (the input for non-hierarchical
// runs, the projected points inside one hypersphere for hierarchical ones).
//
//   method  positives j of anchor i          negatives l for each (i, j)
//   k-BA    k nearest  (eta_ij)              every other-class point      (Eq. 4)
//   k-BH    k farthest (gamma+_ij)           k nearest  (eta-_il)         (Eq. 5)
//   k-BSH   k nearest                        k nearest with d_il > d_ij   (Eq. 6)
//   k-EPEN  k nearest                        k farthest (gamma-_il)       (Eq. 7)
//   k-EPHN  k nearest                        k nearest                    (Eq. 8)
//   k-HPEN  k farthest                       k farthest                   (Eq. 9)
//   k-NS    k nearest                        k sampled, see below         (Eq. 12)
//
// k-NS is the paper's Eqs. 10-11, NOT Wu et al.'s distance-weighted miner: the
// weight of negative l is min(lambda, 1 / q(D_il)) with the unnormalised density
// q(D) = D^(d-2) (1 - D^2/4)^((d-3)/2), D the Euclidean distance between the
// L2-normalised points clipped to [0.5, 1.99] (the density is only defined for
// D < 2; 0.5 is Wu et al.'s cut-off), d the input dimensionality; k negatives
// per (i, j) drawn by roulette wheel without replacement. Nothing is
// normalised per anchor, so the cap lambda acts on the raw 1/q as Eq. 11 reads.
//
// Fewer than k candidates: all of them are used. Distance ties are broken by
// the smaller index, so the output is deterministic (and enumerable in tests).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "experiments/lmnn_mining/linalg.h"
#include "runtime/rng.h"

namespace mn::lmnn {

enum class Mining { BA, BH, BSH, HPEN, EPEN, EPHN, NS };

const std::vector<Mining>& all_minings();
std::string mining_name(Mining m);  // "k-BA", ...
// Accepts "k-BA", "ba", "BA", ... (case-insensitive); throws naming the choices.
Mining parse_mining(const std::string& s);

struct Mined {
  std::vector<std::array<int32_t, 2>> pull;      // (i, j) target neighbours
  std::vector<std::array<int32_t, 3>> triplets;  // (i, j, l) anchor, positive, negative
};

struct MinerParams {
  Mining method = Mining::BH;
  int64_t k = 3;
  double lambda = 1.4;  // k-NS cap (Eq. 11)
};

// X (n, d) points, y (n) labels. `g` is used by k-NS only.
Mined mine(const Mat& X, const std::vector<int32_t>& y, const MinerParams& p, Generator& g);

// k-NS weights of the negatives of one anchor: min(lambda, 1/q(D)) for each D
// (Euclidean distances between L2-normalised points), computed in log space.
double ns_weight(double D, int64_t d, double lambda);

}  // namespace mn::lmnn
