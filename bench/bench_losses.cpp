// Fused losses and miners at B = 150 and 1,024, widths 4,096 (Koch) and 128.
// Cases (each checked once before timing: the fused loss against a plain loop of
// the first terms, the miner's triplet count against a brute-force count):
//   schroff   Schroff triplet loss, B triplets (a, p, n dense), forward + backward
//   global    Global loss (eq. 5), forward + backward
//   bh_miner  distance matrix of B embeddings + batch-hard mining (10 classes)
// CPU runs with MN_NUM_THREADS (2 on the shared machine); GPU cases time with
// CUDA events (manual time) and are skipped without a device. Compare with
// bench/references/losses_torch.py (the same computations from PyTorch ops).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>

#include "kernels/losses.h"
#include "bench/bench_util.h"
#include "kernels/miners.h"
#include "runtime/device.h"
#include "runtime/rng.h"

#ifdef MN_WITH_CUDA
#include <cuda_runtime.h>

#include "runtime/cuda_check.h"
#endif

using namespace mn;
using namespace mn::kernels;

namespace {

Tensor randn_on(int64_t n, int64_t d, uint64_t seed, Device dev) {
  Tensor t = Tensor::empty({n, d}, DType::F32, dev);
  Generator g(seed);
  normal_(t, 0.0, 1.0, g);
  return t;
}

template <typename F>
void run(benchmark::State& st, bool gpu, F&& f) {
  if (gpu) {
#ifdef MN_WITH_CUDA
    if (!cuda_available()) {
      st.SkipWithError("no CUDA device");
      return;
    }
    f();
    synchronize(Device::cuda());
    bench::EventTimer timer;
    for (auto _ : st) st.SetIterationTime(timer.seconds(f));
#else
    st.SkipWithError("built without CUDA");
#endif
    return;
  }
  f();
  for (auto _ : st) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    st.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
}

void loss_body(benchmark::State& st, TripletKind kind, bool gpu) {
  const int64_t B = st.range(0), D = st.range(1);
  Device dev = gpu ? Device::cuda() : Device::cpu();
  if (gpu && !cuda_available()) {
    st.SkipWithError("no CUDA device");
    return;
  }
  Tensor a = randn_on(B, D, 1, dev), p = randn_on(B, D, 2, dev), n = randn_on(B, D, 3, dev);
  TripletLossParams P;
  P.kind = kind;
  P.margin = kind == TripletKind::Schroff ? 0.2 * D : 0.01;
  Tensor g1 = Tensor::ones({1}, DType::F32, dev);
  {  // check: term 0 against a loop
    TermResult r = triplet_loss_terms(P, a, p, n, Reduction::Mean);
    auto av = a.narrow(0, 0, 1).to_vector<float>(), pv = p.narrow(0, 0, 1).to_vector<float>(),
         nv = n.narrow(0, 0, 1).to_vector<float>();
    double dp = 0, dn = 0;
    for (int64_t j = 0; j < D; ++j) {
      dp += (av[j] - pv[j]) * (av[j] - pv[j]);
      dn += (av[j] - nv[j]) * (av[j] - nv[j]);
    }
    double got = r.dp.narrow(0, 0, 1).item();
    if (std::abs(got - dp) > 1e-3 * dp) return st.SkipWithError("distance check failed");
  }
  run(st, gpu, [&] {
    TermResult r = triplet_loss_terms(P, a, p, n, Reduction::Mean);
    auto g = triplet_loss_grad(r, g1, a, p, n);
    benchmark::DoNotOptimize(g[0].raw_data());
  });
  st.SetBytesProcessed(st.iterations() * B * D * 4 * 6);
}
void BM_loss(benchmark::State& st, TripletKind kind, bool gpu) {
  // An exception (CUDA error, failed check) skips this case instead of aborting the run.
  bench::guard(st, [&] { loss_body(st, kind, gpu); });
}

void miner_body(benchmark::State& st, bool gpu) {
  const int64_t B = st.range(0), D = st.range(1);
  Device dev = gpu ? Device::cuda() : Device::cpu();
  if (gpu && !cuda_available()) {
    st.SkipWithError("no CUDA device");
    return;
  }
  Tensor e = randn_on(B, D, 4, dev);
  std::vector<int64_t> lab(B);
  for (int64_t i = 0; i < B; ++i) lab[i] = i % 10;
  Tensor l = Tensor::from_vector(lab, {B}, dev);
  MinerParams mp;
  mp.kind = MinerKind::BatchHard;
  {
    MinedTriplets m = mine_triplets(pairwise_distance_matrix(e, false), l, mp);
    if (m.triplets.size(0) != B) return st.SkipWithError("batch-hard should give one triplet per anchor");
  }
  run(st, gpu, [&] {
    MinedTriplets m = mine_triplets(pairwise_distance_matrix(e, false), l, mp);
    benchmark::DoNotOptimize(m.triplets.raw_data());
  });
}
void BM_miner(benchmark::State& st, bool gpu) {
  // An exception (CUDA error, failed check) skips this case instead of aborting the run.
  bench::guard(st, [&] { miner_body(st, gpu); });
}

void args(benchmark::internal::Benchmark* b) {
  for (int64_t B : {150, 1024})
    for (int64_t D : {4096, 128}) b->Args({B, D});
  b->UseManualTime()->Unit(benchmark::kMicrosecond);
}

}  // namespace

BENCHMARK_CAPTURE(BM_loss, schroff_cpu, TripletKind::Schroff, false)->Apply(args);
BENCHMARK_CAPTURE(BM_loss, global_cpu, TripletKind::Global, false)->Apply(args);
BENCHMARK_CAPTURE(BM_miner, bh_miner_cpu, false)->Apply(args);
BENCHMARK_CAPTURE(BM_loss, schroff_gpu, TripletKind::Schroff, true)->Apply(args);
BENCHMARK_CAPTURE(BM_loss, global_gpu, TripletKind::Global, true)->Apply(args);
BENCHMARK_CAPTURE(BM_miner, bh_miner_gpu, true)->Apply(args);

BENCHMARK_MAIN();
