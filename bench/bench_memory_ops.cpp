// Memory-bound layer benchmarks at the Koch branch shapes: LRN, batch-norm,
// ReLU / ELU / sigmoid, dropout (forward and backward) and the pairwise distance
// matrix of a 150-embedding batch (4096-d, the Koch embedding size).
//
// Every benchmark reports GB/s as the MINIMUM bytes the op must move (each input
// read once, each output written once; e.g. LRN forward = x + y + scale), so the
// numbers compare directly with the copy bandwidth measured in the same run.
//
// GPU (batch 150; skipped at run time without a device): ours timed with CUDA
// events (manual time), next to cudaMemcpy device-to-device of the same tensor
// (reported as read + write bytes), and cuDNN's LRN (cudnnLRNCrossChannelForward/
// Backward, alpha/n convention, so ours runs with alpha_over_n = true) and
// batch-norm (cudnnBatchNormalizationForwardTraining / Backward, spatial) when
// MN_HAVE_CUDNN. Each GPU op is checked against the CPU result before timing.
// The working sets (88 MB per (150, 64, 48, 48) float tensor) exceed the L2 cache,
// so no flushing is needed.
//
// CPU (batch 12, MN_NUM_THREADS threads): the same ops. Run:
//   MN_NUM_THREADS=2 bench_memory_ops --benchmark_out=bench/results/<date>-cpu-memory-ops.json
//                                     --benchmark_out_format=json
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kernels/activation.h"
#include "bench/bench_util.h"
#include "kernels/batchnorm.h"
#include "kernels/distance.h"
#include "kernels/dropout.h"
#include "kernels/lrn.h"
#include "runtime/device.h"
#include "runtime/rng.h"

#ifdef MN_WITH_CUDA
#include <cuda_runtime.h>

#include "runtime/cuda_check.h"
#endif
#ifdef MN_HAVE_CUDNN
#include <cudnn.h>
#endif

namespace {

using namespace mn;

enum Op { LrnF, LrnB, BnF, BnB, ReluF, ReluB, EluF, SigmoidF, DropF, DropB, PairF, PairB, NumOps };
const char* kOpName[NumOps] = {"lrn_fwd",  "lrn_bwd",  "bn_fwd",  "bn_bwd",  "relu_fwd",
                               "relu_bwd", "elu_fwd",  "sigmoid_fwd", "dropout_fwd",
                               "dropout_bwd", "pairwise_sq_fwd", "pairwise_sq_bwd"};

Shape act_shape(int64_t batch) { return {batch, 64, 48, 48}; }  // after conv1 + pool

Tensor uniform(const Shape& s, Device d, uint64_t seed) {
  Tensor t = Tensor::empty(s, DType::F32, d);
  Generator g(seed);
  uniform_(t, -1.0, 1.0, g);
  return t;
}

kernels::LrnOptions lrn_opts() {
  kernels::LrnOptions o;
  o.alpha_over_n = true;  // cuDNN's convention, so both compute the same thing
  return o;
}

// All inputs of one op at one batch size, plus the call and its byte count.
struct OpCase {
  std::function<Tensor()> run;  // returns the result (checked before timing)
  double bytes = 0;
  Tensor check;
};

OpCase make_case(Op op, int64_t batch, Device dev) {
  OpCase c;
  const Shape s = act_shape(batch);
  const double n = double(numel_of(s)), f = 4.0;
  Tensor x = uniform(s, dev, 1), gy = uniform(s, dev, 2);
  const int64_t C = s[1];
  switch (op) {
    case LrnF: {
      c.run = [x] { return kernels::lrn_forward(x, lrn_opts()).y; };
      c.bytes = 3 * n * f;
      break;
    }
    case LrnB: {
      auto r = kernels::lrn_forward(x, lrn_opts());
      c.run = [x, r, gy] { return kernels::lrn_backward(x, r.y, r.scale, gy, lrn_opts()); };
      c.bytes = 5 * n * f;
      break;
    }
    case BnF: {
      Tensor g = Tensor::ones({C}, DType::F32, dev), b = Tensor::zeros({C}, DType::F32, dev);
      Tensor rm = Tensor::zeros({C}, DType::F32, dev), rv = Tensor::ones({C}, DType::F32, dev);
      c.run = [x, g, b, rm, rv] {
        return kernels::batchnorm_forward(x, g, b, rm, rv, true, 0.1, 1e-5).y;
      };
      c.bytes = 2 * n * f;
      break;
    }
    case BnB: {
      Tensor g = Tensor::ones({C}, DType::F32, dev), b = Tensor::zeros({C}, DType::F32, dev);
      auto r = kernels::batchnorm_forward(x, g, b, Tensor(), Tensor(), true, 0.1, 1e-5);
      c.run = [x, gy, r, g] {
        return kernels::batchnorm_backward(x, gy, r.mean, r.invstd, g, true).dx;
      };
      c.bytes = 3 * n * f;
      break;
    }
    case ReluF: case EluF: case SigmoidF: {
      const kernels::Act a = op == ReluF ? kernels::Act::ReLU
                             : op == EluF ? kernels::Act::ELU : kernels::Act::Sigmoid;
      c.run = [x, a] { return kernels::activation_forward(a, x); };
      c.bytes = 2 * n * f;
      break;
    }
    case ReluB: {
      c.run = [x, gy] { return kernels::activation_backward(kernels::Act::ReLU, x, gy); };
      c.bytes = 3 * n * f;
      break;
    }
    case DropF: {
      c.run = [x] { return kernels::dropout_forward(x, 0.5, 7, 0).y; };
      c.bytes = 2 * n * f + n;
      break;
    }
    case DropB: {
      Tensor mask = kernels::dropout_forward(x, 0.5, 7, 0).mask;
      c.run = [gy, mask] { return kernels::dropout_backward(gy, mask, 0.5); };
      c.bytes = 2 * n * f + n;
      break;
    }
    case PairF: case PairB: {
      const int64_t B = 150, D = 4096;  // the siamese batch's embeddings
      Tensor a = uniform({B, D}, dev, 3), bb = uniform({B, D}, dev, 4);
      if (op == PairF) {
        c.run = [a, bb] {
          return kernels::pairwise_distance_forward(kernels::Pairwise::SqEuclidean, a, bb).out;
        };
        c.bytes = (2.0 * B * D + B * B) * f;
      } else {
        auto r = kernels::pairwise_distance_forward(kernels::Pairwise::SqEuclidean, a, bb);
        Tensor g = uniform({B, B}, dev, 5);
        c.run = [a, bb, r, g] {
          return kernels::pairwise_distance_backward(kernels::Pairwise::SqEuclidean, a, bb, r, g)
                        .first;
        };
        c.bytes = (4.0 * B * D + 2.0 * B * B) * f;
      }
      break;
    }
    default: break;
  }
  return c;
}

bool all_finite(const Tensor& t) {
  for (double v : t.to_double_vector())
    if (!std::isfinite(v)) return false;
  return true;
}

// ---- CPU -----------------------------------------------------------------------
void BM_MemOpCpu(benchmark::State& state) {
  const Op op = static_cast<Op>(state.range(0));
  state.SetLabel(kOpName[op]);
  OpCase oc = make_case(op, 12, Device::cpu());
  oc.check = oc.run();
  for (auto _ : state) benchmark::DoNotOptimize(oc.run());
  if (!oc.check.defined() || !all_finite(oc.check)) state.SkipWithError("result not finite");
  state.counters["GB/s"] = benchmark::Counter(oc.bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// ---- GPU -----------------------------------------------------------------------
#ifdef MN_WITH_CUDA
using bench::EventTimer;

// Worst |ref - got| / (1e-4 max|ref| + 1e-3 |ref|) over all entries: <= 1 passes.
// The absolute part (1e-4 of the largest entry) covers entries near zero whose
// value comes from reductions (batch-norm and pairwise backward) where float32
// reassociation leaves ~1e-6 of the scale; per-entry 1e-3 covers the rest.
double check_error(const Tensor& ref, const Tensor& got) {
  const auto r = ref.to_double_vector(), d = got.to_double_vector();
  if (r.size() != d.size()) return 1e30;
  double amax = 0, worst = 0;
  for (double v : r) amax = std::max(amax, std::abs(v));
  for (size_t i = 0; i < r.size(); ++i) {
    const double e = std::abs(r[i] - d[i]) / (1e-4 * amax + 1e-3 * std::abs(r[i]) + 1e-30);
    worst = std::isnan(e) ? 1e30 : std::max(worst, e);
  }
  return worst;
}

void BM_MemOpGpu(benchmark::State& state) {
  if (!cuda_available()) { state.SkipWithError("no CUDA device"); return; }
  bench::guard(state, [&] {
  const Op op = static_cast<Op>(state.range(0));
  state.SetLabel(kOpName[op]);
  const int64_t batch = 150;
  OpCase g = make_case(op, batch, Device::cuda());
  // Check against the CPU on the same inputs before timing, once per op (Google
  // Benchmark calls this function once per trial iteration count).
  static bool checked[NumOps] = {};
  if (!checked[op]) {
    OpCase cc = make_case(op, batch, Device::cpu());
    cc.check = cc.run();
    g.check = g.run();
    const double worst = check_error(cc.check, g.check);
    if (!(worst <= 1)) { state.SkipWithError(("GPU result check failed: error " + std::to_string(worst) + " x tolerance").c_str()); return; }
    checked[op] = true;
  }
  EventTimer t;
  for (int i = 0; i < 3; ++i) g.run();  // warm up (and fill the caching allocator)
  for (auto _ : state) state.SetIterationTime(t.seconds([&] { g.run(); }));
  state.counters["GB/s"] = benchmark::Counter(g.bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  });
}

// Device-to-device copy of one (150, 64, 48, 48) float tensor: read + write bytes.
void BM_CopyBandwidthGpu(benchmark::State& state) {
  if (!cuda_available()) { state.SkipWithError("no CUDA device"); return; }
  bench::guard(state, [&] {
  Tensor a = Tensor::empty(act_shape(150), DType::F32, Device::cuda());
  Tensor b = Tensor::empty(act_shape(150), DType::F32, Device::cuda());
  EventTimer t;
  auto copy = [&] {
    CUDA_CHECK(cudaMemcpyAsync(b.raw_data(), a.raw_data(), a.nbytes(), cudaMemcpyDeviceToDevice,
                               cuda::stream()));
  };
  for (int i = 0; i < 3; ++i) copy();
  for (auto _ : state) state.SetIterationTime(t.seconds(copy));
  state.counters["GB/s"] = benchmark::Counter(2.0 * double(a.nbytes()) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
  });
}

#ifdef MN_HAVE_CUDNN
#define CUDNN_OK(expr)                                                                   \
  do {                                                                                   \
    cudnnStatus_t s_ = (expr);                                                           \
    if (s_ != CUDNN_STATUS_SUCCESS) MN_THROW("cuDNN: ", #expr, ": ", cudnnGetErrorString(s_)); \
  } while (0)

// 0 lrn fwd, 1 lrn bwd, 2 bn fwd (training), 3 bn bwd
void BM_CudnnGpu(benchmark::State& state) {
  if (!cuda_available()) { state.SkipWithError("no CUDA device"); return; }
  bench::guard(state, [&] {
  const int which = static_cast<int>(state.range(0));
  const char* names[4] = {"cudnn_lrn_fwd", "cudnn_lrn_bwd", "cudnn_bn_fwd", "cudnn_bn_bwd"};
  state.SetLabel(names[which]);
  const Shape s = act_shape(150);
  const int N = int(s[0]), C = int(s[1]), H = int(s[2]), W = int(s[3]);
  Tensor x = uniform(s, Device::cuda(), 1), gy = uniform(s, Device::cuda(), 2);
  Tensor y = Tensor::empty(s, DType::F32, Device::cuda()), gx = Tensor::empty(s, DType::F32, Device::cuda());
  static cudnnHandle_t h = nullptr;  // one handle for the process (cudnnCreate is slow)
  if (!h) CUDNN_OK(cudnnCreate(&h));
  CUDNN_OK(cudnnSetStream(h, cuda::stream()));
  cudnnTensorDescriptor_t td, pd;
  CUDNN_OK(cudnnCreateTensorDescriptor(&td));
  CUDNN_OK(cudnnCreateTensorDescriptor(&pd));
  CUDNN_OK(cudnnSetTensor4dDescriptor(td, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, C, H, W));
  CUDNN_OK(cudnnSetTensor4dDescriptor(pd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, C, 1, 1));
  cudnnLRNDescriptor_t ld;
  CUDNN_OK(cudnnCreateLRNDescriptor(&ld));
  const auto o = lrn_opts();
  CUDNN_OK(cudnnSetLRNDescriptor(ld, unsigned(o.size), o.alpha, o.beta, o.k));
  Tensor g1 = Tensor::ones({C}, DType::F32, Device::cuda()), b0 = Tensor::zeros({C}, DType::F32, Device::cuda());
  Tensor rm = Tensor::zeros({C}, DType::F32, Device::cuda()), rv = Tensor::ones({C}, DType::F32, Device::cuda());
  Tensor sm = Tensor::empty({C}, DType::F32, Device::cuda()), si = Tensor::empty({C}, DType::F32, Device::cuda());
  Tensor dg = Tensor::empty({C}, DType::F32, Device::cuda()), db = Tensor::empty({C}, DType::F32, Device::cuda());
  const float one = 1.f, zero = 0.f;
  double bytes = 0;
  std::function<void()> run;
  if (which == 0) {
    run = [&] { CUDNN_OK(cudnnLRNCrossChannelForward(h, ld, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, td, x.raw_data(), &zero, td, y.raw_data())); };
    bytes = 2.0 * x.nbytes();
  } else if (which == 1) {
    CUDNN_OK(cudnnLRNCrossChannelForward(h, ld, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, td, x.raw_data(), &zero, td, y.raw_data()));
    run = [&] { CUDNN_OK(cudnnLRNCrossChannelBackward(h, ld, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, td, y.raw_data(), td, gy.raw_data(), td, x.raw_data(), &zero, td, gx.raw_data())); };
    bytes = 4.0 * x.nbytes();
  } else if (which == 2) {
    run = [&] { CUDNN_OK(cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, td, x.raw_data(), td, y.raw_data(), pd, g1.raw_data(), b0.raw_data(), 0.1, rm.raw_data(), rv.raw_data(), 1e-5, sm.raw_data(), si.raw_data())); };
    bytes = 2.0 * x.nbytes();
  } else {
    CUDNN_OK(cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, td, x.raw_data(), td, y.raw_data(), pd, g1.raw_data(), b0.raw_data(), 0.1, rm.raw_data(), rv.raw_data(), 1e-5, sm.raw_data(), si.raw_data()));
    run = [&] { CUDNN_OK(cudnnBatchNormalizationBackward(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, td, x.raw_data(), td, gy.raw_data(), td, gx.raw_data(), pd, g1.raw_data(), dg.raw_data(), db.raw_data(), 1e-5, sm.raw_data(), si.raw_data())); };
    bytes = 3.0 * x.nbytes();
  }
  // Our op's own bytes-per-call convention for LRN counts the saved scale too; cuDNN
  // saves none, so its LRN byte count is x + y (fwd) and x + y + gy + gx (bwd).
  auto destroy = [&] {
    cudnnDestroyLRNDescriptor(ld);
    cudnnDestroyTensorDescriptor(td);
    cudnnDestroyTensorDescriptor(pd);
  };
  // cuDNN against ours on the same inputs, once per case: LRN with ours in cuDNN's
  // alpha/n convention; batch norm in training mode, eps 1e-5, biased variance.
  static bool checked[4] = {};
  if (!checked[which]) {
    run();
    Tensor ref, got = which == 0 || which == 2 ? y : gx;
    if (which == 0) {
      ref = kernels::lrn_forward(x, o).y;
    } else if (which == 1) {
      auto r = kernels::lrn_forward(x, o);
      ref = kernels::lrn_backward(x, r.y, r.scale, gy, o);
    } else {
      auto r = kernels::batchnorm_forward(x, g1, b0, Tensor(), Tensor(), true, 0.1, 1e-5);
      ref = which == 2 ? r.y : kernels::batchnorm_backward(x, gy, r.mean, r.invstd, g1, true).dx;
    }
    const double worst = check_error(ref, got);
    if (!(worst <= 1)) {
      destroy();
      state.SkipWithError(("cuDNN vs ours check failed: error " + std::to_string(worst) + " x tolerance").c_str());
      return;
    }
    checked[which] = true;
  }
  EventTimer t;
  for (int i = 0; i < 3; ++i) run();
  for (auto _ : state) state.SetIterationTime(t.seconds(run));
  state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  destroy();
  });
}
BENCHMARK(BM_CudnnGpu)->DenseRange(0, 3)->UseManualTime()->Unit(benchmark::kMicrosecond);
#endif  // MN_HAVE_CUDNN

BENCHMARK(BM_CopyBandwidthGpu)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MemOpGpu)->DenseRange(0, NumOps - 1)->UseManualTime()->Unit(benchmark::kMicrosecond);
#endif  // MN_WITH_CUDA

BENCHMARK(BM_MemOpCpu)->DenseRange(0, NumOps - 1)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::AddCustomContext("cpu_device", device_name(Device::cpu()));
  benchmark::AddCustomContext("gpu_device", cuda_available() ? device_name(Device::cuda()) : "none");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
