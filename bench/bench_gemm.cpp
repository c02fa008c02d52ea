// GEMM benchmarks: our SGEMM against the reference measured in the same run.
//   CPU: kernels::gemm_cpu<float> vs OpenBLAS cblas_sgemm (MN_HAVE_OPENBLAS), both
//        with mn::num_threads() threads; square 256..2048 (4096^3 is left out on
//        the CPU: ~1.4 s per call on 2 cores would push the run past 3 minutes)
//        and the Koch dense layer (150 x 9216) . (9216 x 4096).
//   GPU: kernels::gemm_cuda<float> (Tiled, and Naive up to 2048) vs cuBLAS SGEMM
//        with TF32 off (CUBLAS_DEFAULT_MATH), square 256..4096 and the Koch layer;
//        and on tensor cores on both sides: ours at precision tf32 (our mma.sync
//        kernel) as BM_gpu_ours_tf32 (the older WMMA kernel, CudaGemmVariant::
//        TensorCoreTF32, as BM_gpu_ours_tf32_wmma) vs cuBLAS with
//        CUBLAS_TF32_TENSOR_OP_MATH as BM_gpu_cublas_tf32; ours at precision bf16
//        (float operands rounded to bfloat16 in the kernel) as BM_gpu_ours_bf16 vs
//        cublasGemmEx on bfloat16 copies of A and B (float C, CUBLAS_COMPUTE_32F:
//        PyTorch autocast's matmul, but a float output) as BM_gpu_cublas_bf16.
//        Timed with CUDA events (manual time), the L2 flushed (memset of 2 x L2)
//        before each call.
//        Skipped with an error message when no GPU is present.
// Every benchmark checks its result before timing: 64 sampled entries against a
// double-precision dot product (tolerance 8 sqrt(K) u sum|a b|, see
// tests/kernels/test_gemm.cpp; with TF32 plus 2 * 2^-10 sum|a b|, see
// tests/kernels/test_tf32.cpp), and on the GPU the whole matrix against cuBLAS
// in the same math mode.
// Counters: GFLOP/s (2 M N K per call). At exit a table of ours/reference ratios
// is printed. The committed CPU result (shared 2-core machine, so medians of 5):
//   bench_gemm --benchmark_filter=BM_cpu --benchmark_repetitions=5
//     --benchmark_report_aggregates_only=true
//     --benchmark_out=bench/results/2026-11-21-cpu-gemm.json --benchmark_out_format=json
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cuda/gemm.h"
#include "kernels/gemm.h"
#include "bench/bench_util.h"
#include "kernels/gemm_config.h"
#include "runtime/cpu_features.h"
#include "runtime/device.h"
#include "runtime/parallel.h"
#include "runtime/tensor.h"

#ifdef MN_HAVE_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename(void);
extern "C" char* openblas_get_config(void);
#endif
#if defined(MN_WITH_CUDA) && defined(MN_HAVE_CUBLAS)
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "runtime/cuda_check.h"
#define MN_BENCH_GPU 1
#endif

namespace {

using mn::kernels::gemm_cpu;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> U(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = U(g);
  return v;
}

// Row-major C = A B; checks 64 sampled entries against a double dot product.
// round: the inputs were rounded (TF32: each product off by up to 2^-10 |a b|, BF16:
// 2^-8 |a b|; doubled for the tensor cores' accumulation); 0 for FP32.
constexpr double kTf32Round = 1.0 / 1024, kBf16Round = 1.0 / 256;
bool sample_check(int64_t M, int64_t N, int64_t K, const std::vector<float>& A,
                  const std::vector<float>& B, const std::vector<float>& C, std::string* why,
                  double round = 0) {
  std::mt19937 g(7);
  const double u = std::numeric_limits<float>::epsilon() / 2;
  for (int s = 0; s < 64; ++s) {
    const int64_t i = g() % M, j = g() % N;
    double acc = 0, mag = 0;
    for (int64_t k = 0; k < K; ++k) {
      acc += double(A[i * K + k]) * B[k * N + j];
      mag += std::abs(double(A[i * K + k]) * B[k * N + j]);
    }
    const double tol = 8 * (std::sqrt(double(K)) + 2) * u * mag + 2 * round * mag;
    if (std::abs(acc - C[i * N + j]) > tol) {
      *why = "C[" + std::to_string(i) + "," + std::to_string(j) + "] = " +
             std::to_string(C[i * N + j]) + ", expected " + std::to_string(acc);
      return false;
    }
  }
  return true;
}

struct CpuCase {
  int64_t M, N, K;
  std::vector<float> A, B, C;
  CpuCase(int64_t m, int64_t n, int64_t k)
      : M(m), N(n), K(k), A(random_floats(m * k, 1)), B(random_floats(k * n, 2)), C(m * n) {}
};

void set_flops(benchmark::State& st, int64_t M, int64_t N, int64_t K) {
  st.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * M * N * K * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["M"] = double(M), st.counters["N"] = double(N), st.counters["K"] = double(K);
}

// ---- CPU ----------------------------------------------------------------------------
template <typename Run>
void cpu_bench(benchmark::State& st, int64_t M, int64_t N, int64_t K, Run run) {
  CpuCase c(M, N, K);
  run(c);  // warm-up and the correctness check
  std::string why;
  if (!sample_check(M, N, K, c.A, c.B, c.C, &why)) {
    st.SkipWithError(("wrong result before timing: " + why).c_str());
    return;
  }
  for (auto _ : st) {
    run(c);
    benchmark::ClobberMemory();
  }
  set_flops(st, M, N, K);
  st.counters["threads"] = mn::num_threads();
}

void BM_cpu_ours(benchmark::State& st, int64_t M, int64_t N, int64_t K) {
  cpu_bench(st, M, N, K, [](CpuCase& c) {
    gemm_cpu<float>(false, false, c.M, c.N, c.K, 1.f, c.A.data(), c.K, c.B.data(), c.N, 0.f,
                    c.C.data(), c.N);
  });
}

#ifdef MN_HAVE_OPENBLAS
void BM_cpu_openblas(benchmark::State& st, int64_t M, int64_t N, int64_t K) {
  openblas_set_num_threads(mn::num_threads());
  cpu_bench(st, M, N, K, [](CpuCase& c) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(c.M), int(c.N), int(c.K), 1.f,
                c.A.data(), int(c.K), c.B.data(), int(c.N), 0.f, c.C.data(), int(c.N));
  });
}
#endif

// ---- GPU ----------------------------------------------------------------------------
#ifdef MN_BENCH_GPU
struct GpuCase {
  int64_t M, N, K;
  std::vector<float> hA, hB;
  mn::Tensor A, B, C, flush;
  mn::Tensor A16, B16;  // bfloat16 copies (raw bytes), made by the cuBLAS BF16 case
  GpuCase(int64_t m, int64_t n, int64_t k)
      : M(m), N(n), K(k), hA(random_floats(m * k, 1)), hB(random_floats(k * n, 2)) {
    A = mn::Tensor::from_vector(hA, {m, k}, mn::Device::cuda());
    B = mn::Tensor::from_vector(hB, {k, n}, mn::Device::cuda());
    C = mn::Tensor::empty({m, n}, mn::DType::F32, mn::Device::cuda());
    // 2 x L2 (100-120 MB on an H100/H200): a memset of it evicts A, B and C.
    flush = mn::Tensor::empty({int64_t(mn::bench::l2_flush_bytes() / sizeof(float))},
                              mn::DType::F32, mn::Device::cuda());
  }
};

cublasHandle_t make_cublas(cublasMath_t math) {
  cublasHandle_t x;
  if (cublasCreate(&x) != CUBLAS_STATUS_SUCCESS) MN_THROW("cublasCreate failed");
  if (cublasSetMathMode(x, math) != CUBLAS_STATUS_SUCCESS ||
      cublasSetStream(x, mn::cuda::stream()) != CUBLAS_STATUS_SUCCESS)
    MN_THROW("cublasSetMathMode/cublasSetStream failed");
  return x;
}
// FP32 FMA, no TF32 tensor cores (CUBLAS_DEFAULT_MATH never uses TF32 for SGEMM).
cublasHandle_t cublas() {
  static cublasHandle_t h = make_cublas(CUBLAS_DEFAULT_MATH);
  return h;
}
// SGEMM on TF32 tensor cores (inputs rounded to TF32, float accumulation).
cublasHandle_t cublas_tf32() {
  static cublasHandle_t h = make_cublas(CUBLAS_TF32_TENSOR_OP_MATH);
  return h;
}

// Row-major C = A B is column-major C^T = B^T A^T.
void run_cublas_with(cublasHandle_t h, GpuCase& c) {
  const float one = 1.f, zero = 0.f;
  const cublasStatus_t st =
      cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, int(c.N), int(c.M), int(c.K), &one,
                  c.B.data<float>(), int(c.N), c.A.data<float>(), int(c.K), &zero,
                  c.C.data<float>(), int(c.N));
  if (st != CUBLAS_STATUS_SUCCESS) MN_THROW("cublasSgemm failed with status ", int(st));
}
void run_cublas(GpuCase& c) { run_cublas_with(cublas(), c); }
void run_cublas_tf32(GpuCase& c) { run_cublas_with(cublas_tf32(), c); }

// bfloat16 (nearest even) bytes of a float vector, on the GPU.
mn::Tensor bf16_bytes(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t b;
    std::memcpy(&b, &v[i], 4);
    h[i] = uint16_t((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
  }
  std::vector<uint8_t> bytes(2 * h.size());
  std::memcpy(bytes.data(), h.data(), bytes.size());
  return mn::Tensor::from_vector(bytes, {int64_t(bytes.size())}, mn::Device::cuda());
}
// C (float) = A B on bfloat16 copies of A and B, float accumulation.
void run_cublas_bf16(GpuCase& c) {
  if (!c.A16.defined()) c.A16 = bf16_bytes(c.hA), c.B16 = bf16_bytes(c.hB);
  const float one = 1.f, zero = 0.f;
  const cublasStatus_t st =
      cublasGemmEx(cublas(), CUBLAS_OP_N, CUBLAS_OP_N, int(c.N), int(c.M), int(c.K), &one, c.B16.raw_data(),
                   CUDA_R_16BF, int(c.N), c.A16.raw_data(), CUDA_R_16BF, int(c.K), &zero, c.C.data<float>(),
                   CUDA_R_32F, int(c.N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) MN_THROW("cublasGemmEx (bf16) failed with status ", int(st));
}

void run_ours(GpuCase& c) {
  mn::kernels::gemm_cuda<float>(false, false, c.M, c.N, c.K, 1.f, c.A.data<float>(), c.K,
                                c.B.data<float>(), c.N, 0.f, c.C.data<float>(), c.N);
}

enum class Mode { Fp32, Tf32, Bf16 };

template <typename Run>
void gpu_bench_body(benchmark::State& st, int64_t M, int64_t N, int64_t K, Run run, Mode mode);

// mode: `run` rounds its inputs to TF32 or BF16; it is then checked against cuBLAS in
// the same precision, with that precision's tolerances.
template <typename Run>
void gpu_bench(benchmark::State& st, int64_t M, int64_t N, int64_t K, Run run, Mode mode = Mode::Fp32) {
  if (!mn::cuda_available()) {
    st.SkipWithError("no CUDA device present: GPU benchmark skipped");
    return;
  }
  mn::bench::guard(st, [&] { gpu_bench_body(st, M, N, K, run, mode); });
}

template <typename Run>
void gpu_bench_body(benchmark::State& st, int64_t M, int64_t N, int64_t K, Run run, Mode mode) {
  GpuCase c(M, N, K);
  // Correctness: the whole result against cuBLAS (same precision), relative to the
  // largest entry, and 64 entries against the double dot product. With TF32 both
  // sides round the inputs to TF32; their difference is of the order of the TF32
  // error, ~2^-11 sqrt(K) rms|a b| (a few 1e-4 of the largest entry at K = 4096):
  // 1e-2 leaves margin and still fails any indexing error (differences ~ max|C|);
  // BF16 rounds to 2^-9, so 3e-2 (both sides round the same inputs the same way).
  const bool tf32 = mode == Mode::Tf32;
  if (mode == Mode::Tf32)
    run_cublas_tf32(c);
  else if (mode == Mode::Bf16)
    run_cublas_bf16(c);
  else
    run_cublas(c);
  std::vector<float> ref = c.C.to_vector<float>();
  c.C.fill_(std::numeric_limits<double>::quiet_NaN());
  run(c);
  std::vector<float> got = c.C.to_vector<float>();
  double cmax = 0, dmax = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    cmax = std::max(cmax, double(std::abs(ref[i])));
    const double d = std::abs(double(ref[i]) - got[i]);
    dmax = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(dmax, d);
  }
  std::string why;
  const double rel = mode == Mode::Bf16 ? 3e-2 : tf32 ? 1e-2 : 1e-4;
  const double round = mode == Mode::Bf16 ? kBf16Round : tf32 ? kTf32Round : 0.0;
  if (dmax > rel * cmax || !sample_check(M, N, K, c.hA, c.hB, got, &why, round)) {
    st.SkipWithError(("wrong result before timing: max|ours - cuBLAS| = " + std::to_string(dmax) +
                      " (max|C| " + std::to_string(cmax) + ") " + why)
                         .c_str());
    return;
  }
  cudaStream_t s = mn::cuda::stream();
  mn::bench::EventTimer timer;
  for (int w = 0; w < 3; ++w) run(c);  // warm-up
  for (auto _ : st) {
    CUDA_CHECK(cudaMemsetAsync(c.flush.raw_data(), 0, c.flush.nbytes(), s));  // flush L2
    st.SetIterationTime(timer.seconds([&] { run(c); }));
  }
  set_flops(st, M, N, K);
}

void BM_gpu_ours(benchmark::State& st, int64_t M, int64_t N, int64_t K) {
  mn::kernels::set_cuda_gemm_variant(mn::kernels::CudaGemmVariant::Tiled);
  mn::kernels::Tf32Scope fp32(false);  // FP32 even when MN_ALLOW_TF32=1 is set
  gpu_bench(st, M, N, K, run_ours);
}
void BM_gpu_ours_naive(benchmark::State& st, int64_t M, int64_t N, int64_t K) {
  mn::kernels::set_cuda_gemm_variant(mn::kernels::CudaGemmVariant::Naive);
  gpu_bench(st, M, N, K, run_ours);
  mn::kernels::set_cuda_gemm_variant(mn::kernels::CudaGemmVariant::Tiled);
}
void BM_gpu_cublas(benchmark::State& st, int64_t M, int64_t N, int64_t K) {
  gpu_bench(st, M, N, K, run_cublas);
}
// TF32 / BF16 as a training run would use them: the precision set, the default variant.
void BM_gpu_ours_tf32(benchmark::State& st, int64_t M, int64_t N, int64_t K) {
  mn::kernels::set_cuda_gemm_variant(mn::kernels::CudaGemmVariant::Tiled);
  mn::kernels::Tf32Scope tf32(true);
  gpu_bench(st, M, N, K, run_ours, Mode::Tf32);
}
void BM_gpu_ours_tf32_wmma(benchmark::State& st, int64_t M, int64_t N, int64_t K) {
  mn::kernels::set_cuda_gemm_variant(mn::kernels::CudaGemmVariant::TensorCoreTF32);
  gpu_bench(st, M, N, K, run_ours, Mode::Tf32);
  mn::kernels::set_cuda_gemm_variant(mn::kernels::CudaGemmVariant::Tiled);
}
void BM_gpu_ours_bf16(benchmark::State& st, int64_t M, int64_t N, int64_t K) {
  mn::kernels::set_cuda_gemm_variant(mn::kernels::CudaGemmVariant::Tiled);
  mn::kernels::PrecisionScope bf16(mn::kernels::Precision::BF16);
  gpu_bench(st, M, N, K, run_ours, Mode::Bf16);
}
void BM_gpu_cublas_tf32(benchmark::State& st, int64_t M, int64_t N, int64_t K) {
  gpu_bench(st, M, N, K, run_cublas_tf32, Mode::Tf32);
}
void BM_gpu_cublas_bf16(benchmark::State& st, int64_t M, int64_t N, int64_t K) {
  gpu_bench(st, M, N, K, run_cublas_bf16, Mode::Bf16);
}
#endif

// Prints each reference's GFLOP/s next to ours and the ratio, after the normal output.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  // No ANSI colours: the output is usually tee'd into a log (tools/gpu_run.sh).
  RatioReporter() : ConsoleReporter(OO_None) {}
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      auto it = r.counters.find("GFLOP/s");
      if (!r.error_occurred && it != r.counters.end()) gflops_[r.benchmark_name()] = it->second;
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\nRatios (ours / reference, GFLOP/s):\n");
    for (const auto& [name, g] : gflops_) {
      for (const auto& [ours, ref] : {std::pair<std::string, std::string>{"BM_cpu_ours", "BM_cpu_openblas"},
                                      {"BM_gpu_ours", "BM_gpu_cublas"},
                                      {"BM_gpu_ours_tf32", "BM_gpu_cublas_tf32"},
                                      {"BM_gpu_ours_tf32_wmma", "BM_gpu_cublas_tf32"},
                                      {"BM_gpu_ours_bf16", "BM_gpu_cublas_bf16"}}) {
        if (name.rfind(ours + "/", 0) != 0) continue;
        const std::string ref_name = ref + name.substr(ours.size());
        auto r = gflops_.find(ref_name);
        if (r == gflops_.end()) continue;
        std::printf("  %-40s %9.1f vs %9.1f  ratio %.2f\n", name.c_str(), g, r->second,
                    g / r->second);
      }
    }
  }

 private:
  std::map<std::string, double> gflops_;
};

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

void register_all() {
  struct Shape3 {
    const char* name;
    int64_t M, N, K;
  };
  std::vector<Shape3> cpu = {{"256", 256, 256, 256},    {"512", 512, 512, 512},
                             {"1024", 1024, 1024, 1024}, {"2048", 2048, 2048, 2048},
                             {"koch_fc", 150, 4096, 9216}};
  for (const auto& s : cpu) {
    benchmark::RegisterBenchmark((std::string("BM_cpu_ours/") + s.name).c_str(), BM_cpu_ours, s.M,
                                 s.N, s.K)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
#ifdef MN_HAVE_OPENBLAS
    benchmark::RegisterBenchmark((std::string("BM_cpu_openblas/") + s.name).c_str(),
                                 BM_cpu_openblas, s.M, s.N, s.K)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
#endif
  }
#ifdef MN_BENCH_GPU
  std::vector<Shape3> gpu = cpu;
  gpu.insert(gpu.begin() + 4, {"4096", 4096, 4096, 4096});
  for (const auto& s : gpu) {
    const std::string n = s.name;
    for (const auto& [prefix, fn] : std::vector<std::pair<std::string, void (*)(benchmark::State&, int64_t, int64_t, int64_t)>>{
             {"BM_gpu_ours/", BM_gpu_ours},
             {"BM_gpu_cublas/", BM_gpu_cublas},
             {"BM_gpu_ours_tf32/", BM_gpu_ours_tf32},
             {"BM_gpu_ours_tf32_wmma/", BM_gpu_ours_tf32_wmma},
             {"BM_gpu_cublas_tf32/", BM_gpu_cublas_tf32},
             {"BM_gpu_ours_bf16/", BM_gpu_ours_bf16},
             {"BM_gpu_cublas_bf16/", BM_gpu_cublas_bf16}})
      benchmark::RegisterBenchmark((prefix + n).c_str(), fn, s.M, s.N, s.K)
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    if (s.M * s.N * s.K <= int64_t(2048) * 2048 * 2048)
      benchmark::RegisterBenchmark(("BM_gpu_ours_naive/" + n).c_str(), BM_gpu_ours_naive, s.M,
                                   s.N, s.K)
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
  }
#endif
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("cpu_model", cpu_model());
  benchmark::AddCustomContext("mn_threads", std::to_string(mn::num_threads()));
  const mn::CpuIsa isa = mn::cpu_isa();
  benchmark::AddCustomContext("mn_cpu_isa", mn::cpu_isa_name(isa));
  benchmark::AddCustomContext("cpu_gemm_kernel",
                              isa == mn::CpuIsa::Avx512 ? "packed avx512 12x32"
                              : isa == mn::CpuIsa::Avx2 ? "packed avx2+fma 6x16"
                                                        : "packed portable");
  benchmark::AddCustomContext("gpu", mn::cuda_available() ? mn::device_name(mn::Device::cuda())
                                                          : std::string("none"));
#ifdef MN_HAVE_OPENBLAS
  benchmark::AddCustomContext("cpu_reference", "OpenBLAS cblas_sgemm");
  // The reference must use its best kernel: OPENBLAS_CORETYPE=Haswell (set in
  // this environment) forces AVX2; run with `env -u OPENBLAS_CORETYPE -u
  // OPENBLAS_L2_SIZE` (see bench/README.md). Record what OpenBLAS picked.
  benchmark::AddCustomContext("openblas_core", openblas_get_corename());
  benchmark::AddCustomContext("openblas_config", openblas_get_config());
  const char* ct = std::getenv("OPENBLAS_CORETYPE");
  benchmark::AddCustomContext("OPENBLAS_CORETYPE", ct ? ct : "(unset)");
#endif
  register_all();
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
