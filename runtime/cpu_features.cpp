// CPUID/XGETBV feature detection and the MN_CPU_ISA override (see cpu_features.h).
#include "runtime/cpu_features.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdlib>

#include "runtime/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define MN_X86 1
#endif

namespace mn {
namespace {

#ifdef MN_X86
// XCR0 (which register states the OS saves on a context switch). Read with the
// raw opcode-free builtin form so this file needs no -mxsave.
uint64_t xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t(edx) << 32) | eax;
}
#endif

CpuFeatures detect() {
  CpuFeatures f;
#ifdef MN_X86
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1;
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = xgetbv0();
  const bool ymm_state = (xcr0 & 0x6) == 0x6;            // SSE + AVX state
  const bool zmm_state = (xcr0 & 0xE6) == 0xE6;          // + opmask, ZMM_Hi256, Hi16_ZMM
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  const bool avx2 = (b >> 5) & 1;
  const bool avx512f = (b >> 16) & 1, avx512dq = (b >> 17) & 1, avx512bw = (b >> 30) & 1,
             avx512vl = (b >> 31) & 1;
  f.avx2_fma = ymm_state && avx2 && fma;
  f.avx512 = f.avx2_fma && zmm_state && avx512f && avx512dq && avx512bw && avx512vl;
#endif
  return f;
}

constexpr int kUnset = -1;
std::atomic<int> g_isa{kUnset};

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

bool cpu_isa_supported(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Scalar: return true;
    case CpuIsa::Avx2: return cpu_features().avx2_fma;
    case CpuIsa::Avx512: return cpu_features().avx512;
  }
  return false;
}

CpuIsa cpu_isa_best() {
  if (cpu_features().avx512) return CpuIsa::Avx512;
  if (cpu_features().avx2_fma) return CpuIsa::Avx2;
  return CpuIsa::Scalar;
}

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Scalar: return "scalar";
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Avx512: return "avx512";
  }
  return "?";
}

CpuIsa parse_cpu_isa(const std::string& text, const char* what) {
  std::string s = text;
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (s == "scalar") return CpuIsa::Scalar;
  if (s == "avx2") return CpuIsa::Avx2;
  if (s == "avx512") return CpuIsa::Avx512;
  MN_THROW(what, "='", text, "' is not a CPU instruction-set path: use scalar, avx2 or avx512");
}

CpuIsa cpu_isa() {
  int v = g_isa.load(std::memory_order_relaxed);
  if (v != kUnset) return static_cast<CpuIsa>(v);
  CpuIsa isa = cpu_isa_best();
  if (const char* e = std::getenv("MN_CPU_ISA"); e && *e) {
    isa = parse_cpu_isa(e);
    MN_CHECK(cpu_isa_supported(isa), "MN_CPU_ISA=", e, ": this CPU cannot run the ",
             cpu_isa_name(isa), " kernels (best available: ", cpu_isa_name(cpu_isa_best()), ")");
  }
  int expected = kUnset;
  g_isa.compare_exchange_strong(expected, static_cast<int>(isa));
  return static_cast<CpuIsa>(g_isa.load());
}

void set_cpu_isa(CpuIsa isa) {
  MN_CHECK(cpu_isa_supported(isa), "set_cpu_isa: this CPU cannot run the ", cpu_isa_name(isa),
           " kernels (best available: ", cpu_isa_name(cpu_isa_best()), ")");
  g_isa.store(static_cast<int>(isa));
}

}  // namespace mn
