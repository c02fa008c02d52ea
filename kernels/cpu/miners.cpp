// CPU miners: the pre-pass, count and fill passes of kernels/miners.h run the
// shared per-pair logic (kernels/miner_math.h) in parallel over anchors; the pair
// miner selects its negatives with nth_element on (key, linear index).
#include <algorithm>
#include <utility>

#include "kernels/miner_math.h"
#include "kernels/miners.h"
#include "runtime/parallel.h"

namespace mn::kernels {

template <typename T>
void miner_prepass_cpu(const MinerArgs<T>& A) {
  parallel_for(0, A.B, 8, [&](int64_t b, int64_t e) {
    for (int64_t a = b; a < e; ++a) miner_math::prepass_anchor(A, a);
  });
}

template <typename T>
void miner_count_cpu(const MinerArgs<T>& A, int64_t* counts) {
  parallel_for(0, A.B, 4, [&](int64_t b, int64_t e) {
    miner_math::CountEmit none;
    for (int64_t a = b; a < e; ++a)
      for (int64_t p = 0; p < A.B; ++p) counts[a * A.B + p] = miner_math::mine_pair(A, a, p, none);
  });
}

template <typename T>
void miner_fill_cpu(const MinerArgs<T>& A, const int64_t* offsets, int64_t* out) {
  parallel_for(0, A.B, 4, [&](int64_t b, int64_t e) {
    for (int64_t a = b; a < e; ++a)
      for (int64_t p = 0; p < A.B; ++p) {
        const int64_t o = offsets[a * A.B + p];
        if (offsets[a * A.B + p + 1] == o) continue;
        miner_math::WriteEmit w{out + 3 * o, a, p};
        miner_math::mine_pair(A, a, p, w);
      }
  });
}

template <typename T>
int64_t pair_mine_cpu(int64_t B, const T* dist, const int64_t* labels, PairNegatives neg,
                      uint64_t seed, uint64_t offset, std::vector<int64_t>* pairs,
                      std::vector<int64_t>* is_pos) {
  pairs->clear();
  is_pos->clear();
  std::vector<std::pair<uint64_t, int64_t>> cand;  // (key, i B + j) of negative pairs
  for (int64_t i = 0; i < B; ++i)
    for (int64_t j = i + 1; j < B; ++j) {
      if (labels[i] == labels[j]) {
        pairs->push_back(i);
        pairs->push_back(j);
        is_pos->push_back(1);
      } else {
        const uint64_t lin = static_cast<uint64_t>(i) * B + j;
        const uint64_t key = neg == PairNegatives::Random
                                 ? philox4x32_10(seed, offset + lin).v[0]
                                 : sortable_key(dist[lin]);
        cand.emplace_back(key, static_cast<int64_t>(lin));
      }
    }
  const int64_t P = static_cast<int64_t>(is_pos->size());
  const int64_t Q = std::min<int64_t>(P, static_cast<int64_t>(cand.size()));
  std::nth_element(cand.begin(), cand.begin() + Q, cand.end());
  std::vector<int64_t> sel;
  for (int64_t q = 0; q < Q; ++q) sel.push_back(cand[q].second);
  std::sort(sel.begin(), sel.end());
  for (int64_t lin : sel) {
    pairs->push_back(lin / B);
    pairs->push_back(lin % B);
    is_pos->push_back(0);
  }
  return P;
}

#define MN_INST(T)                                                                          \
  template void miner_prepass_cpu<T>(const MinerArgs<T>&);                                  \
  template void miner_count_cpu<T>(const MinerArgs<T>&, int64_t*);                          \
  template void miner_fill_cpu<T>(const MinerArgs<T>&, const int64_t*, int64_t*);          \
  template int64_t pair_mine_cpu<T>(int64_t, const T*, const int64_t*, PairNegatives,       \
                                    uint64_t, uint64_t, std::vector<int64_t>*,              \
                                    std::vector<int64_t>*);
MN_INST(float)
MN_INST(double)
#undef MN_INST

}  // namespace mn::kernels
