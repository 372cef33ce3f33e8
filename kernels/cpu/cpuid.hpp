#pragma once
// CPUID through the compiler's <cpuid.h>: the one place kernels/cpu issue the instruction (the feature
// tests elsewhere use __builtin_cpu_supports, which reads the same leaves once per process).
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace trlhpc::cpu {

struct CpuidRegisters {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

// Leaf `leaf`, sub-leaf `subleaf`; all zero when the CPU lacks the leaf (or is not x86).
inline CpuidRegisters cpuid(unsigned leaf, unsigned subleaf = 0) {
  CpuidRegisters r;
#if defined(__x86_64__) || defined(__i386__)
  if (leaf > __get_cpuid_max(leaf & 0x80000000u, nullptr)) return r;
  __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
#endif
  return r;
}

}  // namespace trlhpc::cpu
