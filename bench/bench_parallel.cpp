// The cost of handing work to the thread pool (runtime/parallel.cpp): one
// parallel_for region over two near-empty chunks, back to back, as the small
// kernels of a training step issue them.
//   BM_ParallelForHandoff/<threads>   wall time per region (1 thread: the serial
//                                     call, the floor); counter regions_per_s
//   BM_ParallelForSum/<threads>       a 150 x 128 float sum split in two chunks
//                                     (the size of a loss at the study's batch):
//                                     two threads should not be slower than one
// Each region's result is checked (every chunk ran once). On the shared 2-core
// machine the wake-up of a descheduled worker dominates: run it when quiet and
// compare with `uptime`.
#include <benchmark/benchmark.h>

#include <atomic>
#include <vector>

#include "runtime/parallel.h"

namespace {

void BM_ParallelForHandoff(benchmark::State& st) {
  const int saved = mn::num_threads();
  mn::set_num_threads(static_cast<int>(st.range(0)));
  std::atomic<int64_t> hits{0};
  for (auto _ : st) {
    mn::parallel_for(0, 2, 1, [&](int64_t b, int64_t e) { hits += e - b; });
  }
  if (hits.load() != 2 * static_cast<int64_t>(st.iterations()))
    st.SkipWithError("a chunk was lost or run twice");
  st.counters["regions_per_s"] =
      benchmark::Counter(static_cast<double>(st.iterations()), benchmark::Counter::kIsRate);
  mn::set_num_threads(saved);
}

void BM_ParallelForSum(benchmark::State& st) {
  const int saved = mn::num_threads();
  mn::set_num_threads(static_cast<int>(st.range(0)));
  const int64_t n = 150 * 128;
  std::vector<float> x(n, 0.5f);
  float parts[2] = {0, 0};
  for (auto _ : st) {
    mn::parallel_for(0, 2, 1, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        float acc = 0;
        for (int64_t i = c * n / 2; i < (c + 1) * n / 2; ++i) acc += x[i];
        parts[c] = acc;
      }
    });
    benchmark::DoNotOptimize(parts);
  }
  if (parts[0] + parts[1] != 0.5f * n) st.SkipWithError("wrong sum");
  mn::set_num_threads(saved);
}

}  // namespace

BENCHMARK(BM_ParallelForHandoff)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_ParallelForSum)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK_MAIN();
