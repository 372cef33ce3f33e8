// OpenBLAS kernel diagnostics (include/trlhpc/runtime/cpu_blas.hpp). The build requires OpenBLAS
// (CMakeLists.txt), whose cblas.h declares openblas_get_corename.
#include "trlhpc/runtime/cpu_blas.hpp"

#include "trlhpc/kernels/cpu.hpp"

#include <cblas.h>

#include <cctype>
#include <cstdlib>

namespace trlhpc {
namespace {

bool cpu_has_avx512() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

// OpenBLAS's x86-64 cores with AVX-512 GEMM kernels (0.3.21 names; matched case-insensitively as
// OpenBLAS does).
bool is_avx512_core(std::string name) {
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name == "skylakex" || name == "cooperlake" || name == "sapphirerapids";
}

}  // namespace

std::string cpu_blas_core() {
  const char* name = openblas_get_corename();
  return name ? name : "";
}

std::string cpu_blas_warning() {
  if (cpu::cpu_gemm_name() != "OpenBLAS") return "";  // trlhpc's own GEMM does not depend on the variable
  const char* pinned = std::getenv("OPENBLAS_CORETYPE");
  if (!pinned || !*pinned || is_avx512_core(pinned) || !cpu_has_avx512()) return "";
  return std::string("OPENBLAS_CORETYPE=") + pinned +
         " holds OpenBLAS to kernels without AVX-512 on a CPU that has it; unset it (or set SkylakeX) to let "
         "OpenBLAS use its AVX-512 kernels (about 2x the matmul rate measured on AMD Zen 5, bench/RESULTS.md)";
}

}  // namespace trlhpc
