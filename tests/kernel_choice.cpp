#include "kernel_choice.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "trlhpc/kernels/cpu.hpp"

namespace trlhpc::testing {

void choose_kernels_from_args(int& argc, char** argv) {
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool fp32 = arg == "--cpu_gemm", bf16 = arg == "--cpu_bf16_gemm";
    if (!fp32 && !bf16) {
      argv[kept++] = argv[i];
      continue;
    }
    if (i + 1 == argc) {
      std::fprintf(stderr, "%s needs an engine\n", arg.c_str());
      std::exit(2);
    }
    const std::string engine = argv[++i];
    const std::string error = fp32 ? cpu::choose_cpu_gemm(engine) : cpu::choose_bf16_gemm(engine);
    if (!error.empty()) {
      std::fprintf(stderr, "%s\n", error.c_str());
      std::exit(2);
    }
  }
  argc = kept;
  argv[argc] = nullptr;
}

}  // namespace trlhpc::testing
