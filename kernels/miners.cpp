// Tensor-level dispatch of the miners (kernels/miners.h): checks, workspace
// allocation (counted in workspace_bytes), count -> scan -> fill on the CPU or
// the GPU. The distance matrix they read comes from kernels/distance.cpp
// (pairwise_distance_matrix).
#include "kernels/miners.h"

#include <algorithm>
#include <cmath>

#include "runtime/dispatch.h"
#include "runtime/graph.h"

namespace mn::kernels {
namespace {

void check_inputs(const char* op, const Tensor& dist, const Tensor& labels) {
  check_defined(op, dist, "dist");
  check_floating(op, dist);
  check_dim(op, dist, 2, "dist");
  MN_CHECK(dist.size(0) == dist.size(1), op, ": dist must be (B, B), got ",
           shape_str(dist.shape()));
  MN_CHECK(labels.numel() == dist.size(0), op, ": labels must have ", dist.size(0),
           " elements, got ", shape_str(labels.shape()));
  MN_CHECK(labels.dtype() == DType::I32 || labels.dtype() == DType::I64, op,
           ": labels must be int32/int64, got ", dtype_name(labels.dtype()));
  MN_CHECK(labels.device() == dist.device(), op, ": labels on ", labels.device().str(),
           ", dist on ", dist.device().str());
}

// mine_triplets' CPU path: count per (anchor, positive), scan, fill; the k-triplets
// miners' pull pairs as (anchor, selected positive) rows. `cap` > 0: a fixed-size output.
template <typename T>
void mine_on_cpu(const MinerArgs<T>& A, Tensor& counts, Tensor& offsets, int64_t cap, MinedTriplets& res) {
  const int64_t B = A.B, k = A.p.k;
  const Device dev = counts.device();
  miner_prepass_cpu<T>(A);
  int64_t* c = counts.data<int64_t>();
  int64_t* o = offsets.data<int64_t>();
  miner_count_cpu<T>(A, c);
  o[0] = 0;
  for (int64_t i = 0; i < B * B; ++i) o[i + 1] = o[i] + c[i];
  const int64_t total = o[B * B];
  MN_CHECK(cap == 0 || total <= cap, "mine_triplets: ", total, " triplets mined from a batch of ", B,
           ", more than the fixed capacity ", cap, " (MinerParams::capacity: give triplet_capacity() of the "
           "batch's class sizes)");
  res.triplets = cap > 0 ? Tensor::zeros({cap, 3}, DType::I64, dev) : Tensor::empty({total, 3}, DType::I64, dev);
  res.count = Tensor::empty({1}, DType::I64, dev);  // written, not made from host data: no upload on a GPU
  res.count.data<int64_t>()[0] = total;
  if (total > 0) miner_fill_cpu<T>(A, o, res.triplets.data<int64_t>());
  if (A.p.kind != MinerKind::KTriplets) return;
  std::vector<int64_t> pv;
  for (int64_t a = 0; a < B; ++a)
    for (int64_t r = 0; r < A.npos[a]; ++r) {
      pv.push_back(a);
      pv.push_back(A.possel[a * k + r]);
    }
  const int64_t npairs = static_cast<int64_t>(pv.size() / 2);
  res.pairs = Tensor::zeros({cap > 0 ? B * k : npairs, 2}, DType::I64, dev);
  std::copy(pv.begin(), pv.end(), res.pairs.data<int64_t>());
  res.pair_count = Tensor::empty({1}, DType::I64, dev);
  res.pair_count.data<int64_t>()[0] = npairs;
}

}  // namespace

MinedTriplets mine_triplets(const Tensor& dist, const Tensor& labels, const MinerParams& mp,
                            Generator* gen) {
  const char* op = "mine_triplets";
  check_inputs(op, dist, labels);
  MN_CHECK(mp.kind != MinerKind::KTriplets || mp.k >= 1, op, ": k must be >= 1, got ", mp.k);
  MN_CHECK(mp.capacity >= 0, op, ": capacity must be >= 0, got ", mp.capacity);
  const int64_t cap = mp.capacity;
  if (cap == 0) graph_unsafe("mine_triplets without a fixed capacity (its output size is read from the device)");
  const int64_t B = dist.size(0);
  const Device dev = dist.device();
  Tensor d = dist.contiguous();
  Tensor lab = labels.to(DType::I64).contiguous().view({B});
  const int64_t k = mp.kind == MinerKind::KTriplets ? mp.k : 1;
  Tensor hp = Tensor::empty({B}, DType::I64, dev), hn = Tensor::empty({B}, DType::I64, dev);
  Tensor possel = Tensor::empty({B * k}, DType::I64, dev);
  Tensor negsel = Tensor::empty({B * k}, DType::I64, dev);
  Tensor npos = Tensor::empty({B}, DType::I64, dev), nneg = Tensor::empty({B}, DType::I64, dev);
  Tensor counts = Tensor::empty({B * B}, DType::I64, dev);
  Tensor offsets = Tensor::empty({B * B + 1}, DType::I64, dev);
  MinedTriplets res;
  res.workspace_bytes = static_cast<int64_t>(hp.nbytes() + hn.nbytes() + possel.nbytes() +
                                             negsel.nbytes() + npos.nbytes() + nneg.nbytes() +
                                             counts.nbytes() + offsets.nbytes());
  uint64_t seed = 0, offset = 0;
  const bool random = mp.kind == MinerKind::RandomViolating ||
                      mp.kind == MinerKind::RandomSemiHard || mp.kind == MinerKind::DistanceWeighted ||
                      (mp.kind == MinerKind::KTriplets && mp.kminer == KMiner::NS);
  if (random) {
    Generator& g = gen ? *gen : default_generator();
    seed = g.seed();
    const uint64_t ub = static_cast<uint64_t>(B);
    const bool per_negative = mp.kind == MinerKind::KTriplets || mp.kind == MinerKind::DistanceWeighted;
    offset = g.advance(per_negative ? ub * ub * ub : ub * ub);
  }
  MN_DISPATCH_FLOAT(d.dtype(), op, [&] {
    using T = scalar_t;
    MinerArgs<T> A;
    A.p = mp;
    A.p.k = static_cast<int>(k);
    A.B = B;
    A.dist = d.data<T>();
    A.labels = lab.data<int64_t>();
    A.hp = hp.data<int64_t>();
    A.hn = hn.data<int64_t>();
    A.possel = possel.data<int64_t>();
    A.negsel = negsel.data<int64_t>();
    A.npos = npos.data<int64_t>();
    A.nneg = nneg.data<int64_t>();
    A.seed = seed;
    A.offset = offset;
    if (dev.is_cuda()) {
      MN_CUDA_BRANCH(op, dev, d.dtype(), {
        miner_prepass_cuda<T>(A);
        miner_count_cuda<T>(A, counts.data<int64_t>());
        exclusive_scan_cuda(B * B, counts.data<int64_t>(), offsets.data<int64_t>());
        if (cap > 0) {  // fixed size: no host read (MinerParams::capacity)
          res.triplets = Tensor::zeros({cap, 3}, DType::I64, dev);
          res.count = Tensor::empty({1}, DType::I64, dev);
          miner_fill_capped_cuda<T>(A, offsets.data<int64_t>(), res.triplets.data<int64_t>(), cap,
                                    res.count.data<int64_t>());
        } else {
          const int64_t total = static_cast<int64_t>(offsets.narrow(0, B * B, 1).item());
          res.triplets = Tensor::empty({total, 3}, DType::I64, dev);
          res.count = offsets.narrow(0, B * B, 1);
          if (total > 0) miner_fill_cuda<T>(A, offsets.data<int64_t>(), res.triplets.data<int64_t>());
        }
        if (mp.kind == MinerKind::KTriplets) {
          Tensor off2 = Tensor::empty({B + 1}, DType::I64, dev);
          exclusive_scan_cuda(B, npos.data<int64_t>(), off2.data<int64_t>());
          res.pair_count = off2.narrow(0, B, 1);
          // At most k pull pairs per anchor: a capacity of B k needs no read.
          const int64_t np = cap > 0 ? B * k : static_cast<int64_t>(res.pair_count.item());
          res.pairs = cap > 0 ? Tensor::zeros({np, 2}, DType::I64, dev) : Tensor::empty({np, 2}, DType::I64, dev);
          if (np > 0)
            k_pull_pairs_cuda(B, static_cast<int>(k), possel.data<int64_t>(), off2.data<int64_t>(),
                              res.pairs.data<int64_t>());
        }
      });
    } else {
      mine_on_cpu<T>(A, counts, offsets, cap, res);
    }
  });
  return res;
}

int64_t pair_capacity(const std::vector<int64_t>& class_sizes) {
  int64_t pos = 0;
  for (int64_t s : class_sizes) {
    MN_CHECK(s >= 0, "pair_capacity: a class size is negative (", s, ")");
    pos += s * (s - 1) / 2;
  }
  return 2 * pos;  // every positive pair and at most as many negatives
}

int64_t triplet_capacity(const MinerParams& p, const std::vector<int64_t>& class_sizes) {
  const char* op = "triplet_capacity";
  int64_t B = 0;
  for (int64_t s : class_sizes) {
    MN_CHECK(s >= 0, op, ": a class size is negative (", s, ")");
    B += s;
  }
  int64_t total = 0;
  for (int64_t s : class_sizes) {
    if (s < 2 || B - s < 1) continue;  // no positive or no negative: no triplet
    const int64_t pairs = p.unordered_positives ? s * (s - 1) / 2 : s * (s - 1);
    switch (p.kind) {
      case MinerKind::AllTriplets: total += pairs * (B - s); break;
      case MinerKind::BatchHard: total += s; break;  // one per anchor
      case MinerKind::SemiHard:
      case MinerKind::RandomViolating:
      case MinerKind::RandomSemiHard:
      case MinerKind::DistanceWeighted: total += pairs; break;  // at most one per (a, p)
      case MinerKind::KTriplets: {  // k positives x k negatives per anchor at most
        const int64_t kk = std::max(p.k, 1);
        total += s * std::min<int64_t>(kk, s - 1) * std::min<int64_t>(kk, B - s);
        break;
      }
    }
  }
  return total;
}

MinedPairs mine_pairs(const Tensor& dist, const Tensor& labels, PairNegatives neg,
                      Generator* gen, int64_t capacity) {
  const char* op = "mine_pairs";
  check_inputs(op, dist, labels);
  MN_CHECK(capacity >= 0, op, ": capacity must be >= 0, got ", capacity);
  if (capacity == 0) graph_unsafe("mine_pairs without a fixed capacity (its output size is read from the device)");
  const int64_t B = dist.size(0);
  Tensor d = dist.contiguous();
  Tensor lab = labels.to(DType::I64).contiguous().view({B});
  uint64_t seed = 0, offset = 0;
  if (neg == PairNegatives::Random) {
    Generator& g = gen ? *gen : default_generator();
    seed = g.seed();
    offset = g.advance(static_cast<uint64_t>(B) * B);
  }
  MinedPairs res;
  MN_DISPATCH_FLOAT(d.dtype(), op, [&] {
    using T = scalar_t;
    if (d.is_cuda()) {
      MN_CUDA_BRANCH(op, d.device(), d.dtype(), {
        Tensor ws = Tensor::empty({4 * B + 4}, DType::I64, d.device());
        res.workspace_bytes = static_cast<int64_t>(ws.nbytes());
        pair_mine_cuda<T>(B, d.data<T>(), lab.data<int64_t>(), neg, seed, offset,
                          ws.data<int64_t>(), &res.pairs, &res.is_pos, &res.num_pos, capacity, &res.count);
      });
    } else {
      std::vector<int64_t> pv, iv;
      res.num_pos = pair_mine_cpu<T>(B, d.data<T>(), lab.data<int64_t>(), neg, seed, offset, &pv,
                                     &iv);
      // The host candidate list holds one (key, index) per negative pair: O(B^2).
      res.workspace_bytes = static_cast<int64_t>(B * B / 2 * 16);
      const int64_t n = static_cast<int64_t>(iv.size());
      MN_CHECK(capacity == 0 || n <= capacity, op, ": ", n, " pairs mined from a batch of ", B,
               ", more than the fixed capacity ", capacity, " (give pair_capacity() of the batch's class sizes)");
      const int64_t rows = capacity > 0 ? capacity : n;
      // Written in place, not made from host data (the same on the CPU as a GPU step would do).
      res.pairs = Tensor::zeros({rows, 2}, DType::I64);
      res.is_pos = Tensor::zeros({rows}, DType::I64);
      std::copy(pv.begin(), pv.end(), res.pairs.data<int64_t>());
      std::copy(iv.begin(), iv.end(), res.is_pos.data<int64_t>());
      res.count = Tensor::empty({1}, DType::I64);
      res.count.data<int64_t>()[0] = n;
    }
  });
  return res;
}

}  // namespace mn::kernels
