// Batch-all triplet loss at pytorch-metric-learning's scale: B = 1024
// embeddings of 128 dimensions, 64 classes x 16 (15,482,880 triplets), margin
// 0.05, mean over the non-zero terms (pml's TripletMarginLoss with its
// all-triplets indices and AvgNonZeroReducer), plain L2. One iteration =
// distance matrix, loss, backward to the embeddings.
//
//   BM_BatchAll/fused    the fused loss (kernels/batch_all.h, nn "batch-all")
//   BM_BatchAll/listed   the all-triplets miner's (T, 3) list + the margin-l2
//                        triplet loss over it (what a study did before)
// MN_NUM_THREADS threads (2 here). Reference: bench/references/batch_all_pml_torch.py
// (pml's computation in PyTorch, same sizes), run in the same session:
//   /usr/bin/python3 bench/references/batch_all_pml_torch.py --threads 2
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>

#include "kernels/miners.h"
#include "nn/losses/loss.h"
#include "nn/losses/losses.h"
#include "runtime/parallel.h"
#include "runtime/rng.h"

using namespace mn;

namespace {

constexpr int64_t kB = 1024, kD = 128, kK = 16;

void BM_BatchAll(benchmark::State& st, bool fused) {
  Tensor x = Tensor::empty({kB, kD}, DType::F32);
  Generator g(3);
  normal_(x, 0.0, 1.0, g);
  std::vector<int64_t> y;
  for (int64_t i = 0; i < kB; ++i) y.push_back(i / kK);
  Tensor labels = Tensor::from_vector(y, {kB});
  nn::LossConfig lc;
  lc.margin = 0.05;
  lc.reduction = kernels::Reduction::MeanNonZero;
  auto loss = nn::make_loss("batch-all", lc);
  double total = 0, value = 0;
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    ag::Variable e(x, /*requires_grad=*/true);
    nn::LossOutput out;
    if (fused) {
      out = loss->compute(e, labels, nn::Mined{});
    } else {
      kernels::MinerParams mp;
      mp.kind = kernels::MinerKind::AllTriplets;
      auto m = kernels::mine_triplets(kernels::pairwise_distance_matrix(x, false), labels, mp);
      nn::TripletLossOptions to;
      to.kind = nn::TripletKind::MarginL2;
      to.margin = 0.05;
      to.reduction = kernels::Reduction::MeanNonZero;
      out = nn::triplet_loss(e, m.triplets, to);
    }
    out.loss.backward();
    value = out.host_stats().loss;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    st.SetIterationTime(s);
    total += s;
  }
  st.counters["ms_per_iteration"] = 1e3 * total / static_cast<double>(st.iterations());
  st.counters["loss"] = value;
  st.counters["threads"] = num_threads();
  st.SetLabel(fused ? "fused batch-all, B 1024 x 128, 15.5 M triplets" : "miner list + margin-l2 loss");
}

}  // namespace

BENCHMARK_CAPTURE(BM_BatchAll, fused, true)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(3.0);
BENCHMARK_CAPTURE(BM_BatchAll, listed, false)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);

BENCHMARK_MAIN();
