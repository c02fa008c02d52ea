// Optimizer step benchmarks: the fused Adam / SGD-momentum update over a whole
// parameter group (one launch) against the same update issued one launch per
// tensor, on the parameter set of Koch's siamese branch (about 38.95 M float32
// parameters in 10 tensors) and on a small 1/64-scale set. Reports bytes moved
// per second (Adam reads p, g, m, v and writes p, m, v: 28 B per float32
// element; SGD-momentum reads p, g, buf and writes p, buf: 20 B).
// The GPU result is checked against the CPU before timing; GPU time is taken
// with CUDA events (manual time).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>

#include "nn/optim/optimizer.h"
#include "bench/bench_util.h"
#include "runtime/device.h"
#include "runtime/rng.h"
#ifdef MN_WITH_CUDA
#include "runtime/cuda_check.h"
#endif

namespace {

using mn::DType;
using mn::Device;
using mn::Tensor;
using mn::ag::Variable;

// Koch branch: conv 64@10x10, 128@7x7, 128@4x4, 256@4x4, dense 9216 -> 4096.
std::vector<mn::Shape> koch_shapes(int64_t scale_div) {
  std::vector<mn::Shape> s = {{64, 1, 10, 10}, {64},  {128, 64, 7, 7}, {128}, {128, 128, 4, 4},
                              {128},           {256, 128, 4, 4},     {256}, {4096, 9216}, {4096}};
  if (scale_div > 1)
    for (auto& sh : s) sh[0] = std::max<int64_t>(1, sh[0] / scale_div);
  return s;
}

std::vector<Variable> make_params(const std::vector<mn::Shape>& shapes, Device dev) {
  mn::Generator g(7);
  std::vector<Variable> ps;
  for (auto& sh : shapes) {
    Tensor p = Tensor::empty(sh, DType::F32, dev), gr = Tensor::empty(sh, DType::F32, dev);
    mn::normal_(p, 0.0, 0.1, g);
    mn::normal_(gr, 0.0, 0.01, g);
    ps.emplace_back(p, true);
    ps.back().set_grad(gr);
  }
  return ps;
}

std::unique_ptr<mn::nn::Optimizer> make_opt(bool adam, std::vector<Variable> ps, bool fused) {
  std::vector<mn::nn::ParamGroup> groups;
  if (fused) {
    groups.emplace_back();
    groups.back().params = ps;
  } else {
    for (auto& p : ps) {  // one group per tensor = one launch per tensor
      groups.emplace_back();
      groups.back().params = {p};
    }
  }
  for (auto& g : groups) {
    g.lr = adam ? 1e-4 : 1e-2;
    g.momentum = adam ? 0.0 : 0.9;
    g.weight_decay = 2e-4;
  }
  if (adam) return std::make_unique<mn::nn::Adam>(groups);
  return std::make_unique<mn::nn::SGD>(groups);
}

int64_t total_numel(const std::vector<Variable>& ps) {
  int64_t n = 0;
  for (auto& p : ps) n += p.numel();
  return n;
}

// The GPU step must agree with the CPU step before anything is timed.
bool check_gpu_matches_cpu(bool adam, std::string& why) {
#ifdef MN_WITH_CUDA
  auto shapes = koch_shapes(64);
  auto pc = make_params(shapes, Device::cpu()), pg = make_params(shapes, Device::cuda());
  auto oc = make_opt(adam, pc, true), og = make_opt(adam, pg, true);
  for (int s = 0; s < 3; ++s) {
    oc->step();
    og->step();
  }
  for (size_t i = 0; i < pc.size(); ++i) {
    auto a = pc[i].data().to_vector<float>(), b = pg[i].data().to_vector<float>();
    for (size_t k = 0; k < a.size(); ++k)
      if (std::fabs(a[k] - b[k]) > 1e-5f + 1e-5f * std::fabs(a[k])) {
        why = "GPU and CPU optimizer steps differ at tensor " + std::to_string(i);
        return false;
      }
  }
  return true;
#else
  (void)adam;
  why = "built without CUDA";
  return false;
#endif
}

void run_body(benchmark::State& state, bool adam, bool cuda, bool fused) {
  const int64_t div = state.range(0);
  if (cuda) {
    if (!mn::cuda_available()) {
      state.SkipWithError("no CUDA device");
      return;
    }
    std::string why;
    if (!check_gpu_matches_cpu(adam, why)) {
      state.SkipWithError(why.c_str());
      return;
    }
  }
  const Device dev = cuda ? Device::cuda() : Device::cpu();
  auto ps = make_params(koch_shapes(div), dev);
  auto opt = make_opt(adam, ps, fused);
  opt->step();  // warm-up: allocates state, uploads the tables
  mn::synchronize(dev);
#ifdef MN_WITH_CUDA
  std::unique_ptr<mn::bench::EventTimer> timer;
  if (cuda) timer = std::make_unique<mn::bench::EventTimer>();
#endif
  for (auto _ : state) {
    if (cuda) {
#ifdef MN_WITH_CUDA
      state.SetIterationTime(timer->seconds([&] { opt->step(); }));
#endif
    } else {
      const auto t0 = std::chrono::steady_clock::now();
      opt->step();
      state.SetIterationTime(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  const int64_t n = total_numel(ps);
  state.counters["params"] = static_cast<double>(n);
  state.counters["launches"] = fused ? 1 : static_cast<double>(ps.size());
  state.SetBytesProcessed(state.iterations() * n * (adam ? 28 : 20));
  state.SetLabel(mn::device_name(dev));
}
void run(benchmark::State& state, bool adam, bool cuda, bool fused) {
  // An exception (CUDA error, failed check) skips this case instead of aborting the run.
  mn::bench::guard(state, [&] { run_body(state, adam, cuda, fused); });
}

// Arg: parameter-count divisor (1 = Koch's full branch, 64 = small).
void BM_AdamFusedCpu(benchmark::State& s) { run(s, true, false, true); }
void BM_AdamPerTensorCpu(benchmark::State& s) { run(s, true, false, false); }
void BM_SgdMomentumFusedCpu(benchmark::State& s) { run(s, false, false, true); }
void BM_AdamFusedCuda(benchmark::State& s) { run(s, true, true, true); }
void BM_AdamPerTensorCuda(benchmark::State& s) { run(s, true, true, false); }
void BM_SgdMomentumFusedCuda(benchmark::State& s) { run(s, false, true, true); }

BENCHMARK(BM_AdamFusedCpu)->Arg(64)->Arg(1)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AdamPerTensorCpu)->Arg(64)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SgdMomentumFusedCpu)->Arg(64)->Arg(1)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AdamFusedCuda)->Arg(64)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AdamPerTensorCuda)->Arg(64)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SgdMomentumFusedCuda)->Arg(64)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
