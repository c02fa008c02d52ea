// Convolution and pooling benchmarks at the Koch et al. (2015) branch shapes:
//   input 1x105x105 -> conv 64@10x10 -> pool 2 -> conv 128@7x7 -> pool 2
//   -> conv 128@4x4 -> pool 2 -> conv 256@4x4  (conv inputs 105, 48, 21, 9).
//
// GPU (batch 150): ours (implicit GEMM, Conv2dAlgo::Gemm) vs cuDNN with the fastest
// algorithm from cudnnFind*AlgorithmEx, forward / backward-data / backward-weight, timed
// with CUDA events (manual time), reporting TFLOP/s, in three precisions:
//   FP32  BM_ConvGpuOurs            vs BM_ConvGpuCudnn/<layer>/<pass>/0 (CUDNN_FMA_MATH)
//   TF32  BM_ConvGpuOursTf32 (our mma.sync kernel), BM_ConvGpuOursTf32Wmma (the older
//         WMMA kernel, CudaSpeedups::tc_mma off)  vs BM_ConvGpuCudnn/.../1
//         (CUDNN_TENSOR_OP_MATH on float tensors)
//   BF16  BM_ConvGpuOursBf16 (float tensors, BF16 products)  vs BM_ConvGpuCudnn/.../2
//         (bfloat16 tensors, float compute, CUDNN_TENSOR_OP_MATH: PyTorch autocast's call)
// BM_ConvGpuOursFwdRelu/<layer>/<fused>/<precision 1 tf32, 2 bf16>: the forward with
// bias + ReLU in the kernel's epilogue (fused 1) or as a second pass (0). Every
// kernel's output is checked before timing (ours against our direct kernel at a small
// batch, relative 1e-4 in FP32, 1e-2 in TF32, 3e-2 in BF16; cuDNN's against ours at the
// full batch). Skipped with SkipWithError when no GPU is present.
//
// CPU (batch 12, 2 threads): our im2col + GEMM conv per layer and pass, max-pool
// forward/backward, and the whole branch forward + backward (compare with
// bench/references/koch_branch_torch.py); the sampling study's and the conv4
// preset's layers at batch 128 (BM_ConvCpuStudy/<4..9>/<pass>, compare with
// koch_conv_layers_torch.py --set studies). Run:
//   bench_conv --benchmark_out=bench/results/<date>-cpu-conv.json --benchmark_out_format=json
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "bench/bench_util.h"
#include "autograd/ops_conv.h"
#include "autograd/ops_layers.h"
#include "kernels/conv2d.h"
#include "kernels/activation.h"
#include "kernels/gemm_config.h"
#include "kernels/mma_layout.h"
#include "kernels/pool.h"
#include "runtime/device.h"
#include "runtime/parallel.h"
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
using kernels::Conv2dAlgo;
using kernels::Conv2dParams;

struct Layer {
  int64_t C, H, K, R, pad = 0;
};
const Layer kLayers[4] = {{1, 105, 64, 10}, {64, 48, 128, 7}, {128, 21, 128, 4}, {128, 9, 256, 4}};
// The other studies' convolutions (CPU, batch 128), numbered on from the Koch
// layers (layer index 4..9): the sampling study's net (Bielski's EmbeddingNet:
// 1->32 5x5 on 28x28, 32->64 5x5 on 12x12) and the Omniglot CPU presets' conv4
// trunk (3x3, padding 1, 64 channels, on 28, 14, 7 and 3).
const Layer kStudyLayers[6] = {{1, 28, 32, 5},      {32, 12, 64, 5},    {1, 28, 64, 3, 1},
                               {64, 14, 64, 3, 1}, {64, 7, 64, 3, 1}, {64, 3, 64, 3, 1}};
const char* kStudyLayerName[6] = {"sampling conv1", "sampling conv2", "conv4 block1",
                                  "conv4 block2",   "conv4 block3",   "conv4 block4"};
const Layer& layer_at(int i) { return i < 4 ? kLayers[i] : kStudyLayers[i - 4]; }
enum Pass { Fwd = 0, BwdData = 1, BwdWeight = 2 };
const char* kPassName[3] = {"fwd", "bwd_data", "bwd_weight"};

struct ConvData {
  Tensor x, w, y, dy;
  kernels::Conv2dGeom g;
  int64_t pad = 0;
};

ConvData make_data(int layer, int64_t N, Device d, uint64_t seed = 1) {
  const Layer& L = layer_at(layer);
  Generator gen(seed);
  ConvData c;
  c.x = Tensor::empty({N, L.C, L.H, L.H}, DType::F32, d);
  c.w = Tensor::empty({L.K, L.C, L.R, L.R}, DType::F32, d);
  uniform_(c.x, 0, 1, gen);
  uniform_(c.w, -0.05, 0.05, gen);
  Conv2dParams p;
  p.pad_h = p.pad_w = c.pad = L.pad;
  c.g = kernels::conv2d_geometry("bench", c.x.shape(), c.w.shape(), p);
  c.dy = Tensor::empty({N, L.K, c.g.P, c.g.Q}, DType::F32, d);
  uniform_(c.dy, -1, 1, gen);
  return c;
}

Tensor run_ours(const ConvData& c, Pass pass, Conv2dAlgo algo) {
  Conv2dParams p;
  p.algo = algo;
  p.pad_h = p.pad_w = c.pad;
  switch (pass) {
    case Fwd: return kernels::conv2d_forward(c.x, c.w, Tensor(), p);
    case BwdData: return kernels::conv2d_backward_data(c.dy, c.w, c.x.shape(), p);
    default: return kernels::conv2d_backward_weight(c.dy, c.x, c.w.shape(), p);
  }
}

// max |a - b| / (1 + max |a|)
double rel_diff(const Tensor& a, const Tensor& b) {
  const auto u = a.to_double_vector(), v = b.to_double_vector();
  double m = 0, s = 0;
  for (size_t i = 0; i < u.size(); ++i) m = std::max(m, std::abs(u[i] - v[i])), s = std::max(s, std::abs(u[i]));
  return m / (1 + s);
}

// Checks the fast path against the direct oracle once per (device, layer, pass,
// precision and kernel), at a small batch (the oracle is slow; it never uses tensor
// cores). TF32 inputs carry 10-bit mantissas, BF16 7: errors up to ~1e-3 / ~1e-2 of
// the largest output here, so 1e-2 / 3e-2 (an indexing error is ~1).
bool validated(benchmark::State& state, int layer, Pass pass, Device d) {
  static bool done[2][10][3][6] = {};
  const kernels::Precision prec = d.is_cuda() ? kernels::conv_precision() : kernels::Precision::FP32;
  const int pk = int(prec) + (d.is_cuda() && !kernels::cuda_speedups().tc_mma ? 3 : 0);
  bool& flag = done[d.is_cuda()][layer][pass][pk];
  if (flag) return true;
  ConvData c = make_data(layer, d.is_cuda() ? 4 : 1, d, 7);
  const double e = rel_diff(run_ours(c, pass, Conv2dAlgo::Direct), run_ours(c, pass, Conv2dAlgo::Gemm));
  const double tol = prec == kernels::Precision::BF16 ? 3e-2 : prec == kernels::Precision::TF32 ? 1e-2 : 1e-4;
  if (!(e < tol)) {
    state.SkipWithError(("result check failed: relative difference " + std::to_string(e)).c_str());
    return false;
  }
  flag = true;
  return true;
}

// Sets CudaSpeedups::tc_mma (and conv_fused_relu) for a scope.
class SpeedupScope {
 public:
  SpeedupScope(bool tc_mma, bool fused_relu) : saved_(kernels::cuda_speedups()) {
    kernels::CudaSpeedups s = saved_;
    s.tc_mma = tc_mma;
    s.conv_fused_relu = fused_relu;
    kernels::set_cuda_speedups(s);
  }
  ~SpeedupScope() { kernels::set_cuda_speedups(saved_); }

 private:
  kernels::CudaSpeedups saved_;
};

// ================================ CPU ==========================================
constexpr int64_t kCpuBatch = 12;
constexpr int kCpuThreads = 2;

// One CPU layer and pass at batch N on kCpuThreads threads (Conv2dAlgo::Gemm).
void conv_cpu(benchmark::State& state, int64_t N, const std::string& name) {
  set_num_threads(kCpuThreads);
  const int layer = int(state.range(0));
  const Pass pass = Pass(state.range(1));
  if (!validated(state, layer, pass, Device::cpu())) return;
  ConvData c = make_data(layer, N, Device::cpu());
  run_ours(c, pass, Conv2dAlgo::Gemm);  // warm-up (scratch buffers, page faults)
  for (auto _ : state) benchmark::DoNotOptimize(run_ours(c, pass, Conv2dAlgo::Gemm));
  state.counters["GFLOP/s"] =
      benchmark::Counter(kernels::conv2d_flops(c.g) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(name + " " + kPassName[pass] + " N=" + std::to_string(N) + " threads=2");
}

void BM_ConvCpu(benchmark::State& state) {
  conv_cpu(state, kCpuBatch, "layer" + std::to_string(state.range(0) + 1));
}
BENCHMARK(BM_ConvCpu)->ArgsProduct({{0, 1, 2, 3}, {0, 1, 2}})->Unit(benchmark::kMillisecond)->UseRealTime();

// The sampling study's and the conv4 preset's layers at their training batch
// (128), 2 threads: compare with koch_conv_layers_torch.py --set studies.
constexpr int64_t kStudyBatch = 128;
void BM_ConvCpuStudy(benchmark::State& state) {
  conv_cpu(state, kStudyBatch, kStudyLayerName[state.range(0) - 4]);
}
BENCHMARK(BM_ConvCpuStudy)->ArgsProduct({{4, 5, 6, 7, 8, 9}, {0, 1, 2}})->Unit(benchmark::kMillisecond)->UseRealTime();

// Max pool 2x2 stride 2 at the three Koch pooling inputs, forward and backward.
void BM_MaxPoolCpu(benchmark::State& state) {
  set_num_threads(kCpuThreads);
  const int64_t shapes[3][2] = {{64, 96}, {128, 42}, {128, 18}};
  const int64_t C = shapes[state.range(0)][0], H = shapes[state.range(0)][1];
  const bool backward = state.range(1) != 0;
  kernels::Pool2dParams p;  // 2x2, stride 2
  Generator gen(3);
  Tensor x = Tensor::empty({kCpuBatch, C, H, H});
  uniform_(x, -1, 1, gen);
  auto [y, am] = kernels::max_pool2d_forward(x, p);
  {  // check: every output equals the max of its window
    const auto xv = x.to_vector<float>(), yv = y.to_vector<float>();
    const int64_t P = H / 2;
    for (int64_t i = 0; i < y.numel(); i += 97) {
      const int64_t plane = i / (P * P), pi = (i % (P * P)) / P, qi = i % P;
      const float* b = xv.data() + plane * H * H + 2 * pi * H + 2 * qi;
      if (yv[i] != std::max(std::max(b[0], b[1]), std::max(b[H], b[H + 1]))) {
        state.SkipWithError("max-pool result check failed");
        return;
      }
    }
  }
  Tensor dy = Tensor::empty(y.shape());
  uniform_(dy, -1, 1, gen);
  for (auto _ : state) {
    if (backward)
      benchmark::DoNotOptimize(kernels::max_pool2d_backward(dy, am, x.shape(), p));
    else
      benchmark::DoNotOptimize(kernels::max_pool2d_forward(x, p));
  }
  // Bytes moved: read x + write y + write argmax (fwd); read dy + argmax + write dx (bwd).
  const double bytes = backward ? (y.numel() * 8.0 + x.numel() * 4.0) : (x.numel() * 4.0 + y.numel() * 8.0);
  state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(backward ? "bwd " : "fwd ") + "N=12 C=" + std::to_string(C) + " H=" + std::to_string(H));
}
BENCHMARK(BM_MaxPoolCpu)->ArgsProduct({{0, 1, 2}, {0, 1}})->Unit(benchmark::kMillisecond)->UseRealTime();

// The whole Koch branch forward + backward at batch 12 (2 threads): the number
// to compare with bench/references/koch_branch_torch.py (images/s).
void BM_KochBranchCpu(benchmark::State& state) {
  set_num_threads(kCpuThreads);
  Generator gen(5);
  auto param = [&](const Shape& s, double b) {
    Tensor t = Tensor::empty(s);
    uniform_(t, -b, b, gen);
    return ag::Variable(t, true);
  };
  std::vector<ag::Variable> w, b;
  for (const Layer& L : kLayers) {
    w.push_back(param({L.K, L.C, L.R, L.R}, 1.0 / std::sqrt(double(L.C * L.R * L.R))));
    b.push_back(param({L.K}, 0.01));
  }
  ag::Variable fw = param({4096, 9216}, 1.0 / 96), fb = param({4096}, 0.01);
  Tensor xin = Tensor::empty({kCpuBatch, 1, 105, 105});
  uniform_(xin, 0, 1, gen);
  ag::Variable x(xin);
  kernels::Pool2dParams pool;
  auto step = [&] {
    ag::Variable h = x;
    for (int l = 0; l < 4; ++l) {
      h = ag::relu(ag::conv2d(h, w[l], b[l]));
      if (l < 3) h = ag::max_pool2d(h, pool);
    }
    ag::Variable out = ag::sigmoid_act(ag::linear(ag::flatten_batch(h), fw, fb));
    out.backward(Tensor::ones(out.shape()));
    return out;
  };
  step();  // warm-up
  for (auto _ : state) {
    for (auto& v : w) v.zero_grad();
    for (auto& v : b) v.zero_grad();
    fw.zero_grad(), fb.zero_grad();
    benchmark::DoNotOptimize(step());
  }
  state.counters["images/s"] = benchmark::Counter(double(kCpuBatch), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel("N=12 threads=2 fwd+bwd");
}
BENCHMARK(BM_KochBranchCpu)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3.0);

// ================================ GPU ==========================================
constexpr int64_t kGpuBatch = 150;

bool have_gpu(benchmark::State& state) {
  if (cuda_available()) return true;
  state.SkipWithError("no CUDA device present (GPU benchmark skipped)");
  return false;
}

#ifdef MN_WITH_CUDA
// Times fn with CUDA events on the library stream: one event pair per iteration.
template <typename F>
void time_gpu(benchmark::State& state, F&& fn, double flops) {
  bench::EventTimer timer;
  for (int i = 0; i < 3; ++i) fn();  // warm-up
  CUDA_CHECK(cudaStreamSynchronize(cuda::stream()));
  for (auto _ : state) state.SetIterationTime(timer.seconds(fn));
  state.counters["TFLOP/s"] = benchmark::Counter(flops * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
}
#endif

// Ours on the GPU at one precision (set for this benchmark only); mma false: TF32 on
// the older WMMA kernel.
void conv_gpu_ours(benchmark::State& state, kernels::Precision prec, bool mma = true) {
  if (!have_gpu(state)) return;
#ifdef MN_WITH_CUDA
  kernels::PrecisionScope prec_scope(prec);
  SpeedupScope sp(mma, true);
  bench::guard(state, [&] {
  const int layer = int(state.range(0));
  const Pass pass = Pass(state.range(1));
  if (!validated(state, layer, pass, Device::cuda())) return;
  ConvData c = make_data(layer, kGpuBatch, Device::cuda());
  Tensor out = run_ours(c, pass, Conv2dAlgo::Gemm);
  // Writes into fresh tensors from the caching allocator: no cudaMalloc in the loop.
  time_gpu(state, [&] { out = run_ours(c, pass, Conv2dAlgo::Gemm); }, kernels::conv2d_flops(c.g));
  state.SetLabel(std::string("ours ") + kernels::precision_name(prec) + (mma ? "" : " wmma") + " layer" +
                 std::to_string(layer + 1) + " " + kPassName[pass] + " N=150 " + device_name(Device::cuda()));
  });
#else
  (void)prec;
  (void)mma;
#endif
}
void BM_ConvGpuOurs(benchmark::State& state) { conv_gpu_ours(state, kernels::Precision::FP32); }
void BM_ConvGpuOursTf32(benchmark::State& state) { conv_gpu_ours(state, kernels::Precision::TF32); }
void BM_ConvGpuOursTf32Wmma(benchmark::State& state) { conv_gpu_ours(state, kernels::Precision::TF32, false); }
void BM_ConvGpuOursBf16(benchmark::State& state) { conv_gpu_ours(state, kernels::Precision::BF16); }
BENCHMARK(BM_ConvGpuOurs)->ArgsProduct({{0, 1, 2, 3}, {0, 1, 2}})->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ConvGpuOursTf32)->ArgsProduct({{0, 1, 2, 3}, {0, 1, 2}})->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ConvGpuOursTf32Wmma)->ArgsProduct({{0, 1, 2, 3}, {0, 1, 2}})->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ConvGpuOursBf16)->ArgsProduct({{0, 1, 2, 3}, {0, 1, 2}})->UseManualTime()->Unit(benchmark::kMillisecond);

// The forward with bias and ReLU: in the tensor-core kernel's epilogue (fused) or as
// a ReLU pass over the output (the two give the same bits; tests/kernels/test_mma_cuda.cpp).
void BM_ConvGpuOursFwdRelu(benchmark::State& state) {
  if (!have_gpu(state)) return;
#ifdef MN_WITH_CUDA
  const int layer = int(state.range(0));
  const bool fused = state.range(1) != 0;
  const kernels::Precision prec = state.range(2) == 2 ? kernels::Precision::BF16 : kernels::Precision::TF32;
  kernels::PrecisionScope prec_scope(prec);
  SpeedupScope sp(true, fused);
  bench::guard(state, [&] {
  if (!validated(state, layer, Fwd, Device::cuda())) return;
  ConvData c = make_data(layer, kGpuBatch, Device::cuda());
  const Tensor b = Tensor::zeros({c.g.K}, DType::F32, Device::cuda());
  Conv2dParams p;
  p.pad_h = p.pad_w = c.pad;
  p.algo = Conv2dAlgo::Gemm;
  p.relu = true;
  Tensor out = kernels::conv2d_forward(c.x, c.w, b, p);
  time_gpu(state, [&] { out = kernels::conv2d_forward(c.x, c.w, b, p); }, kernels::conv2d_flops(c.g));
  state.SetLabel(std::string("ours ") + kernels::precision_name(prec) + " layer" + std::to_string(layer + 1) +
                 " fwd + bias + relu " + (fused ? "fused" : "two passes") + " N=150 " + device_name(Device::cuda()));
  });
#endif
}
BENCHMARK(BM_ConvGpuOursFwdRelu)->ArgsProduct({{0, 1, 2, 3}, {0, 1}, {1, 2}})->UseManualTime()->Unit(benchmark::kMillisecond);

#ifdef MN_HAVE_CUDNN
#define CUDNN_CHECK(expr)                                                                  \
  do {                                                                                     \
    cudnnStatus_t s_ = (expr);                                                             \
    if (s_ != CUDNN_STATUS_SUCCESS) MN_THROW("cuDNN: ", #expr, ": ", cudnnGetErrorString(s_)); \
  } while (0)

// Google Benchmark calls a benchmark function once per trial iteration count, so
// the algorithm search (seconds) and the full-batch check run once per case and
// are remembered here: key layer * 9 + pass * 3 + mode (0 fp32, 1 tf32, 2 bf16).
struct CudnnChoice {
  bool done = false;
  int algo = -1;  // -1: no usable algorithm / check failed (see error)
  cudnnMathType_t math = CUDNN_FMA_MATH;
  std::string error;
};
CudnnChoice g_cudnn_choice[36];

// The fastest successful result of a cudnnFind*AlgorithmEx call; in FP32, results
// that need tensor-op math are ignored.
template <typename Perf>
bool pick_algo(const Perf* perf, int n, bool tensor_ops, CudnnChoice* c) {
  for (int i = 0; i < n; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (!tensor_ops && perf[i].mathType == CUDNN_TENSOR_OP_MATH) continue;
    c->algo = int(perf[i].algo);
    c->math = perf[i].mathType;
    return true;
  }
  c->error = "cudnnFind returned no successful algorithm";
  return false;
}

// A bfloat16 copy (nearest even) of a float tensor, as raw bytes on the GPU, and back.
Tensor bf16_bytes(const Tensor& f) {
  const std::vector<float> v = f.to_vector<float>();
  std::vector<uint8_t> b(2 * v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = kernels::mma::bf16_rn_host(kernels::mma::f2u(v[i]));
    b[2 * i] = uint8_t(h & 0xFF), b[2 * i + 1] = uint8_t(h >> 8);
  }
  return Tensor::from_vector(b, {int64_t(b.size())}, Device::cuda());
}
Tensor float_of_bf16(const Tensor& bytes, const Shape& shape) {
  const std::vector<uint8_t> b = bytes.to_vector<uint8_t>();
  std::vector<float> v(b.size() / 2);
  for (size_t i = 0; i < v.size(); ++i) v[i] = kernels::mma::u2f(uint32_t(b[2 * i] | (b[2 * i + 1] << 8)) << 16);
  return Tensor::from_vector(v, shape);
}

// range(2): 0 = FP32 (CUDNN_FMA_MATH), 1 = TF32 (float tensors, CUDNN_TENSOR_OP_MATH),
// 2 = BF16 (bfloat16 tensors, float compute, CUDNN_TENSOR_OP_MATH).
void BM_ConvGpuCudnn(benchmark::State& state) {
  if (!have_gpu(state)) return;
  bench::guard(state, [&] {
  const int layer = int(state.range(0));
  const Pass pass = Pass(state.range(1));
  const int mode = int(state.range(2));
  const bool tf32 = mode != 0;  // tensor-op math
  const bool bf16 = mode == 2;
  ConvData c = make_data(layer, kGpuBatch, Device::cuda());
  const auto& g = c.g;
  const cudnnDataType_t dt = bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  // The operands cuDNN reads: the float tensors, or their bfloat16 copies.
  const Tensor xb = bf16 ? bf16_bytes(c.x) : c.x, wb = bf16 ? bf16_bytes(c.w) : c.w;
  const Tensor dyb = bf16 ? bf16_bytes(c.dy) : c.dy;
  static cudnnHandle_t h = nullptr;
  if (!h) CUDNN_CHECK(cudnnCreate(&h));
  CUDNN_CHECK(cudnnSetStream(h, cuda::stream()));
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&xd));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&yd));
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&wd));
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&cd));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, dt, int(g.N), int(g.C), int(g.H), int(g.W)));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, dt, int(g.N), int(g.K), int(g.P), int(g.Q)));
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(wd, dt, CUDNN_TENSOR_NCHW, int(g.K), int(g.C), int(g.R), int(g.S)));
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(cd, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CUDNN_CHECK(cudnnSetConvolutionMathType(cd, tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
  const size_t ws_bytes = size_t(1) << 30;
  Tensor ws = Tensor::empty({int64_t(ws_bytes)}, DType::U8, Device::cuda());
  const Shape out_shape = pass == Fwd ? c.dy.shape() : pass == BwdData ? c.x.shape() : c.w.shape();
  int64_t out_n = 1;
  for (int64_t e : out_shape) out_n *= e;
  Tensor out = bf16 ? Tensor::empty({2 * out_n}, DType::U8, Device::cuda())
                    : Tensor::empty(out_shape, DType::F32, Device::cuda());
  const float one = 1.f, zero = 0.f;
  CudnnChoice& ch = g_cudnn_choice[layer * 9 + int(pass) * 3 + mode];
  const bool first = !ch.done;
  if (first) {
    ch.done = true;
    ch.error = "cudnnFind threw on the first trial";  // replaced below on success
    int n_ret = 0;
    if (pass == Fwd) {
      cudnnConvolutionFwdAlgoPerf_t perf[16];
      CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, xd, xb.raw_data(), wd, wb.raw_data(), cd, yd,
                                                         out.raw_data(), 16, &n_ret, perf, ws.raw_data(), ws_bytes));
      pick_algo(perf, n_ret, tf32, &ch);
    } else if (pass == BwdData) {
      cudnnConvolutionBwdDataAlgoPerf_t perf[16];
      CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(h, wd, wb.raw_data(), yd, dyb.raw_data(), cd, xd,
                                                              out.raw_data(), 16, &n_ret, perf, ws.raw_data(), ws_bytes));
      pick_algo(perf, n_ret, tf32, &ch);
    } else {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[16];
      CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(h, xd, xb.raw_data(), yd, dyb.raw_data(), cd, wd,
                                                                out.raw_data(), 16, &n_ret, perf, ws.raw_data(), ws_bytes));
      pick_algo(perf, n_ret, tf32, &ch);
    }
  }
  auto destroy = [&] {
    cudnnDestroyTensorDescriptor(xd);
    cudnnDestroyTensorDescriptor(yd);
    cudnnDestroyFilterDescriptor(wd);
    cudnnDestroyConvolutionDescriptor(cd);
  };
  if (ch.algo < 0) {
    destroy();
    state.SkipWithError(ch.error.c_str());
    return;
  }
  CUDNN_CHECK(cudnnSetConvolutionMathType(cd, ch.math));
  const int algo = ch.algo;
  std::function<void()> fn;
  std::string algo_name;
  if (pass == Fwd) {
    algo_name = "fwd_algo" + std::to_string(algo);
    fn = [&, algo] {
      CUDNN_CHECK(cudnnConvolutionForward(h, &one, xd, xb.raw_data(), wd, wb.raw_data(), cd,
                                          cudnnConvolutionFwdAlgo_t(algo), ws.raw_data(), ws_bytes, &zero,
                                          yd, out.raw_data()));
    };
  } else if (pass == BwdData) {
    algo_name = "bwd_data_algo" + std::to_string(algo);
    fn = [&, algo] {
      CUDNN_CHECK(cudnnConvolutionBackwardData(h, &one, wd, wb.raw_data(), yd, dyb.raw_data(), cd,
                                               cudnnConvolutionBwdDataAlgo_t(algo), ws.raw_data(), ws_bytes,
                                               &zero, xd, out.raw_data()));
    };
  } else {
    algo_name = "bwd_filter_algo" + std::to_string(algo);
    fn = [&, algo] {
      CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, &one, xd, xb.raw_data(), yd, dyb.raw_data(), cd,
                                                 cudnnConvolutionBwdFilterAlgo_t(algo), ws.raw_data(), ws_bytes,
                                                 &zero, wd, out.raw_data()));
    };
  }
  if (first) {
    // Check cuDNN against ours at the full batch, once per case (TF32 rounds inputs
    // to 10 mantissa bits).
    ch.algo = -1;
    ch.error = "cuDNN vs ours check threw on the first trial";
    fn();
    const double e =
        rel_diff(run_ours(c, pass, Conv2dAlgo::Gemm), bf16 ? float_of_bf16(out, out_shape) : out.cpu());
    if (!(e < (tf32 ? 5e-2 : 1e-3)))
      ch.error = "cuDNN vs ours check failed: " + std::to_string(e);
    else
      ch.algo = algo;
  }
  if (ch.algo < 0) {
    state.SkipWithError(ch.error.c_str());
  } else {
    time_gpu(state, fn, kernels::conv2d_flops(g));
    state.SetLabel(std::string("cudnn ") + (bf16 ? "bf16 " : tf32 ? "tf32 " : "fp32 ") + algo_name + " layer" +
                   std::to_string(layer + 1) + " " + kPassName[pass] + " N=150 " + device_name(Device::cuda()));
  }
  destroy();
  });
}
BENCHMARK(BM_ConvGpuCudnn)->ArgsProduct({{0, 1, 2, 3}, {0, 1, 2}, {0, 1, 2}})->UseManualTime()->Unit(benchmark::kMillisecond);
#endif

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
