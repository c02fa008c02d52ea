// Run-time CPU feature detection (CPUID + XGETBV) and the instruction-set path
// the CPU kernels use, as oneDNN and OpenBLAS choose theirs: the library is
// compiled for baseline x86-64 and only the translation units holding SIMD
// micro-kernels are built with wider ISA flags; they are called only when the
// path selected here allows it.
//
// Paths, best first: avx512 (AVX-512 F/BW/VL/DQ with the OS saving zmm state),
// avx2 (AVX2 + FMA with the OS saving ymm state), scalar (portable C++).
// The environment variable MN_CPU_ISA=scalar|avx2|avx512 forces a path (tests
// run every kernel on each path the machine supports); an unknown value, or a
// path this CPU cannot run, is an mn::Error at the first kernel call, never a
// silent downgrade.
#pragma once
#include <string>

namespace mn {

enum class CpuIsa : int { Scalar = 0, Avx2 = 1, Avx512 = 2 };

struct CpuFeatures {
  bool avx2_fma = false;  // AVX2 + FMA3, ymm state enabled by the OS
  bool avx512 = false;    // AVX-512 F + BW + VL + DQ, zmm state enabled by the OS
};

// What the CPU offers (detected once).
const CpuFeatures& cpu_features();
bool cpu_isa_supported(CpuIsa isa);
CpuIsa cpu_isa_best();

// The path the CPU kernels use now: set_cpu_isa's value, else MN_CPU_ISA, else the
// best supported. Throws mn::Error for a bad MN_CPU_ISA value.
CpuIsa cpu_isa();
// Throws mn::Error when this CPU cannot run `isa`.
void set_cpu_isa(CpuIsa isa);

const char* cpu_isa_name(CpuIsa isa);
// "scalar" | "avx2" | "avx512" (case-insensitive); anything else throws, naming `what`.
CpuIsa parse_cpu_isa(const std::string& text, const char* what = "MN_CPU_ISA");

// Sets the path for a scope and restores the previous one (tests, benchmarks).
class CpuIsaScope {
 public:
  explicit CpuIsaScope(CpuIsa isa) : saved_(cpu_isa()) { set_cpu_isa(isa); }
  ~CpuIsaScope() { set_cpu_isa(saved_); }
  CpuIsaScope(const CpuIsaScope&) = delete;
  CpuIsaScope& operator=(const CpuIsaScope&) = delete;

 private:
  CpuIsa saved_;
};

}  // namespace mn
