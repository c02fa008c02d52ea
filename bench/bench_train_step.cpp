// One full training iteration of the Omniglot study's triplet CNN:
//   forward of anchors, positives and negatives through the shared Koch branch
//   (as one batch of 3B), Kumar's global loss (l 0.8, t 0.4), backward, Adam step
//   (lr 1e-4, L2 decay 2e-4 on the convolutions, 1e-3 on the dense layer), zero_grad.
// Shapes: 1x105x105 inputs, width 1 (64/128/128/256 channels), embedding 4096,
// study initialisation; inputs are binary images in the driver's raw scale
// (ink = 255, paper = 0), fixed across iterations (data loading is not timed).
//
//   BM_TrainStepGpu/50   the study's batch (50 triplets = 150 images), CUDA events
//                        (manual time); skipped without a device.
//   BM_TrainStepGpuTf32/50  the same with --precision tf32: the convolutions and the
//                        dense layer on our TF32 tensor-core kernels (compare with
//                        koch_train_torch.py --device cuda --tf32).
//   BM_TrainStepGpuBf16/50  --precision bf16: BF16 products, FP32 accumulation,
//                        tensors and optimizer in FP32 (compare with
//                        koch_train_torch.py --device cuda --bf16, autocast).
//   BM_TrainStepCpu/4, /16, /50   4, 16 and 50 triplets on the CPU with MN_NUM_THREADS
//                        threads (2 on the shared machine), steady-clock manual time;
//                        also process CPU ms per step and the CPU block cache's peak.
// Counters: images_per_s = 3B / mean time per iteration; best_images_per_s from
// the fastest iteration (the shared 2-core machine is noisy; compare with the
// reference's min_ms). GPU cases also report tflops (the convolutions' and the
// dense layer's multiply-adds, train_macs_per_image, x2 per mean iteration time),
// peak_tflops and share_of_peak (FP32, or the dense TF32 / BF16 tensor-core peak;
// sm_80/sm_90).
// Before timing, one step is checked: the loss is finite and the step changed
// the weights.
// Reference: bench/references/koch_train_torch.py (the same iteration in PyTorch),
//   /usr/bin/python3 bench/references/koch_train_torch.py --device cpu --batch 4 --threads 2
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include <time.h>

#include "kernels/gemm_config.h"
#include "nn/losses/losses.h"
#include "nn/models/koch.h"
#include "nn/optim/optimizer.h"
#include "runtime/allocator.h"
#include "runtime/device.h"
#include "runtime/parallel.h"
#include "runtime/rng.h"

#include "bench/bench_util.h"

using namespace mn;

namespace {

// Binary images in the driver's input scale: ~15 % ink (255), the rest 0.
Tensor binary_images(int64_t n, uint64_t seed, Device dev) {
  Tensor u = Tensor::empty({n, 1, 105, 105}, DType::F32, Device::cpu());
  Generator g(seed);
  uniform_(u, 0.0, 1.0, g);
  std::vector<float> v = u.to_vector<float>();
  for (float& x : v) x = x < 0.15f ? 255.0f : 0.0f;
  return Tensor::from_vector(v, u.shape()).to(dev);
}

struct TrainStep {
  std::unique_ptr<nn::TripletNet> net;
  std::unique_ptr<nn::Adam> opt;
  Tensor a, p, n;
  nn::TripletLossOptions lo;

  TrainStep(int64_t B, Device dev) {
    nn::KochBranchOptions o;  // width 1, embedding 4096, ReLU, sigmoid embedding, study init
    o.device = dev;
    Generator g(1);
    net = std::make_unique<nn::TripletNet>(o, nn::TripletShare::Full, g);
    opt = std::make_unique<nn::Adam>(net->param_groups(1e-4, 2e-4, 1e-3));
    a = binary_images(B, 11, dev);
    p = binary_images(B, 12, dev);
    n = binary_images(B, 13, dev);
    lo.kind = nn::TripletKind::Global;
    lo.global_l = 0.8;
    lo.global_t = 0.4;
  }

  // The timed iteration (no host read-back: the driver's one stats read is not included).
  nn::LossOutput step() {
    auto e = net->embed_triplets(ag::Variable(a), ag::Variable(p), ag::Variable(n));
    nn::LossOutput out = nn::triplet_loss(e[0], e[1], e[2], lo);
    out.loss.backward();
    opt->step();
    opt->zero_grad();
    return out;
  }

  // One checked step: finite loss, and the first parameter (branch.conv1.weight) moved.
  bool check(std::string* why) {
    Tensor w = net->named_parameters().front().second.data();
    std::vector<double> before = w.to_double_vector();
    auto h = step().host_stats();
    std::vector<double> after = w.to_double_vector();
    if (!std::isfinite(h.loss)) return *why = "non-finite loss", false;
    if (before == after) return *why = "the Adam step did not change " + net->named_parameters().front().first, false;
    return true;
  }
};

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

void BM_TrainStepCpu(benchmark::State& st) {
  const int64_t B = st.range(0);
  TrainStep ts(B, Device::cpu());
  std::string why;
  if (!ts.check(&why)) {
    st.SkipWithError(why.c_str());
    return;
  }
  ts.step();  // warm-up: the CPU block cache reaches the step's working set
  cpu_reset_peak_stats();
  const CpuAllocatorStats a0 = cpu_allocator_stats();
  double total_s = 0, best_s = 1e30, cpu_s = 0;
  for (auto _ : st) {
    auto t0 = std::chrono::steady_clock::now();
    const double c0 = process_cpu_seconds();
    ts.step();
    cpu_s += process_cpu_seconds() - c0;
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    st.SetIterationTime(s);
    total_s += s;
    best_s = std::min(best_s, s);
  }
  // Computed here from the manual times (a kIsRate counter would divide by CPU time
  // in some Google Benchmark versions).
  st.counters["images_per_s"] = 3.0 * B * static_cast<double>(st.iterations()) / total_s;
  st.counters["best_images_per_s"] = 3.0 * B / best_s;  // fastest iteration: robust on a shared machine
  st.counters["threads"] = num_threads();
  // Process CPU time per step (all threads, spinning included): less sensitive to
  // other processes on a shared machine than the wall time.
  st.counters["cpu_ms_per_step"] = 1e3 * cpu_s / static_cast<double>(st.iterations());
  // The CPU block cache: peak bytes in blocks >= 1 MiB, and frees past the cache
  // limit during the timed steps (0: nothing is returned and page-faulted again).
  const CpuAllocatorStats a1 = cpu_allocator_stats();
  st.counters["peak_block_mib"] = static_cast<double>(a1.peak_bytes_in_use >> 20);
  st.counters["frees_past_limit"] = static_cast<double>(a1.returned_to_os - a0.returned_to_os);
  st.SetLabel("cpu, float32, global loss, Adam");
}

// Multiply-adds per image of one training iteration of the width-1 Koch branch
// (105x105 input): per convolution and the dense layer, the forward pass, the
// weight gradient and (except for the first convolution, whose input needs no
// gradient) the input gradient, each K*C*R*S*P*Q (dense: 9216*4096) MACs.
// Pooling, activations, the loss and Adam are left out (memory-bound, small).
double train_macs_per_image() {
  struct L { double K, C, R, P; };
  const L convs[4] = {{64, 1, 10, 96}, {128, 64, 7, 42}, {128, 128, 4, 18}, {256, 128, 4, 6}};
  double macs = 0;
  for (int i = 0; i < 4; ++i) {
    const L& l = convs[i];
    macs += l.K * l.C * l.R * l.R * l.P * l.P * (i == 0 ? 2 : 3);
  }
  return macs + 9216.0 * 4096.0 * 3;
}

#ifdef MN_WITH_CUDA
// Peak FLOP/s of the current device from its SM count and (boost) clock: FP32
// FLOP per SM per clock (2 x 64 lanes on sm_80, 2 x 128 on sm_90) or dense TF32
// tensor-core FLOP per SM per clock (1024 on sm_80, 2048 on sm_90): A100 19.5 /
// 156 TFLOP/s, H100 SXM 67 / 535 at 1.98 GHz. 0 (no share reported) for other
// architectures, whose per-SM rates differ between products.
double device_peak_flops(kernels::Precision prec) {
  const bool tc = prec != kernels::Precision::FP32;
  int dev = 0, sms = 0, khz = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  const int cc = major * 10 + minor;
  double per_sm_clk = 0;
  // Dense BF16 tensor-core FLOP per SM per clock are twice TF32's.
  const double tc_scale = prec == kernels::Precision::BF16 ? 2 : 1;
  if (cc == 80) per_sm_clk = tc ? 1024 * tc_scale : 128;
  if (cc == 90) per_sm_clk = tc ? 2048 * tc_scale : 256;
  return per_sm_clk * sms * khz * 1e3;
}
#endif

void train_step_gpu(benchmark::State& st, kernels::Precision prec) {
#ifdef MN_WITH_CUDA
  if (!cuda_available()) {
    st.SkipWithError("no CUDA device");
    return;
  }
  kernels::PrecisionScope prec_scope(prec);  // this benchmark only, restored on every exit path
  bench::guard(st, [&] {
  const int64_t B = st.range(0);
  Device dev = Device::cuda();
  TrainStep ts(B, dev);
  std::string why;
  if (!ts.check(&why)) {
    st.SkipWithError(why.c_str());
    return;
  }
  for (int i = 0; i < 3; ++i) ts.step();  // warm-up: the caching allocator reaches its steady state
  synchronize(dev);
  bench::EventTimer timer;
  double total_s = 0, best_s = 1e30;
  for (auto _ : st) {
    const double s = timer.seconds([&] { ts.step(); });
    st.SetIterationTime(s);
    total_s += s;
    best_s = std::min(best_s, s);
  }
  st.counters["images_per_s"] = 3.0 * B * static_cast<double>(st.iterations()) / total_s;
  st.counters["best_images_per_s"] = 3.0 * B / best_s;  // fastest iteration: robust on a shared machine
  // Achieved FLOP/s of the convolutions and the dense layer, and their share of the
  // device's peak (FP32 lanes, or TF32 tensor cores when TF32 is on).
  const double flops = 2.0 * train_macs_per_image() * 3.0 * B * static_cast<double>(st.iterations()) / total_s;
  st.counters["tflops"] = flops / 1e12;
  const double peak = device_peak_flops(prec);
  st.counters["peak_tflops"] = peak / 1e12;
  if (peak > 0) st.counters["share_of_peak"] = flops / peak;
  st.SetLabel(device_name(dev) + ", float32 tensors, " + kernels::precision_name(prec) +
              " convolutions and dense layers, global loss, Adam");
  });
#else
  (void)prec;
  st.SkipWithError("built without CUDA");
#endif
}

void BM_TrainStepGpu(benchmark::State& st) { train_step_gpu(st, kernels::Precision::FP32); }
void BM_TrainStepGpuTf32(benchmark::State& st) { train_step_gpu(st, kernels::Precision::TF32); }
void BM_TrainStepGpuBf16(benchmark::State& st) { train_step_gpu(st, kernels::Precision::BF16); }

}  // namespace

BENCHMARK(BM_TrainStepGpu)->Arg(4)->Arg(16)->Arg(50)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK(BM_TrainStepGpuTf32)->Arg(4)->Arg(16)->Arg(50)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK(BM_TrainStepGpuBf16)->Arg(4)->Arg(16)->Arg(50)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK(BM_TrainStepCpu)->Arg(4)->Arg(16)->Arg(50)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(5.0);

BENCHMARK_MAIN();
