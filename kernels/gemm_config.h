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
enum class CudaGemmVariant : int { Naive = 1, Tiled = 2, TensorCoreTF32 = 3 };

// Process-wide selection (default Auto / Tiled). Selecting PackedAvx2 or
// PackedAvx512 on a CPU without that instruction set throws.
void set_cpu_gemm_variant(CpuGemmVariant v);
CpuGemmVariant cpu_gemm_variant();
void set_cuda_gemm_variant(CudaGemmVariant v);
CudaGemmVariant cuda_gemm_variant();

// TF32 tensor cores for float32 on CUDA (like PyTorch's allow_tf32 switches for
// convolutions and matrix products).
// When on, the float32 CUDA GEMM (Tiled -> TensorCoreTF32) and the implicit-GEMM
// conv2d (forward, backward-data, backward-weight; algo Default or Gemm) round
// every input element to TF32 -- a 10-bit mantissa, relative error up to 2^-11 --
// and multiply on tensor cores, accumulating in float32. Outputs then differ from
// FP32 by roughly 2^-10 * sum_k |a_ik b_kj|. Needs compute capability >= 8.0 (a
// launch on an older device throws). double, the CPU and the Naive / Direct
// oracles are never affected. Default: off, unless the environment variable
// MN_ALLOW_TF32=1 is set (read once, at the first call of either function).
// Two switches, as PyTorch's: allow_tf32() for matrix products (the dense
// layers; PyTorch's matmul switch, off by default) and allow_tf32_conv() for the
// convolutions (PyTorch's convolution switch, on by default). set_allow_tf32 sets both;
// set_allow_tf32_conv only the second. The library starts with both off; the
// study binaries' --tf32 defaults to PyTorch's defaults (convolutions on TF32,
// dense layers FP32).
void set_allow_tf32(bool on);
bool allow_tf32();
void set_allow_tf32_conv(bool on);
bool allow_tf32_conv();

// Sets both TF32 switches for a scope and restores the previous settings on
// exit (benchmarks and tests that compare both settings).
class Tf32Scope {
 public:
  explicit Tf32Scope(bool on) : saved_(allow_tf32()), saved_conv_(allow_tf32_conv()) { set_allow_tf32(on); }
  ~Tf32Scope() {
    set_allow_tf32(saved_);
    set_allow_tf32_conv(saved_conv_);
  }
  Tf32Scope(const Tf32Scope&) = delete;
  Tf32Scope& operator=(const Tf32Scope&) = delete;

 private:
  bool saved_, saved_conv_;
};

// The precision policy: TF32 never reaches distances, miners or losses (the Gram form
// of a pairwise distance, |a|^2 + |b|^2 - 2 a.b, cancels, and TF32's 2^-11 relative
// rounding of a.b swamps the small differences that mining ranks; measured in
// tests/kernels/test_tf32.cpp). Code computing them holds an Fp32Scope: while one is
// alive on this thread, the float32 CUDA GEMM and convolutions run in FP32 whatever
// allow_tf32() or the selected GEMM variant say. TF32 stays a choice for the layers
// only (--tf32, as PyTorch's switches). Scopes nest; they are per thread, so a data
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

// Three CUDA speed-ups that can be switched off for before/after measurements (the
// GPU benches run both settings in one session) and as a way around a suspected
// kernel bug; both change only the order of float additions, never what is summed.
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
// Read once from the environment (default on), then set_cuda_speedups() changes them.
struct CudaSpeedups {
  bool split_k = true;
  bool conv_bwd_data_flip = true;
  bool conv_wide_tile = true;
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
