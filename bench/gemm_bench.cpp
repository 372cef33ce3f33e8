// GEMM rates of the CPU backend on a model's linear-layer shapes: the fp32 GEMM and each bf16 engine
// the CPU can run (kernels/cpu/gemm_bf16.cpp), forward (x W^T), input gradient (dy W) and weight
// gradient (dy^T x), in GFLOP/s. Prints the CPU model, since rates depend on it.
//   gemm_bench [--tokens N] [--hidden C] [--ffn F] [--repeat R]
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "trlhpc/kernels/cpu.hpp"

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

template <class F>
double seconds_per_call(F&& f, int repeat) {
  f();  // warm-up: packing buffers, AMX permission, page faults
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < repeat; ++r) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / repeat;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t T = 2048, C = 896, F = 4864;
  int repeat = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tokens")) T = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--hidden")) C = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--ffn")) F = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeat")) repeat = std::atoi(argv[i + 1]);
  }
  std::printf("CPU: %s, %d OpenMP threads; tokens %ld, hidden %ld, ffn %ld\n", cpu_model().c_str(),
              omp_get_max_threads(), static_cast<long>(T), static_cast<long>(C), static_cast<long>(F));
  std::vector<float> x(T * C, 0.01f), w(F * C, 0.02f), y(T * F), dy(T * F, 0.03f), dx(T * C), dw(F * C);
  const double flops = 2.0 * T * C * F;
  struct Shape {
    const char* name;
    const float *a, *b;
    float* c;
    bool ta, tb;
    int64_t M, N, K;
  };
  const Shape shapes[] = {{"forward  y = x W^T", x.data(), w.data(), y.data(), false, true, T, F, C},
                          {"dgrad   dx = dy W ", dy.data(), w.data(), dx.data(), false, false, T, C, F},
                          {"wgrad   dW = dy^T x", dy.data(), x.data(), dw.data(), true, false, F, C, T}};
  using trlhpc::cpu::Bf16GemmEngine;
  std::printf("%-22s %12s %12s %12s %12s\n", "GEMM (GFLOP/s)", "fp32", "amx", "avx512bf16", "f32-emulated");
  for (const Shape& s : shapes) {
    const double fp32 = seconds_per_call(
        [&] { trlhpc::cpu::matmul(s.a, s.ta, s.b, s.tb, s.c, s.M, s.N, s.K, 1.0f, 0.0f); }, repeat);
    std::printf("%-22s %12.0f", s.name, flops / fp32 * 1e-9);
    for (Bf16GemmEngine e : {Bf16GemmEngine::AMX, Bf16GemmEngine::AVX512BF16, Bf16GemmEngine::F32}) {
      if (!trlhpc::cpu::bf16_gemm_available(e)) {
        std::printf(" %12s", "n/a");
        continue;
      }
      const double t = seconds_per_call(
          [&] {
            trlhpc::cpu::matmul_bf16({s.a, false}, s.ta, {s.b, false}, s.tb, {s.c, false}, s.M, s.N, s.K, 1.0f, 0.0f, e);
          },
          repeat);
      std::printf(" %12.0f", flops / t * 1e-9);
    }
    std::printf("\n");
  }
  return 0;
}
