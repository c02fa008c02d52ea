// Online batch miners: from a (B, B) distance matrix and (B) integer labels, emit
// compact index lists. Every miner runs a COUNT pass (one count per (anchor,
// positive) pair, B^2 int64), an exclusive scan, and a FILL pass writing at the
// scanned offsets: workspace O(B^2), never a B x B x B buffer. CPU and CUDA run
// the same per-pair logic (kernels/miner_math.h), so they mine identical sets
// for the same distance matrix and Philox (seed, offset).
//
// Conventions (all miners):
//   - positives are ORDERED pairs (a, p), a != p, same label (MinerParams::
//     unordered_positives: a < p only); negatives n have a
//     different label. Output triplets are sorted by (a, p) then by n (or by the
//     rank of n where a miner picks several).
//   - ties are broken by the lowest index.
//   - distances are whatever the caller passes (squared or plain L2); margins
//     are in the same units.
// Triplet miners (MinerKind):
//   AllTriplets      every (a, p, n); only_violating keeps d(a,p) - d(a,n) + m > 0.
//   BatchHard        per anchor: farthest positive, nearest negative (one triplet).
//   SemiHard         per (a, p): the nearest n with d(a,p) < d(a,n) < d(a,p) + m.
//                    Fallback when none exists: Drop (no triplet, the default, as
//                    in the sampling study's selector) or Hardest (nearest negative).
//   RandomViolating  per (a, p): a uniformly random n among d(a,p) - d(a,n) + m > 0
//                    ("random negative online triplet"); none -> no triplet.
//   RandomSemiHard   per (a, p): a uniformly random semi-hard n ("semi-hard
//                    negative online triplet"); none -> no triplet.
//   DistanceWeighted per (a, p): one negative drawn with probability
//                    w(n) / sum_n' w(n'), w(n) = 1 / q(max(D_an, cutoff)) for
//                    D_an < nonzero_cutoff, 0 otherwise (Wu et al. 2017, "Sampling
//                    matters", Sec. 4, as pml's DistanceWeightedMiner: cutoff 0.5,
//                    nonzero_loss_cutoff 1.4, D plain L2 on unit-normalised
//                    embeddings); no negative with a weight -> no triplet. pml draws
//                    one negative per positive pair the same way.
//   KTriplets        the LMNN study's k-miners, per anchor k positives x k negatives:
//                      k-BH = k-HPHN: farthest positives x nearest negatives
//                      k-BSH: nearest positives; per positive p the k nearest
//                             negatives with d(a,n) > d(a,p)
//                      k-EPEN: nearest x farthest;  k-EPHN: nearest x nearest
//                      k-HPEN: farthest x farthest
//                      k-NS:   the LMNN paper's Eqs. 10-11 (NOT Wu et al.'s
//                              miner, which is DistanceWeighted above): nearest
//                              positives; per positive, k negatives drawn
//                              WITHOUT replacement from P(n|a) ∝ min(λ, 1/q(D)),
//                              unnormalised and with no nonzero-loss cutoff, so for
//                              large d nearly every weight is capped at λ and the
//                              draw is close to uniform (as the paper reads; the
//                              LMNN study's own miners.cpp computes the same weight),
//                              q(D) = D^(d-2) (1 - D^2/4)^((d-3)/2) (Wu et al. 2017),
//                              D = plain L2 on unit-normalised embeddings clamped
//                              to [cutoff, 1.9999] (cutoff 0.5 as in Wu et al.),
//                              via Gumbel-top-k on log weights (all in log space,
//                              bit-identical on CPU and GPU: philox_log, fp:: ops).
//                    They also return the pull pairs (a, p) of the chosen positives.
// Randomness: Philox4x32-10 keyed by the generator's seed; the draw of (a, p) uses
// block offset + a B + p (k-NS, DistanceWeighted: offset + (a B + p) B + n), lane 0
// (or lanes 0-1).
// The generator is advanced by the blocks reserved.
// Pair miner (mine_pairs): all positive unordered pairs (i < j) plus as many
// negative pairs (i < j): Random (uniform subset: the P smallest Philox keys) or
// Hardest (the P smallest distances, ties by lowest (i, j)); negatives in (i, j) order.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/distance.h"
#include "runtime/rng.h"
#include "runtime/strided.h"
#include "runtime/tensor.h"

namespace mn::kernels {

enum class MinerKind : int { AllTriplets = 0, BatchHard, SemiHard, RandomViolating, RandomSemiHard,
                             KTriplets, DistanceWeighted };
enum class SemiHardFallback : int { Drop = 0, Hardest };
enum class KMiner : int { BH = 0, BSH, EPEN, EPHN, HPEN, HPHN, NS };
enum class PairNegatives : int { Random = 0, Hardest };

struct MinerParams {
  MinerKind kind = MinerKind::AllTriplets;
  double margin = 0.2;
  bool only_violating = false;  // AllTriplets
  // Positives as UNORDERED pairs: only (a, p) with a < p (every triplet miner).
  // The sampling study's selectors take itertools.combinations of a class's
  // batch images: 9 C(25, 2) = 2,700 anchor-positive pairs in a 9 x 25 batch,
  // 540,000 triplets for AllTriplets (ordered pairs give twice as many).
  bool unordered_positives = false;
  SemiHardFallback fallback = SemiHardFallback::Drop;
  KMiner kminer = KMiner::BH;
  int k = 3;
  int dw_dim = 128;         // k-NS, DistanceWeighted: embedding dimension d
  double dw_lambda = 1.4;   // k-NS: weight cap λ
  double dw_cutoff = 0.5;   // k-NS, DistanceWeighted: lower clamp of D
  double dw_nonzero_cutoff = 1.4;  // DistanceWeighted: weight 0 for D >= this
  // > 0: a fixed-size output for a step with no host read (a CUDA graph's
  // static shapes): triplets is (capacity, 3), its first `count` rows mined, the
  // rest (0, 0, 0), and nothing waits for the device to learn the count. Give
  // triplet_capacity() of the batch's class sizes. Mining more than capacity is
  // an error (the CPU throws; CUDA reports it at the next synchronisation, as a
  // bad index, and keeps the first rows that fit). KTriplets: their pull pairs
  // are then (B k, 2), zero-padded, with MinedTriplets::pair_count.
  int64_t capacity = 0;
};

struct MinedTriplets {
  Tensor triplets;  // (T, 3) int64 (a, p, n); (capacity, 3) with MinerParams::capacity
  Tensor count;     // (1) int64 on the miner's device: the rows mined (T without a capacity)
  Tensor pairs;     // KTriplets: (P, 2) int64 pull pairs (a, p) ((B k, 2) with a capacity); otherwise undefined
  Tensor pair_count;  // KTriplets: (1) int64 on the device: P
  int64_t workspace_bytes = 0;  // temporaries, excluding the outputs
};
struct MinedPairs {
  Tensor pairs;   // (P + Q, 2) int64: positives first, then negatives; (capacity, 2) with a capacity
  Tensor is_pos;  // (P + Q) int64: 1 same class, 0 different; (capacity) with a capacity
  Tensor count;   // (1) int64 on the miner's device: P + Q
  int64_t num_pos = 0;  // P; -1 on a GPU with a capacity (not read back)
  int64_t workspace_bytes = 0;
};

// dist (B, B) float/double, labels (B) int32/int64, same device.
MinedTriplets mine_triplets(const Tensor& dist, const Tensor& labels, const MinerParams& p,
                            Generator* gen = nullptr);
// The most triplets miner `p` can emit for a batch whose classes have these
// sizes (the sizes of a P x K batch: P times K): the capacity for a fixed-size
// output. Exact for AllTriplets without only_violating.
int64_t triplet_capacity(const MinerParams& p, const std::vector<int64_t>& class_sizes);
// capacity > 0: a fixed-size output with no host read (as MinerParams::capacity):
// the first P + Q rows mined, the rest (0, 0) with is_pos 0; give pair_capacity().
MinedPairs mine_pairs(const Tensor& dist, const Tensor& labels, PairNegatives neg,
                      Generator* gen = nullptr, int64_t capacity = 0);
// The most pairs mine_pairs can emit for a batch whose classes have these sizes:
// every positive pair and as many negatives.
int64_t pair_capacity(const std::vector<int64_t>& class_sizes);
// (B, B) distances of the rows of e (B, D): the pairwise distance of
// kernels/distance.h in its self case (symmetric; the diagonal is exactly 0 for
// L1 and the L2 metrics). `squared` picks L2Squared or L2; the overload takes
// any metric (L1, L2Squared, L2, Cosine). Defined in kernels/distance.cpp.
Tensor pairwise_distance_matrix(const Tensor& e, bool squared);
Tensor pairwise_distance_matrix(const Tensor& e, Metric m);

// ---- raw launchers (kernels/cpu/miners.cpp, kernels/cuda/miners.cu) ----------
template <typename T>
struct MinerArgs {
  MinerParams p;
  int64_t B = 0;
  const T* dist = nullptr;        // (B, B)
  const int64_t* labels = nullptr;  // (B)
  int64_t* hp = nullptr;          // (B) hardest positive or -1
  int64_t* hn = nullptr;          // (B) hardest negative or -1
  int64_t* possel = nullptr;      // (B, k) chosen positives (KTriplets), -1 padded
  int64_t* negsel = nullptr;      // (B, k) chosen negatives (KTriplets except BSH/NS)
  int64_t* npos = nullptr;        // (B)
  int64_t* nneg = nullptr;        // (B)
  uint64_t seed = 0, offset = 0;
};

// Pre-pass (per anchor), count pass (per (a, p) -> counts (B*B)), fill pass.
template <typename T>
void miner_prepass_cpu(const MinerArgs<T>& A);
template <typename T>
void miner_count_cpu(const MinerArgs<T>& A, int64_t* counts);
template <typename T>
void miner_fill_cpu(const MinerArgs<T>& A, const int64_t* offsets, int64_t* out);
// Pair miner on the host: fills pairs (P + Q, 2) and is_pos, returns P.
template <typename T>
int64_t pair_mine_cpu(int64_t B, const T* dist, const int64_t* labels, PairNegatives neg,
                      uint64_t seed, uint64_t offset, std::vector<int64_t>* pairs,
                      std::vector<int64_t>* is_pos);
// Order-preserving map of a float/double to an unsigned key (the pair miner's order).
template <typename T>
MN_HD uint64_t sortable_key(T x) {
  if (sizeof(T) == 4) {
    uint32_t b;
    memcpy(&b, &x, 4);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  }
  uint64_t b;
  memcpy(&b, &x, sizeof(T));
  return (b & 0x8000000000000000ull) ? ~b : (b | 0x8000000000000000ull);
}

#ifdef MN_WITH_CUDA
template <typename T>
void miner_prepass_cuda(const MinerArgs<T>& A);
template <typename T>
void miner_count_cuda(const MinerArgs<T>& A, int64_t* counts);
template <typename T>
void miner_fill_cuda(const MinerArgs<T>& A, const int64_t* offsets, int64_t* out);
// The fill into a fixed capacity (MinerParams::capacity): a pair whose rows would
// not fit is skipped and reported (runtime/cuda_check.h), *count = min(total, capacity).
template <typename T>
void miner_fill_capped_cuda(const MinerArgs<T>& A, const int64_t* offsets, int64_t* out,
                            int64_t capacity, int64_t* count);
// Exclusive scan of n counts into offsets (n + 1), offsets[n] = total (device).
void exclusive_scan_cuda(int64_t n, const int64_t* counts, int64_t* offsets);
// Pull pairs of the k-miners: out (sum npos, 2) from possel/npos and offsets (B+1).
void k_pull_pairs_cuda(int64_t B, int k, const int64_t* possel, const int64_t* offsets,
                       int64_t* out);
// Pair miner pieces (see kernels/cuda/miners.cu).
// capacity > 0: outputs (capacity, 2) / (capacity) zero-padded, *count_out made on
// the device (an overflow is reported as a bad index), *num_pos = -1, no host read.
template <typename T>
void pair_mine_cuda(int64_t B, const T* dist, const int64_t* labels, PairNegatives neg,
                    uint64_t seed, uint64_t offset, int64_t* row_ws /*(4 B + 4)*/,
                    Tensor* pairs_out, Tensor* is_pos_out, int64_t* num_pos,
                    int64_t capacity = 0, Tensor* count_out = nullptr);
#endif

}  // namespace mn::kernels
