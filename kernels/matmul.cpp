// Tensor-level matmul (2-D and batched 3-D, with transposes) dispatching to our
// CPU or CUDA GEMM, plus the process-wide CUDA GEMM variant selection and the
// precision policy of kernels/gemm_config.h (here so that they exist in CPU-only builds too).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/gemm.h"
#include "kernels/cuda/gemm.h"
#include "kernels/gemm.h"
#include "kernels/gemm_config.h"
#include "runtime/dispatch.h"

namespace mn::kernels {

namespace {
std::atomic<int> g_cuda_variant{static_cast<int>(CudaGemmVariant::Tiled)};

// The precisions, initialised once from MN_PRECISION (fp32, tf32, bf16) or, failing
// that, MN_ALLOW_TF32=1 (TF32). An unknown MN_PRECISION is an error at the first use.
Precision env_precision() {
  if (const char* e = std::getenv("MN_PRECISION"); e != nullptr && *e != '\0') {
    Precision p = Precision::FP32;
    MN_CHECK(parse_precision(e, &p), "MN_PRECISION=", e, ": expected fp32, tf32 or bf16");
    return p;
  }
  const char* e = std::getenv("MN_ALLOW_TF32");
  return e != nullptr && std::strcmp(e, "1") == 0 ? Precision::TF32 : Precision::FP32;
}
std::atomic<int>& matmul_flag() {
  static std::atomic<int> flag{static_cast<int>(env_precision())};
  return flag;
}
std::atomic<int>& conv_flag() {
  static std::atomic<int> flag{matmul_flag().load()};
  return flag;
}
}  // namespace

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::FP32: return "fp32";
    case Precision::TF32: return "tf32";
    case Precision::BF16: return "bf16";
  }
  return "?";
}
bool parse_precision(const char* s, Precision* out) {
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16})
    if (s != nullptr && std::strcmp(s, precision_name(p)) == 0) {
      *out = p;
      return true;
    }
  return false;
}
void set_matmul_precision(Precision p) { matmul_flag().store(static_cast<int>(p)); }
Precision matmul_precision() { return static_cast<Precision>(matmul_flag().load()); }
void set_conv_precision(Precision p) { conv_flag().store(static_cast<int>(p)); }
Precision conv_precision() { return static_cast<Precision>(conv_flag().load()); }
void set_precision(Precision p) {
  set_matmul_precision(p);
  set_conv_precision(p);
}

void set_allow_tf32(bool on) { set_precision(on ? Precision::TF32 : Precision::FP32); }
void set_allow_tf32_conv(bool on) { set_conv_precision(on ? Precision::TF32 : Precision::FP32); }
bool allow_tf32_conv() { return conv_precision() == Precision::TF32; }
bool allow_tf32() { return matmul_precision() == Precision::TF32; }

namespace {
thread_local int t_fp32_depth = 0;
}  // namespace
Fp32Scope::Fp32Scope() { ++t_fp32_depth; }
Fp32Scope::~Fp32Scope() { --t_fp32_depth; }
bool fp32_forced() { return t_fp32_depth > 0; }

namespace {
bool env_on(const char* name) {  // unset or anything but "0": on
  const char* e = std::getenv(name);
  return e == nullptr || std::strcmp(e, "0") != 0;
}
std::atomic<bool> g_split_k{env_on("MN_CUDA_SPLIT_K")};
std::atomic<bool> g_conv_flip{env_on("MN_CONV_BWD_FLIP")};
std::atomic<bool> g_conv_wide{env_on("MN_CONV_WIDE_TILE")};
std::atomic<bool> g_tc_mma{env_on("MN_TC_MMA")};
std::atomic<bool> g_fused_relu{env_on("MN_CONV_FUSED_RELU")};
std::atomic<bool> g_pool_scatter{env_on("MN_POOL_SCATTER")};
std::atomic<bool> g_optim_one_launch{env_on("MN_OPTIM_ONE_LAUNCH")};
}  // namespace
CudaSpeedups cuda_speedups() {
  CudaSpeedups s;
  s.split_k = g_split_k.load();
  s.conv_bwd_data_flip = g_conv_flip.load();
  s.conv_wide_tile = g_conv_wide.load();
  s.tc_mma = g_tc_mma.load();
  s.conv_fused_relu = g_fused_relu.load();
  s.pool_scatter = g_pool_scatter.load();
  s.optim_one_launch = g_optim_one_launch.load();
  return s;
}
void set_cuda_speedups(const CudaSpeedups& s) {
  g_split_k.store(s.split_k);
  g_conv_flip.store(s.conv_bwd_data_flip);
  g_conv_wide.store(s.conv_wide_tile);
  g_tc_mma.store(s.tc_mma);
  g_fused_relu.store(s.conv_fused_relu);
  g_pool_scatter.store(s.pool_scatter);
  g_optim_one_launch.store(s.optim_one_launch);
}

void set_cuda_gemm_variant(CudaGemmVariant v) {
  MN_CHECK(v == CudaGemmVariant::Naive || v == CudaGemmVariant::Tiled ||
               v == CudaGemmVariant::TensorCoreTF32 || v == CudaGemmVariant::TensorCoreMma,
           "set_cuda_gemm_variant: unknown variant ", static_cast<int>(v));
  g_cuda_variant.store(static_cast<int>(v));
}
CudaGemmVariant cuda_gemm_variant() { return static_cast<CudaGemmVariant>(g_cuda_variant.load()); }

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  static const char* op = "matmul";
  check_defined(op, a, "a");
  check_defined(op, b, "b");
  check_floating(op, a);
  check_same_dtype(op, a, b);
  check_same_device(op, a, b);
  MN_CHECK((a.dim() == 2 || a.dim() == 3) && a.dim() == b.dim(), op,
           ": expected two 2-D or two 3-D tensors, got a ", shape_str(a.shape()), " and b ",
           shape_str(b.shape()));
  const bool batched = a.dim() == 3;
  const int64_t o = batched ? 1 : 0;
  const int64_t batch = batched ? a.size(0) : 1;
  MN_CHECK(!batched || b.size(0) == batch, op, ": batch sizes differ: a ", shape_str(a.shape()),
           " b ", shape_str(b.shape()));
  // a is (M, K), or (K, M) with trans_a; b is (K, N), or (N, K) with trans_b.
  const int64_t M = trans_a ? a.size(o + 1) : a.size(o);
  const int64_t Ka = trans_a ? a.size(o) : a.size(o + 1);
  const int64_t Kb = trans_b ? b.size(o + 1) : b.size(o);
  const int64_t N = trans_b ? b.size(o) : b.size(o + 1);
  MN_CHECK(Ka == Kb, op, ": inner dimensions differ: a ", shape_str(a.shape()),
           trans_a ? " (transposed)" : "", " b ", shape_str(b.shape()),
           trans_b ? " (transposed)" : "");
  const int64_t K = Ka;

  const Tensor ac = a.contiguous();
  const Tensor bc = b.contiguous();
  const Shape out_shape = batched ? Shape{batch, M, N} : Shape{M, N};
  Tensor out = Tensor::empty(out_shape, a.dtype(), a.device());
  const int64_t lda = trans_a ? M : K, ldb = trans_b ? K : N;
  MN_DISPATCH_FLOAT(a.dtype(), op, [&] {
    const scalar_t* A = ac.data<scalar_t>();
    const scalar_t* B = bc.data<scalar_t>();
    scalar_t* C = out.data<scalar_t>();
    if (a.is_cuda()) {
      MN_CUDA_BRANCH(op, a.device(), a.dtype(), {
        check_cuda_usable(op, a);
        gemm_batched_cuda<scalar_t>(trans_a, trans_b, batch, M, N, K, scalar_t(1), A,
                                    std::max<int64_t>(lda, 1), M * K, B, std::max<int64_t>(ldb, 1),
                                    K * N, scalar_t(0), C, std::max<int64_t>(N, 1), M * N);
      });
    } else {
      gemm_batched_cpu<scalar_t>(trans_a, trans_b, batch, M, N, K, scalar_t(1), A,
                                 std::max<int64_t>(lda, 1), M * K, B, std::max<int64_t>(ldb, 1),
                                 K * N, scalar_t(0), C, std::max<int64_t>(N, 1), M * N);
    }
  });
  return out;
}

}  // namespace mn::kernels
