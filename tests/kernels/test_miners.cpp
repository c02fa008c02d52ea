// Miners vs brute-force references written here from the definitions (sets and
// order compared exactly on random batches with deliberate distance ties), CPU vs
// CUDA parity, and the O(B^2) workspace of a 1,024-embedding batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/miners.h"
#include "runtime/allocator.h"
#include "runtime/philox.h"
#include "tests/common/test_util.h"

using namespace mn;
using namespace mn::kernels;

namespace {

using Trip = std::array<int64_t, 3>;

struct Batch {
  int64_t B;
  std::vector<double> d;  // (B, B)
  std::vector<int64_t> lab;
  Tensor dist, labels;
};

// Random embeddings on the unit sphere, plain distances rounded to 1/8 so many
// ties occur (tie-breaking by index is part of what is tested).
Batch make_batch(int64_t B, int classes, uint64_t seed, bool round_ties = true) {
  Batch b;
  b.B = B;
  Tensor e = test::randn({B, 8}, DType::F64, Device::cpu(), seed);
  auto ev = e.to_vector<double>();
  for (int64_t i = 0; i < B; ++i) {
    double n = 0;
    for (int k = 0; k < 8; ++k) n += ev[i * 8 + k] * ev[i * 8 + k];
    for (int k = 0; k < 8; ++k) ev[i * 8 + k] /= std::sqrt(n);
  }
  b.d.resize(B * B);
  for (int64_t i = 0; i < B; ++i)
    for (int64_t j = 0; j < B; ++j) {
      double s = 0;
      for (int k = 0; k < 8; ++k) s += (ev[i * 8 + k] - ev[j * 8 + k]) * (ev[i * 8 + k] - ev[j * 8 + k]);
      double v = std::sqrt(s);
      b.d[i * B + j] = round_ties ? std::round(v * 8) / 8 : v;
    }
  std::mt19937_64 g(seed);
  for (int64_t i = 0; i < B; ++i) b.lab.push_back(static_cast<int64_t>(g() % classes));
  b.dist = Tensor::from_vector(b.d, {B, B});
  b.labels = Tensor::from_vector(b.lab, {B});
  return b;
}

std::vector<Trip> to_trips(const Tensor& t) {
  auto v = t.to_vector<int64_t>();
  std::vector<Trip> r;
  for (size_t i = 0; i + 2 < v.size() + 0 && i < v.size(); i += 3) r.push_back({v[i], v[i + 1], v[i + 2]});
  return r;
}

// ---- brute-force references ---------------------------------------------------
// Sorted (ascending d, or descending when far) list of candidates, ties by index.
std::vector<int64_t> ranked(const Batch& b, int64_t a, bool positives, bool far) {
  std::vector<int64_t> c;
  for (int64_t j = 0; j < b.B; ++j)
    if (j != a && (b.lab[j] == b.lab[a]) == positives) c.push_back(j);
  std::stable_sort(c.begin(), c.end(), [&](int64_t x, int64_t y) {
    double dx = b.d[a * b.B + x], dy = b.d[a * b.B + y];
    return far ? dx > dy : dx < dy;
  });
  return c;
}

std::vector<Trip> ref_triplets(const Batch& b, const MinerParams& p, uint64_t seed,
                               uint64_t offset) {
  std::vector<Trip> out;
  const int64_t B = b.B;
  const double m = p.margin;
  for (int64_t a = 0; a < B; ++a) {
    std::vector<int64_t> hardneg = ranked(b, a, false, false);
    std::vector<int64_t> hardpos = ranked(b, a, true, true);
    for (int64_t q = 0; q < B; ++q) {
      if (q == a || b.lab[q] != b.lab[a]) continue;
      const double dap = b.d[a * B + q];
      std::vector<int64_t> el;
      for (int64_t n = 0; n < B; ++n) {
        if (b.lab[n] == b.lab[a]) continue;
        const double dan = b.d[a * B + n];
        switch (p.kind) {
          case MinerKind::AllTriplets:
            if (!p.only_violating || dap - dan + m > 0) el.push_back(n);
            break;
          case MinerKind::RandomViolating:
            if (dap - dan + m > 0) el.push_back(n);
            break;
          case MinerKind::SemiHard:
          case MinerKind::RandomSemiHard:
            if (dan > dap && dan < dap + m) el.push_back(n);
            break;
          default: break;
        }
      }
      switch (p.kind) {
        case MinerKind::AllTriplets:
          for (int64_t n : el) out.push_back({a, q, n});
          break;
        case MinerKind::BatchHard:
          if (!hardneg.empty() && q == hardpos[0]) out.push_back({a, q, hardneg[0]});
          break;
        case MinerKind::SemiHard: {
          int64_t best = -1;
          for (int64_t n : el)
            if (best < 0 || b.d[a * B + n] < b.d[a * B + best]) best = n;
          if (best < 0 && p.fallback == SemiHardFallback::Hardest && !hardneg.empty())
            best = hardneg[0];
          if (best >= 0) out.push_back({a, q, best});
          break;
        }
        case MinerKind::RandomViolating:
        case MinerKind::RandomSemiHard:
          if (!el.empty()) {
            uint32_t u = philox4x32_10(seed, offset + a * B + q).v[0];
            out.push_back({a, q, el[(static_cast<uint64_t>(u) * el.size()) >> 32]});
          }
          break;
        default: break;
      }
    }
  }
  return out;
}

std::vector<Trip> ref_k(const Batch& b, const MinerParams& p, uint64_t seed, uint64_t offset,
                        std::vector<std::array<int64_t, 2>>* pulls) {
  const int64_t B = b.B;
  const int k = p.k;
  const bool pfar = p.kminer == KMiner::BH || p.kminer == KMiner::HPHN || p.kminer == KMiner::HPEN;
  const bool nfar = p.kminer == KMiner::EPEN || p.kminer == KMiner::HPEN;
  std::vector<Trip> out;
  for (int64_t a = 0; a < B; ++a) {
    auto pos = ranked(b, a, true, pfar);
    if (static_cast<int>(pos.size()) > k) pos.resize(k);
    for (int64_t q : pos) pulls->push_back({a, q});
    std::sort(pos.begin(), pos.end());  // emitted in p order
    auto negs = ranked(b, a, false, nfar);
    for (int64_t q : pos) {
      std::vector<int64_t> chosen;
      if (p.kminer == KMiner::BSH) {
        for (int64_t n : ranked(b, a, false, false))
          if (b.d[a * B + n] > b.d[a * B + q] && static_cast<int>(chosen.size()) < k) chosen.push_back(n);
      } else if (p.kminer == KMiner::NS) {
        // Gumbel-top-k on log min(lambda, 1/q(D)), std::log here.
        std::vector<std::pair<double, int64_t>> keys;
        const double dd = p.dw_dim;
        for (int64_t n : negs) {
          double D = std::min(std::max(b.d[a * B + n], p.dw_cutoff), 1.9999);
          double logq = (dd - 2) * std::log(D) + (dd - 3) / 2 * std::log(1 - D * D / 4);
          double lw = std::min(std::log(p.dw_lambda), -logq);
          Philox4 r = philox4x32_10(seed, offset + (static_cast<uint64_t>(a) * B + q) * B + n);
          uint64_t b52 = philox_bits53(r.v[0], r.v[1]) >> 1;
          double u = (2.0 * b52 + 1) / 9007199254740992.0;
          keys.push_back({-(lw - std::log(-std::log(u))), n});
        }
        std::sort(keys.begin(), keys.end());
        for (size_t i = 0; i < keys.size() && static_cast<int>(i) < k; ++i) chosen.push_back(keys[i].second);
      } else {
        for (size_t i = 0; i < negs.size() && static_cast<int>(i) < k; ++i) chosen.push_back(negs[i]);
      }
      for (int64_t n : chosen) out.push_back({a, q, n});
    }
  }
  return out;
}

}  // namespace

TEST(Miners, TripletMinersMatchBruteForce) {
  for (uint64_t seed : {1, 2, 3}) {
    Batch b = make_batch(26, 4, seed);
    for (int kind = 0; kind <= 4; ++kind)
      for (int variant = 0; variant < 2; ++variant) {
        MinerParams p;
        p.kind = static_cast<MinerKind>(kind);
        p.margin = 0.3;
        p.only_violating = variant == 1;
        p.fallback = variant ? SemiHardFallback::Hardest : SemiHardFallback::Drop;
        Generator g(seed * 11, 5);
        const uint64_t off = g.offset();
        MinedTriplets m = mine_triplets(b.dist, b.labels, p, &g);
        SCOPED_TRACE("kind " + std::to_string(kind) + " variant " + std::to_string(variant));
        auto ref = ref_triplets(b, p, seed * 11, off);
        EXPECT_EQ(to_trips(m.triplets), ref);
        if (kind != 0) {
          EXPECT_GT(ref.size(), 0u);
        }
      }
  }
}

TEST(Miners, KMinersMatchBruteForce) {
  for (uint64_t seed : {4, 5}) {
    Batch b = make_batch(30, 3, seed, /*round_ties=*/seed == 4);
    for (int km = 0; km <= 6; ++km) {
      MinerParams p;
      p.kind = MinerKind::KTriplets;
      p.kminer = static_cast<KMiner>(km);
      p.k = 3;
      p.dw_dim = 8;
      Generator g(seed, 0);
      MinedTriplets m = mine_triplets(b.dist, b.labels, p, &g);
      std::vector<std::array<int64_t, 2>> pulls;
      auto ref = ref_k(b, p, seed, 0, &pulls);
      SCOPED_TRACE("kminer " + std::to_string(km));
      EXPECT_EQ(to_trips(m.triplets), ref);
      auto pv = m.pairs.to_vector<int64_t>();
      ASSERT_EQ(pv.size(), 2 * pulls.size());
      for (size_t i = 0; i < pulls.size(); ++i) {
        EXPECT_EQ(pv[2 * i], pulls[i][0]);
        EXPECT_EQ(pv[2 * i + 1], pulls[i][1]);
      }
    }
  }
}

TEST(Miners, PairMinersMatchBruteForce) {
  Batch b = make_batch(28, 5, 7);
  for (PairNegatives neg : {PairNegatives::Random, PairNegatives::Hardest}) {
    Generator g(99, 3);
    const uint64_t off = g.offset();
    MinedPairs m = mine_pairs(b.dist, b.labels, neg, &g);
    std::vector<int64_t> ref, refpos;
    std::vector<std::tuple<double, int64_t, int64_t>> cand;
    for (int64_t i = 0; i < b.B; ++i)
      for (int64_t j = i + 1; j < b.B; ++j) {
        if (b.lab[i] == b.lab[j]) {
          ref.insert(ref.end(), {i, j});
          refpos.push_back(1);
        } else {
          double key = neg == PairNegatives::Random
                           ? static_cast<double>(philox4x32_10(99, off + i * b.B + j).v[0])
                           : b.d[i * b.B + j];
          cand.emplace_back(key, i, j);
        }
      }
    const size_t P = refpos.size();
    std::sort(cand.begin(), cand.end());
    cand.resize(std::min(P, cand.size()));
    std::sort(cand.begin(), cand.end(), [](auto& x, auto& y) {
      return std::make_pair(std::get<1>(x), std::get<2>(x)) < std::make_pair(std::get<1>(y), std::get<2>(y));
    });
    for (auto& c : cand) {
      ref.insert(ref.end(), {std::get<1>(c), std::get<2>(c)});
      refpos.push_back(0);
    }
    EXPECT_EQ(m.num_pos, static_cast<int64_t>(P));
    EXPECT_EQ(m.pairs.to_vector<int64_t>(), ref);
    EXPECT_EQ(m.is_pos.to_vector<int64_t>(), refpos);
  }
}

TEST(Miners, DistanceHelperMatchesLoop) {
  Tensor e = test::randn({9, 5}, DType::F64, Device::cpu(), 3);
  auto ev = e.to_vector<double>();
  auto d = pairwise_distance_matrix(e, false).to_vector<double>();
  for (int i = 0; i < 9; ++i)
    for (int j = 0; j < 9; ++j) {
      double s = 0;
      for (int k = 0; k < 5; ++k) s += (ev[i * 5 + k] - ev[j * 5 + k]) * (ev[i * 5 + k] - ev[j * 5 + k]);
      // Gram form ||x||^2 + ||y||^2 - 2 x.y cancels: ~1e-15 absolute on squared values.
      EXPECT_NEAR(d[i * 9 + j], std::sqrt(s), 1e-7);
    }
}

TEST(Miners, Batch1024WorkspaceIsQuadratic) {
  const int64_t B = 1024;
  Batch b = make_batch(B, 64, 8, false);
  for (int kind : {1, 2, 3}) {
    MinerParams p;
    p.kind = static_cast<MinerKind>(kind);
    Generator g(1, 0);
    MinedTriplets m = mine_triplets(b.dist, b.labels, p, &g);
    // counts + offsets (2 B^2 int64) + O(B) lists: <= 17 B^2 bytes, far below B^3.
    EXPECT_LE(m.workspace_bytes, 17 * B * B);
    EXPECT_GT(m.triplets.size(0), 0);
  }
  MinerParams p;
  p.kind = MinerKind::KTriplets;
  p.kminer = KMiner::BH;
  p.k = 4;
  MinedTriplets m = mine_triplets(b.dist, b.labels, p, nullptr);
  EXPECT_LE(m.workspace_bytes, 17 * B * B + 64 * B * 4);
  if (cuda_available()) {
    cuda::empty_cache();
    cuda::reset_peak_stats();
    Tensor dg = b.dist.to(DType::F32).cuda();
    size_t base = cuda::allocator_stats().bytes_in_use;
    MinedTriplets mg = mine_triplets(dg, b.labels.cuda(), p, nullptr);
    size_t peak = cuda::allocator_stats().peak_bytes_in_use - base;
    EXPECT_LE(peak, static_cast<size_t>(20 * B * B) + mg.triplets.nbytes() + mg.pairs.nbytes());
  }
}

TEST(Miners, CudaMatchesCpu) {
  MN_SKIP_IF_NO_CUDA();
  for (DType dt : {DType::F32, DType::F64}) {
    Batch b = make_batch(70, 6, 9);
    Tensor dc = b.dist.to(dt), dg = dc.cuda(), lg = b.labels.cuda();
    for (int kind = 0; kind <= 5; ++kind)
      for (int km = 0; km <= (kind == 5 ? 6 : 0); ++km) {
        MinerParams p;
        p.kind = static_cast<MinerKind>(kind);
        p.kminer = static_cast<KMiner>(km);
        p.only_violating = true;
        p.dw_dim = 8;
        Generator g1(5, 0), g2(5, 0);
        MinedTriplets c = mine_triplets(dc, b.labels, p, &g1);
        MinedTriplets g = mine_triplets(dg, lg, p, &g2);
        EXPECT_EQ(c.triplets.to_vector<int64_t>(), g.triplets.to_vector<int64_t>())
            << "kind " << kind << " k " << km;
        if (kind == 5) {
          EXPECT_EQ(c.pairs.to_vector<int64_t>(), g.pairs.to_vector<int64_t>());
        }
      }
    for (PairNegatives neg : {PairNegatives::Random, PairNegatives::Hardest}) {
      Generator g1(6, 0), g2(6, 0);
      MinedPairs c = mine_pairs(dc, b.labels, neg, &g1);
      MinedPairs g = mine_pairs(dg, lg, neg, &g2);
      EXPECT_EQ(c.pairs.to_vector<int64_t>(), g.pairs.to_vector<int64_t>());
      EXPECT_EQ(c.is_pos.to_vector<int64_t>(), g.is_pos.to_vector<int64_t>());
    }
    Tensor e = test::randn({33, 7}, dt, Device::cpu(), 2);
    // float32 GEMM sums in another order: ~1e-5 absolute on O(1) distances.
    EXPECT_TRUE(test::all_close(pairwise_distance_matrix(e, true),
                                pairwise_distance_matrix(e.cuda(), true), 1e-4, 1e-4));
  }
}

// MinerParams::capacity: a fixed-size output, the mined rows first (the same
// rows as without a capacity), the rest (0, 0, 0), the count beside them; the
// capacity of triplet_capacity() always suffices, and is exact for AllTriplets.
TEST(Miners, FixedCapacityHoldsTheSameTripletsAndTheirCount) {
  for (uint64_t seed : {1, 2, 3}) {
    Batch b = make_batch(26, 4, seed);
    std::vector<int64_t> sizes(4, 0);
    for (int64_t l : b.lab) ++sizes[static_cast<size_t>(l)];
    for (int kind = 0; kind <= 4; ++kind)
      for (int variant = 0; variant < 3; ++variant) {
        MinerParams p;
        p.kind = static_cast<MinerKind>(kind);
        p.margin = 0.3;
        p.only_violating = variant == 1;
        p.unordered_positives = variant == 2;
        p.fallback = variant ? SemiHardFallback::Hardest : SemiHardFallback::Drop;
        SCOPED_TRACE("seed " + std::to_string(seed) + " kind " + std::to_string(kind) + " variant " +
                     std::to_string(variant));
        Generator g1(seed, 3), g2(seed, 3);
        MinedTriplets exact = mine_triplets(b.dist, b.labels, p, &g1);
        const int64_t T = exact.triplets.size(0);
        ASSERT_EQ(exact.count.to_vector<int64_t>(), std::vector<int64_t>{T});
        p.capacity = triplet_capacity(p, sizes);
        ASSERT_GE(p.capacity, T);
        if (kind == 0 && variant != 1) {
          EXPECT_EQ(p.capacity, T);
        }
        MinedTriplets capped = mine_triplets(b.dist, b.labels, p, &g2);
        ASSERT_EQ(capped.triplets.size(0), p.capacity);
        EXPECT_EQ(capped.count.to_vector<int64_t>(), std::vector<int64_t>{T});
        const auto all = capped.triplets.to_vector<int64_t>();
        EXPECT_EQ(std::vector<int64_t>(all.begin(), all.begin() + 3 * T), exact.triplets.to_vector<int64_t>());
        EXPECT_TRUE(std::all_of(all.begin() + 3 * T, all.end(), [](int64_t v) { return v == 0; }));
        EXPECT_EQ(g1.offset(), g2.offset());  // the same draws
      }
  }
  // Too small a capacity is refused with the numbers.
  Batch b = make_batch(12, 3, 4);
  MinerParams p;
  p.capacity = 5;
  try {
    mine_triplets(b.dist, b.labels, p);
    FAIL() << "a capacity of 5 for every triplet of 12 embeddings was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than the fixed capacity 5"), std::string::npos) << e.what();
  }
  p.kind = MinerKind::KTriplets;
  EXPECT_THROW(mine_triplets(b.dist, b.labels, p), Error);  // 5 < the k-miner's triplets too
}

// The k-miners with a capacity: the same triplets and pull pairs first, the
// pairs padded to B k, both counts beside them.
TEST(Miners, KMinersFixedCapacityHoldTheSameTuples) {
  Batch b = make_batch(24, 4, 6);
  std::vector<int64_t> sizes(4, 0);
  for (int64_t l : b.lab) ++sizes[static_cast<size_t>(l)];
  for (int km = 0; km <= 6; ++km) {
    SCOPED_TRACE("k-miner " + std::to_string(km));
    MinerParams p;
    p.kind = MinerKind::KTriplets;
    p.kminer = static_cast<KMiner>(km);
    p.k = 3;
    p.dw_dim = 8;
    Generator g1(2, 0), g2(2, 0);
    MinedTriplets exact = mine_triplets(b.dist, b.labels, p, &g1);
    p.capacity = triplet_capacity(p, sizes);
    MinedTriplets capped = mine_triplets(b.dist, b.labels, p, &g2);
    const int64_t T = exact.triplets.size(0), P = exact.pairs.size(0);
    ASSERT_GE(p.capacity, T);
    EXPECT_EQ(capped.count.to_vector<int64_t>(), std::vector<int64_t>{T});
    EXPECT_EQ(capped.pair_count.to_vector<int64_t>(), std::vector<int64_t>{P});
    ASSERT_EQ(capped.pairs.size(0), 24 * 3);
    const auto t = capped.triplets.to_vector<int64_t>(), pr = capped.pairs.to_vector<int64_t>();
    EXPECT_EQ(std::vector<int64_t>(t.begin(), t.begin() + 3 * T), exact.triplets.to_vector<int64_t>());
    EXPECT_EQ(std::vector<int64_t>(pr.begin(), pr.begin() + 2 * P), exact.pairs.to_vector<int64_t>());
    EXPECT_TRUE(std::all_of(pr.begin() + 2 * P, pr.end(), [](int64_t v) { return v == 0; }));
  }
}

TEST(Miners, CudaFixedCapacityMatchesCpu) {
  MN_SKIP_IF_NO_CUDA();
  Batch b = make_batch(70, 6, 9);
  std::vector<int64_t> sizes(6, 0);
  for (int64_t l : b.lab) ++sizes[static_cast<size_t>(l)];
  Tensor dg = b.dist.cuda(), lg = b.labels.cuda();
  for (int kind = 0; kind <= 5; ++kind) {
    MinerParams p;
    p.kind = static_cast<MinerKind>(kind);
    p.only_violating = true;
    p.dw_dim = 8;
    p.capacity = triplet_capacity(p, sizes);
    Generator g1(5, 0), g2(5, 0);
    const TransferStats before = transfer_stats();
    MinedTriplets g = mine_triplets(dg, lg, p, &g2);
    EXPECT_EQ(transfer_stats().d2h_copies, before.d2h_copies) << "kind " << kind << ": the miner read the device";
    MinedTriplets c = mine_triplets(b.dist, b.labels, p, &g1);
    EXPECT_EQ(c.triplets.to_vector<int64_t>(), g.triplets.to_vector<int64_t>()) << "kind " << kind;
    EXPECT_EQ(c.count.to_vector<int64_t>(), g.count.to_vector<int64_t>()) << "kind " << kind;
    if (kind == 5) {
      EXPECT_EQ(c.pairs.to_vector<int64_t>(), g.pairs.to_vector<int64_t>());
      EXPECT_EQ(c.pair_count.to_vector<int64_t>(), g.pair_count.to_vector<int64_t>());
    }
  }
  // An overflow on the device is reported at the next synchronisation.
  MinerParams p;
  p.capacity = 5;
  MinedTriplets g = mine_triplets(dg, lg, p);
  try {
    (void)g.count.to_vector<int64_t>();
    FAIL() << "the overflow of a capacity of 5 was not reported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fixed capacity"), std::string::npos) << e.what();
  }
}

// mine_pairs with a capacity: the exact pairs first, then (0, 0) rows with
// is_pos 0, the count beside them; pair_capacity() always suffices; CUDA
// mines the same without reading the device.
static void pair_capacity_check(bool gpu) {
  for (uint64_t seed : {1, 2}) {
    Batch b = make_batch(30, 5, seed);
    std::vector<int64_t> sizes(5, 0);
    for (int64_t l : b.lab) ++sizes[static_cast<size_t>(l)];
    const int64_t cap = pair_capacity(sizes);
    for (PairNegatives neg : {PairNegatives::Random, PairNegatives::Hardest}) {
      Generator g1(seed, 0), g2(seed, 0);
      MinedPairs exact = mine_pairs(b.dist, b.labels, neg, &g1);
      MinedPairs capped = mine_pairs(b.dist, b.labels, neg, &g2, cap);
      const int64_t n = exact.pairs.size(0);
      ASSERT_LE(n, cap);
      EXPECT_EQ(exact.count.to_vector<int64_t>(), std::vector<int64_t>{n});
      EXPECT_EQ(capped.count.to_vector<int64_t>(), std::vector<int64_t>{n});
      ASSERT_EQ(capped.pairs.size(0), cap);
      const auto pv = capped.pairs.to_vector<int64_t>(), iv = capped.is_pos.to_vector<int64_t>();
      EXPECT_EQ(std::vector<int64_t>(pv.begin(), pv.begin() + 2 * n), exact.pairs.to_vector<int64_t>());
      EXPECT_EQ(std::vector<int64_t>(iv.begin(), iv.begin() + n), exact.is_pos.to_vector<int64_t>());
      EXPECT_TRUE(std::all_of(pv.begin() + 2 * n, pv.end(), [](int64_t v) { return v == 0; }));
      EXPECT_TRUE(std::all_of(iv.begin() + n, iv.end(), [](int64_t v) { return v == 0; }));
      if (gpu) {
        Generator g3(seed, 0);
        const TransferStats before = transfer_stats();
        MinedPairs gpu = mine_pairs(b.dist.cuda(), b.labels.cuda(), neg, &g3, cap);
        EXPECT_EQ(transfer_stats().d2h_copies, before.d2h_copies);
        EXPECT_EQ(gpu.pairs.to_vector<int64_t>(), pv);
        EXPECT_EQ(gpu.is_pos.to_vector<int64_t>(), iv);
        EXPECT_EQ(gpu.count.to_vector<int64_t>(), std::vector<int64_t>{n});
      }
    }
  }
}

TEST(Miners, PairMinerFixedCapacityHoldsTheSamePairs) {
  pair_capacity_check(false);
  Batch b = make_batch(12, 2, 3);
  EXPECT_THROW(mine_pairs(b.dist, b.labels, PairNegatives::Hardest, nullptr, 3), Error);
}

TEST(Miners, CudaPairMinerFixedCapacityMatchesCpuWithoutReadingTheDevice) {
  MN_SKIP_IF_NO_CUDA();
  pair_capacity_check(true);
}
