// GEMM variant selection (owned by the GEMM kernels; used by tests and benches).
//
// CPU variants (kernels/cpu/gemm*.cpp):
//   1 Reference      textbook triple loop, the oracle; also used for tiny problems.
//   2 PackedPortable cache-blocked (MC/KC/NC), packed A/B panels, a plain C++
//                    MRxNR register-blocked micro-kernel the compiler auto-vectorises.
//   3 PackedAvx2     same blocking, AVX2+FMA intrinsic micro-kernel (6x16 float,
//                    6x8 double), chosen at run time when the CPU supports it.
//   Auto (0)         3 when AVX2+FMA is present, else 2 (tiny problems use 1).
// CUDA variants (kernels/cuda/gemm.cu):
//   1 Naive          one thread per C element, the GPU oracle.
//   2 Tiled          128x128x8 block tile, 8x8 register tile per thread,
//                    double-buffered shared memory, float4 loads when aligned.
#pragma once

namespace mn::kernels {

enum class CpuGemmVariant : int { Auto = 0, Reference = 1, PackedPortable = 2, PackedAvx2 = 3 };
enum class CudaGemmVariant : int { Naive = 1, Tiled = 2 };

// Process-wide selection (default Auto / Tiled). Selecting PackedAvx2 on a CPU
// without AVX2+FMA throws.
void set_cpu_gemm_variant(CpuGemmVariant v);
CpuGemmVariant cpu_gemm_variant();
void set_cuda_gemm_variant(CudaGemmVariant v);
CudaGemmVariant cuda_gemm_variant();

// Run-time CPU feature check (__builtin_cpu_supports("avx2") && ("fma")).
bool cpu_has_avx2_fma();

}  // namespace mn::kernels
