// Elementwise and reduction bandwidth: add, mul, exp and sum over 1M and 16M
// floats on the CPU (all mn::num_threads() threads) and, when a device exists,
// on the GPU, next to the bandwidth references measured in the same run: a CPU
// std::memcpy and a device-to-device cudaMemcpy of the same number of floats.
// Counter GB/s = bytes read + written per call / time (add, mul: 12 B/elem;
// exp: 8 B/elem; sum: 4 B/elem; copies: 8 B/elem). 16M floats (64 MiB per
// buffer) exceed every cache, 1M floats (4 MiB) sit in the GPU's L2 and partly in
// the CPU's caches, so 1M numbers are cache-assisted by design.
// Each benchmark checks its result against a scalar loop before timing; GPU
// timings use CUDA events (manual time). GPU benchmarks skip with a message when
// no device is present. Run:
//   bench_elementwise --benchmark_out=bench/results/<date>-elementwise.json --benchmark_out_format=json
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/elementwise.h"
#include "bench/bench_util.h"
#include "kernels/reduce.h"
#include "runtime/allocator.h"
#include "runtime/device.h"
#include "runtime/parallel.h"

#ifdef MN_WITH_CUDA
#include <cuda_runtime.h>

#include "runtime/cuda_check.h"
#endif

namespace {
namespace K = mn::kernels;

enum Op { kAdd, kMul, kExp, kSum, kCopy };
const char* op_name(Op op) {
  static const char* n[] = {"add", "mul", "exp", "sum", "copy"};
  return n[op];
}
double bytes_per_elem(Op op) { return op == kAdd || op == kMul ? 12 : op == kSum ? 4 : 8; }

struct HostBufs {
  std::vector<float> a, b, out;
  explicit HostBufs(int64_t n) : a(n), b(n), out(n) {
    std::mt19937 g(1);
    std::uniform_real_distribution<float> U(-1.f, 1.f);
    for (int64_t i = 0; i < n; ++i) { a[i] = U(g); b[i] = U(g); }
  }
};

// Runs one call of `op` on host or device pointers; returns the sum for kSum.
void run_cpu(Op op, int64_t n, const float* a, const float* b, float* out) {
  switch (op) {
    case kAdd: K::binary_forward_cpu<float>(K::BinaryOp::Add, n, a, b, out); break;
    case kMul: K::binary_forward_cpu<float>(K::BinaryOp::Mul, n, a, b, out); break;
    case kExp: K::unary_forward_cpu<float>(K::UnaryOp::Exp, n, a, out, 0.f, 0.f); break;
    case kSum: K::reduce_cpu<float>(K::ReduceOp::Sum, a, 1, n, 1, out, nullptr); break;
    case kCopy: std::memcpy(out, a, sizeof(float) * n); break;
  }
}

// Checks out against a scalar loop (first 4096 entries, or the sum).
bool check(Op op, int64_t n, const std::vector<float>& a, const std::vector<float>& b,
           const std::vector<float>& out) {
  if (op == kSum) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += a[i];
    return std::fabs(out[0] - s) <= 1e-6 * n;
  }
  for (int64_t i = 0; i < std::min<int64_t>(n, 4096); ++i) {
    float r = op == kAdd ? a[i] + b[i] : op == kMul ? a[i] * b[i] : op == kExp ? std::exp(a[i]) : a[i];
    if (std::fabs(out[i] - r) > 1e-6f * (1 + std::fabs(r))) return false;
  }
  return true;
}

void set_counters(benchmark::State& state, Op op, int64_t n) {
  const double bytes = bytes_per_elem(op) * static_cast<double>(n);
  state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = mn::num_threads();
  state.SetLabel(op_name(op));
}

void BM_cpu(benchmark::State& state, Op op) {
  const int64_t n = state.range(0);
  HostBufs h(n);
  run_cpu(op, n, h.a.data(), h.b.data(), h.out.data());
  if (!check(op, n, h.a, h.b, h.out)) {
    state.SkipWithError("result check failed");
    return;
  }
  for (auto _ : state) {
    run_cpu(op, n, h.a.data(), h.b.data(), h.out.data());
    benchmark::DoNotOptimize(h.out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, op, n);
}

#ifdef MN_WITH_CUDA
void run_gpu(Op op, int64_t n, const float* a, const float* b, float* out) {
  switch (op) {
    case kAdd: K::binary_forward_cuda<float>(K::BinaryOp::Add, n, a, b, out); break;
    case kMul: K::binary_forward_cuda<float>(K::BinaryOp::Mul, n, a, b, out); break;
    case kExp: K::unary_forward_cuda<float>(K::UnaryOp::Exp, n, a, out, 0.f, 0.f); break;
    case kSum: K::reduce_cuda<float>(K::ReduceOp::Sum, a, 1, n, 1, out, nullptr); break;
    case kCopy:
      CUDA_CHECK(cudaMemcpyAsync(out, a, sizeof(float) * n, cudaMemcpyDeviceToDevice, mn::cuda::stream()));
      break;
  }
}
#endif

void BM_gpu(benchmark::State& state, Op op) {
#ifdef MN_WITH_CUDA
  if (!mn::cuda_available()) {
    state.SkipWithError("no CUDA device present: GPU benchmark skipped");
    return;
  }
  mn::bench::guard(state, [&] {
  const int64_t n = state.range(0);
  HostBufs h(n);
  float *a, *b, *out;
  const size_t bytes = sizeof(float) * n;
  a = static_cast<float*>(mn::cuda::device_alloc(bytes, 0));
  b = static_cast<float*>(mn::cuda::device_alloc(bytes, 0));
  out = static_cast<float*>(mn::cuda::device_alloc(bytes, 0));
  CUDA_CHECK(cudaMemcpy(a, h.a.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(b, h.b.data(), bytes, cudaMemcpyHostToDevice));
  run_gpu(op, n, a, b, out);
  CUDA_CHECK(cudaMemcpy(h.out.data(), out, op == kSum ? sizeof(float) : bytes, cudaMemcpyDeviceToHost));
  if (!check(op, n, h.a, h.b, h.out)) {
    state.SkipWithError("result check failed");
  } else {
    mn::bench::EventTimer timer;
    // 1M floats take ~2-5 us: time 20 back-to-back calls per event pair so the
    // launch latency before the first kernel does not dominate.
    const int reps = n <= (1 << 20) ? 20 : 1;
    for (int w = 0; w < 3; ++w) run_gpu(op, n, a, b, out);  // warm-up
    for (auto _ : state)
      state.SetIterationTime(timer.seconds([&] { run_gpu(op, n, a, b, out); }, reps));
    state.counters["calls_per_event_pair"] = reps;
    set_counters(state, op, n);
    state.counters["device"] = 0;
    state.SetLabel(std::string(op_name(op)) + " " + mn::device_name(mn::Device::cuda(0)));
  }
  mn::cuda::device_free(a, 0);
  mn::cuda::device_free(b, 0);
  mn::cuda::device_free(out, 0);
  });
#else
  (void)op;
  state.SkipWithError("built without CUDA: GPU benchmark skipped");
#endif
}

constexpr int64_t k1M = 1 << 20, k16M = 1 << 24;
}  // namespace

#define MN_BENCH_OP(op)                                                                     \
  BENCHMARK_CAPTURE(BM_cpu, op, op)->Arg(k1M)->Arg(k16M)->UseRealTime()->Unit(benchmark::kMicrosecond);    \
  BENCHMARK_CAPTURE(BM_gpu, op, op)->Arg(k1M)->Arg(k16M)->UseManualTime()->Unit(benchmark::kMicrosecond);
MN_BENCH_OP(kCopy)
MN_BENCH_OP(kAdd)
MN_BENCH_OP(kMul)
MN_BENCH_OP(kExp)
MN_BENCH_OP(kSum)

BENCHMARK_MAIN();
