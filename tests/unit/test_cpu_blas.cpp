// runtime/cpu_blas.hpp: the OpenBLAS core is reported, and the warning appears exactly when
// OPENBLAS_CORETYPE names a core without AVX-512 on a CPU that has AVX-512 (read from /proc/cpuinfo
// here, independently of the compiler builtins the implementation uses).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "trlhpc/kernels/cpu.hpp"
#include "trlhpc/runtime/cpu_blas.hpp"

namespace trlhpc {
namespace {

// True when every AVX-512 subset the SkylakeX kernels need is in /proc/cpuinfo's flags; nullopt
// without /proc/cpuinfo.
std::optional<bool> cpuinfo_has_avx512() {
  std::ifstream in("/proc/cpuinfo");
  if (!in) return std::nullopt;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::string w;
    int found = 0;
    while (words >> w)
      found += w == "avx512f" || w == "avx512cd" || w == "avx512bw" || w == "avx512dq" || w == "avx512vl";
    return found == 5;
  }
  return std::nullopt;
}

// Sets (or unsets, for nullptr) OPENBLAS_CORETYPE for one scope and restores it.
class CoreTypeScope {
 public:
  explicit CoreTypeScope(const char* value) {
    if (const char* old = std::getenv("OPENBLAS_CORETYPE")) saved_ = old;
    if (value) setenv("OPENBLAS_CORETYPE", value, 1);
    else unsetenv("OPENBLAS_CORETYPE");
  }
  ~CoreTypeScope() {
    if (saved_) setenv("OPENBLAS_CORETYPE", saved_->c_str(), 1);
    else unsetenv("OPENBLAS_CORETYPE");
  }

 private:
  std::optional<std::string> saved_;
};

TEST(CpuBlas, ReportsTheOpenBlasCore) {
  // This build links OpenBLAS (CMakeLists.txt), which always names its core.
  EXPECT_FALSE(cpu_blas_core().empty());
}

TEST(CpuBlas, WarnsOnlyWhenAnAvx2CoreIsPinnedOnAnAvx512Cpu) {
  const std::optional<bool> avx512 = cpuinfo_has_avx512();
  if (!avx512) GTEST_SKIP() << "no /proc/cpuinfo to tell whether the CPU has AVX-512";
  {
    CoreTypeScope pin("Haswell");
    const std::string warning = cpu_blas_warning();
    if (cpu::cpu_gemm_name() != "OpenBLAS") {
      // The matmuls run trlhpc's AVX-512 GEMM (--cpu_gemm unset or avx512): OpenBLAS's core costs
      // nothing. ctest runs this file a second time with --cpu_gemm openblas for the branch below.
      EXPECT_EQ(warning, "") << "the matmuls do not use OpenBLAS";
    } else if (*avx512) {
      EXPECT_NE(warning.find("OPENBLAS_CORETYPE=Haswell"), std::string::npos) << warning;
      EXPECT_NE(warning.find("AVX-512"), std::string::npos) << warning;
    } else {
      EXPECT_EQ(warning, "") << "the CPU has no AVX-512: nothing is lost";
    }
  }
  {
    CoreTypeScope pin("skylakex");  // OpenBLAS matches core names case-insensitively
    EXPECT_EQ(cpu_blas_warning(), "");
  }
  {
    CoreTypeScope pin("Cooperlake");
    EXPECT_EQ(cpu_blas_warning(), "");
  }
  {
    CoreTypeScope pin(nullptr);  // OpenBLAS chooses: nothing to warn about
    EXPECT_EQ(cpu_blas_warning(), "");
  }
}

}  // namespace
}  // namespace trlhpc
