// GEMM variant selection (owned by the GEMM kernels; used by tests and benches)
// and the process-wide TF32 switch for float32 GEMMs and convolutions on CUDA.
//
// CPU variants (kernels/cpu/gemm*.cpp):
//   1 Reference      textbook triple loop, the oracle; also used for tiny problems.
//   2 PackedPortable cache-blocked (MC/KC/NC), packed A/B panels, a plain C++
//                    MRxNR register-blocked micro-kernel the compiler auto-vectorises.
//   3 PackedAvx2     same blocking, AVX2+FMA intrinsic micro-kernel (6x16 float,
//                    6x8 double), chosen at run time when the CPU supports it.
//   4 PackedAvx512   same blocking, AVX-512 micro-kernel (12x32 float, 12x16 double),
//                    compiled with per-file AVX-512 flags (kernels/cpu/gemm_avx512.cpp).
//   Auto (0)         by cpu_isa() (runtime/cpu_features.h: CPUID, or MN_CPU_ISA):
//                    avx512 -> 4, avx2 -> 3, scalar -> 2 (tiny problems use 1).
// CUDA variants (kernels/cuda/gemm.cu):
//   1 Naive          one thread per C element, the GPU oracle.
//   2 Tiled          128x128x8 block tile, 8x8 register tile per thread,
//                    double-buffered shared memory, float4 loads when aligned.
#pragma once

namespace mn::kernels {

enum class CpuGemmVariant : int {
  Auto = 0,
  Reference = 1,
  PackedPortable = 2,
  PackedAvx2 = 3,
  PackedAvx512 = 4
};
// Tiled runs at matmul_precision(): FP32 here, TF32 / BF16 on the mma.sync kernel
// (kernels/cuda/mma_gemm.cu). TensorCoreTF32 is the older WMMA TF32 kernel whatever the
// precision says (float; double runs Tiled); TensorCoreMma the mma.sync kernel in TF32,
// or BF16 when matmul_precision() is BF16.
enum class CudaGemmVariant : int { Naive = 1, Tiled = 2, TensorCoreTF32 = 3, TensorCoreMma = 4 };

// Process-wide selection (default Auto / Tiled). Selecting PackedAvx2 or
// PackedAvx512 on a CPU without that instruction set throws.
void set_cpu_gemm_variant(CpuGemmVariant v);
CpuGemmVariant cpu_gemm_variant();
void set_cuda_gemm_variant(CudaGemmVariant v);
CudaGemmVariant cuda_gemm_variant();

// The precision of float32 products on CUDA: the process-wide policy a user sets once
// (--precision on every study binary, experiments/common/harness.cpp).
//   FP32  the FP32 kernels (the CUDA cores).
//   TF32  tensor cores with TF32 inputs (10 explicit mantissa bits): every input element
//         rounded to nearest (relative error up to 2^-11), products accumulated in
//         float32. As PyTorch's allow_tf32 switches.
//   BF16  tensor cores with BF16 inputs (7 explicit mantissa bits, relative error up to
//         2^-9), products accumulated in float32: PyTorch autocast(bfloat16)'s numerics
//         for convolutions and matrix products. Tensors stay float32 in memory (master
//         weights, activations, gradients, optimizer state, checkpoints); the kernels
//         round their operands to BF16 on the way into the tensor cores and write float32
//         results (autocast would also round the outputs to bf16: ours are more accurate).
// Two settings, as PyTorch's two switches: matmul_precision() for matrix products (the
// dense layers) and conv_precision() for convolutions (forward, backward-data,
// backward-weight; algo Default or Gemm). double, the CPU and the Naive / Direct oracles
// are never affected. TF32 and BF16 need compute capability >= 8.0 (a launch on an older
// device throws). Default: FP32 for both, unless the environment sets MN_PRECISION
// (fp32, tf32 or bf16: both settings) or MN_ALLOW_TF32=1 (TF32 for both), read once at
// the first call. The kernels (kernels/cuda/mma_*.cu): our own mma.sync implicit GEMM
// for TF32 and BF16; the older WMMA TF32 kernels stay selectable (CudaGemmVariant::
// TensorCoreTF32, CudaSpeedups::tc_mma = false) for comparison.
enum class Precision : int { FP32 = 0, TF32 = 1, BF16 = 2 };
const char* precision_name(Precision p);  // "fp32", "tf32", "bf16"
// Parses fp32 / tf32 / bf16; false for anything else.
bool parse_precision(const char* s, Precision* out);
void set_matmul_precision(Precision p);
Precision matmul_precision();
void set_conv_precision(Precision p);
Precision conv_precision();
void set_precision(Precision p);  // both

// The TF32 switches of earlier versions, in terms of the precisions: allow_tf32() is
// matmul_precision() == TF32, allow_tf32_conv() is conv_precision() == TF32;
// set_allow_tf32(on) sets both precisions to TF32 (on) or FP32 (off),
// set_allow_tf32_conv only the convolutions'.
void set_allow_tf32(bool on);
bool allow_tf32();
void set_allow_tf32_conv(bool on);
bool allow_tf32_conv();

// Sets both precisions for a scope and restores the previous settings on exit
// (benchmarks and tests that compare settings).
class PrecisionScope {
 public:
  explicit PrecisionScope(Precision p) : saved_(matmul_precision()), saved_conv_(conv_precision()) {
    set_precision(p);
  }
  ~PrecisionScope() {
    set_matmul_precision(saved_);
    set_conv_precision(saved_conv_);
  }
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  Precision saved_, saved_conv_;
};
class Tf32Scope : public PrecisionScope {
 public:
  explicit Tf32Scope(bool on) : PrecisionScope(on ? Precision::TF32 : Precision::FP32) {}
};

// The precision policy: TF32 and BF16 never reach distances, miners or losses (the Gram form
// of a pairwise distance, |a|^2 + |b|^2 - 2 a.b, cancels, and TF32's 2^-11 relative
// rounding of a.b swamps the small differences that mining ranks; measured in
// tests/kernels/test_tf32.cpp). Code computing them holds an Fp32Scope: while one is
// alive on this thread, the float32 CUDA GEMM and convolutions run in FP32 whatever
// the precisions or the selected GEMM variant say. TF32 and BF16 stay a choice for the
// layers only (--precision, as PyTorch's switches and autocast). Scopes nest; they are per thread, so a data
// loader thread never changes what the training thread computes.
class Fp32Scope {
 public:
  Fp32Scope();
  ~Fp32Scope();
  Fp32Scope(const Fp32Scope&) = delete;
  Fp32Scope& operator=(const Fp32Scope&) = delete;
};
// True while this thread holds an Fp32Scope.
bool fp32_forced();

// CUDA speed-ups that can be switched off for before/after measurements (the GPU
// benches run both settings in one session) and as a way around a suspected kernel
// bug; the first three change only the order of float additions, never what is summed.
//   split-K    a float/double GEMM with too few 128x128 output tiles to fill the GPU
//              (the Koch dense layer: 150 x 4096 outputs, 64 tiles, K = 9216) runs as
//              s GEMMs over K / s each into a scratch buffer, then a second kernel
//              sums the s partials in a fixed order (deterministic). Off with
//              MN_CUDA_SPLIT_K=0.
//   flip       a stride-1 conv2d backward-data runs as the forward implicit GEMM of dy
//              with the weights flipped (r, s -> R-1-r, S-1-s) and transposed (k <-> c)
//              into a scratch tensor: the forward's cheaper index decodes instead of
//              the backward gather's stride arithmetic. Off with MN_CONV_BWD_FLIP=0.
//   wide tile  the FP32 implicit-GEMM convolution of 64 or fewer output rows (Koch's
//              layer 1 forward, layer 2 backward-data) with many columns uses 64 x 256
//              tiles instead of 64 x 128 (kernels/cuda/conv2d.cu). Off with
//              MN_CONV_WIDE_TILE=0.
//   tc mma     TF32 convolutions and GEMMs run on the mma.sync kernels (cp.async
//              pipeline, ldmatrix); off: on the older WMMA kernels (BF16 has only the
//              mma.sync kernels). Off with MN_TC_MMA=0.
//   fused relu a convolution followed by ReLU (nn::Conv2d with a fused activation,
//              ag::conv2d_relu) adds bias and applies ReLU in the tensor-core kernel's
//              epilogue instead of a second pass over the output. Off with
//              MN_CONV_FUSED_RELU=0 (then the same values come from two passes).
//   pool scatter  a max-pool backward whose windows do not overlap (stride >= kernel,
//              Koch's 2x2 / 2) runs one thread per output writing its whole window
//              instead of one per input element gathering (kernels/cuda/pool.cu); the
//              same bits. Off with MN_POOL_SCATTER=0.
//   optim one launch  Adam / AdamW update every parameter group of one dtype and
//              device in one launch, the bias corrections and the device step counts
//              advanced inside it (kernels/cuda/optim.cu), instead of two launches per
//              group; the same arithmetic. Off with MN_OPTIM_ONE_LAUNCH=0.
// Read once from the environment (default on), then set_cuda_speedups() changes them.
struct CudaSpeedups {
  bool split_k = true;
  bool conv_bwd_data_flip = true;
  bool conv_wide_tile = true;
  bool tc_mma = true;
  bool conv_fused_relu = true;
  bool pool_scatter = true;
  bool optim_one_launch = true;
};
CudaSpeedups cuda_speedups();
void set_cuda_speedups(const CudaSpeedups& s);

#ifdef MN_WITH_CUDA
// Throws (naming `op` and the device) unless the current CUDA device can run the
// TF32 kernels (compute capability >= 8.0). Cached per device; defined in gemm.cu.
void check_tf32_device(const char* op);
#endif

// Run-time CPU feature checks (CPUID + OS register-state support; see
// runtime/cpu_features.h, which also holds the MN_CPU_ISA override).
bool cpu_has_avx2_fma();
bool cpu_has_avx512();

}  // namespace mn::kernels
