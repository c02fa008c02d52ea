// One training epoch of the informed-pair-selection study's siamese MLP at
// batch 16 on the CPU (experiments/pair_selection/siamese_mlp.h): 600 inputs of
// 784 values (MNIST-like, ~19 % non-zero), 1,200 pairs (|P| = 2|X|), shuffled,
// 75 steps of 16 pairs through 784-300-300-300 (ReLU, dropout 0.2), Hadsell's
// contrastive loss (margin 1, mean), SGD lr 1e-3 momentum 0.8.
//
//   BM_PairSelectionEpochCpu   steady-clock manual time per epoch with
//                              MN_NUM_THREADS threads for the GEMMs (2 on the
//                              shared machine; the study itself runs one run
//                              per thread, each single-threaded).
// Counters: pairs_per_s (1,200 / mean epoch time), best_pairs_per_s (fastest
// epoch; the machine is shared and noisy), ms_per_step.
// Before timing, one epoch is checked: the loss is finite and the weights moved.
// Reference: bench/references/pair_selection_epoch.py (the same epoch in PyTorch),
//   run with GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736
//   /usr/bin/python3 bench/references/pair_selection_epoch.py --threads 2
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "experiments/pair_selection/pairs.h"
#include "experiments/pair_selection/siamese_mlp.h"
#include "runtime/rng.h"

#include "bench/bench_util.h"

using namespace mn;
using namespace mn::pairsel;

namespace {

void BM_PairSelectionEpochCpu(benchmark::State& state) {
  bench::guard(state, [&] {
    const int64_t n = 600, d = 784;
    Generator g(11, 0);
    std::vector<float> x(static_cast<size_t>(n * d));
    for (float& v : x) {
      const double u = g.next_uniform(), w = g.next_uniform();
      v = u < 0.19 ? static_cast<float>(1.0 - w) : 0.0f;
    }
    std::vector<int32_t> y(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<int32_t>(i % 10);
    std::vector<Pair> pairs = random_pairs(y, g);
    MlpConfig cfg;  // the study's defaults: 784-300-300-300, batch 16
    SiameseMlp net(cfg, 1);
    auto shuffle = [&] {
      for (size_t i = pairs.size(); i > 1; --i)
        std::swap(pairs[i - 1], pairs[static_cast<size_t>(g.next_int(0, static_cast<int64_t>(i)))]);
    };
    const std::vector<float> w0 = net.weight(0);
    shuffle();
    const double loss0 = net.train_epoch(x.data(), n, pairs);
    if (!std::isfinite(loss0)) return state.SkipWithError("non-finite loss");
    if (net.weight(0) == w0) return state.SkipWithError("the SGD steps did not change the weights");
    double best = 1e30, total = 0.0;
    int64_t epochs = 0;
    for (auto _ : state) {
      shuffle();
      const auto t0 = std::chrono::steady_clock::now();
      benchmark::DoNotOptimize(net.train_epoch(x.data(), n, pairs));
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      state.SetIterationTime(s);
      best = std::min(best, s);
      total += s;
      ++epochs;
    }
    const double P = static_cast<double>(pairs.size());
    state.counters["pairs_per_s"] = P * epochs / total;
    state.counters["best_pairs_per_s"] = P / best;
    state.counters["ms_per_step"] = 1e3 * total / epochs / std::ceil(P / cfg.batch);
    state.counters["first_loss"] = loss0;
  });
}
BENCHMARK(BM_PairSelectionEpochCpu)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(3.0);

}  // namespace

BENCHMARK_MAIN();
