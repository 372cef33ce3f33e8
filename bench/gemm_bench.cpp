// GEMM rates of the CPU backend on a model's linear-layer shapes: the fp32 GEMM and each bf16 engine
// the CPU can run (kernels/cpu/gemm_bf16.cpp), forward (x W^T), input gradient (dy W) and weight
// gradient (dy^T x), in GFLOP/s. Prints the CPU model, since rates depend on it.
//   gemm_bench [--tokens N] [--hidden C] [--ffn F] [--repeat R] [--rounds N] [--only SHAPE] [--engine E]
//              [--bf16-operands] [--cpu_gemm auto|avx512|avx2|openblas]
// --repeat: calls timed per cell (the mean is printed). --rounds: the whole table N times, fp32 and the
// bf16 engines interleaved, printing each cell's min-max over the rounds (on a shared machine the load
// changes between cells; the maximum is the least disturbed). --only forward|dgrad|wgrad and
// --engine fp32|amx|avx512bf16|f32 restrict the table (for perf record/stat of one kernel).
// --cpu_gemm: the fp32 GEMM (and so the bf16 f32 engine's), as trlhpc sft's option of that name.
// --bf16-operands: the bf16 engines read a and b and write c as bf16 (as --bf16 training's activations
// are), not fp32; the fp32 column is unchanged.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gemm_bench_common.hpp"
#include "trlhpc/kernels/cpu.hpp"

using trlhpc::bench::cpu_model;
using trlhpc::bench::seconds_per_call;

int main(int argc, char** argv) {
  int64_t T = 2048, C = 896, F = 4864;
  int repeat = 5, rounds = 1;
  std::string only, engine_only;
  bool bf16_operands = false;
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--bf16-operands")) {
      bf16_operands = true;
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
      break;
    }
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tokens")) T = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--hidden")) C = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--ffn")) F = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeat")) repeat = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--rounds")) rounds = std::max(1, std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--only")) only = argv[i + 1];
    else if (!std::strcmp(argv[i], "--engine")) engine_only = argv[i + 1];
    else if (!std::strcmp(argv[i], "--cpu_gemm")) {
      // The fp32 GEMM for the whole process, as trlhpc sft --cpu_gemm chooses it.
      const std::string refusal = trlhpc::cpu::choose_cpu_gemm(argv[i + 1]);
      if (!refusal.empty()) {
        std::fprintf(stderr, "gemm_bench: %s\n", refusal.c_str());
        return 2;
      }
    } else {
      std::fprintf(stderr, "gemm_bench: unknown option %s (see the comment at the top of bench/gemm_bench.cpp)\n",
                   argv[i]);
      return 2;
    }
  }
  std::printf("fp32 GEMM: %s\n", trlhpc::cpu::cpu_gemm_name().c_str());
  std::printf("CPU: %s, %d OpenMP threads; tokens %ld, hidden %ld, ffn %ld; mean of %d calls, %d round(s)%s\n",
              cpu_model().c_str(), omp_get_max_threads(), static_cast<long>(T), static_cast<long>(C),
              static_cast<long>(F), repeat, rounds, bf16_operands ? "; bf16 operands for the bf16 engines" : "");
  std::vector<float> x(T * C, 0.01f), w(F * C, 0.02f), y(T * F), dy(T * F, 0.03f), dx(T * C), dw(F * C);
  // bf16 copies (bits of 1.0-ish values: any finite pattern times the same work) for --bf16-operands.
  std::vector<uint16_t> x16(x.size(), 0x3c24), w16(w.size(), 0x3ca4), dy16(dy.size(), 0x3cf6);
  std::vector<uint16_t> y16(y.size()), dx16(dx.size()), dw16(dw.size());
  const double flops = 2.0 * T * C * F;
  struct Shape {
    const char *key, *name;
    const float *a, *b;
    float* c;
    const uint16_t *a16, *b16;
    uint16_t* c16;
    bool ta, tb;
    int64_t M, N, K;
  };
  const Shape shapes[] = {{"forward", "forward  y = x W^T", x.data(), w.data(), y.data(), x16.data(), w16.data(),
                           y16.data(), false, true, T, F, C},
                          {"dgrad", "dgrad   dx = dy W ", dy.data(), w.data(), dx.data(), dy16.data(), w16.data(),
                           dx16.data(), false, false, T, C, F},
                          {"wgrad", "wgrad   dW = dy^T x", dy.data(), x.data(), dw.data(), dy16.data(), x16.data(),
                           dw16.data(), true, false, F, C, T}};
  using trlhpc::cpu::Bf16GemmEngine;
  const char* columns[] = {"fp32", "amx", "avx512bf16", "f32"};
  const Bf16GemmEngine engines[] = {Bf16GemmEngine::AMX, Bf16GemmEngine::AVX512BF16, Bf16GemmEngine::F32};
  // rate[shape][column] over rounds: min and max; < 0: not run here.
  double lo[3][4], hi[3][4];
  for (auto& row : lo) std::fill(row, row + 4, 1e300);
  for (auto& row : hi) std::fill(row, row + 4, -1.0);
  for (int round = 0; round < rounds; ++round)
    for (int s = 0; s < 3; ++s) {
      const Shape& sh = shapes[s];
      if (!only.empty() && only != sh.key) continue;
      for (int col = 0; col < 4; ++col) {
        if (!engine_only.empty() && engine_only != columns[col]) continue;
        if (col > 0 && !trlhpc::cpu::bf16_gemm_available(engines[col - 1])) continue;
        const double t = seconds_per_call(
            [&] {
              if (col == 0)
                trlhpc::cpu::matmul(sh.a, sh.ta, sh.b, sh.tb, sh.c, sh.M, sh.N, sh.K, 1.0f, 0.0f);
              else if (bf16_operands)
                trlhpc::cpu::matmul_bf16({sh.a16, true}, sh.ta, {sh.b16, true}, sh.tb, {sh.c16, true}, sh.M, sh.N,
                                         sh.K, 1.0f, 0.0f, engines[col - 1]);
              else
                trlhpc::cpu::matmul_bf16({sh.a, false}, sh.ta, {sh.b, false}, sh.tb, {sh.c, false}, sh.M, sh.N, sh.K,
                                         1.0f, 0.0f, engines[col - 1]);
            },
            repeat);
        const double rate = flops / t * 1e-9;
        lo[s][col] = std::min(lo[s][col], rate);
        hi[s][col] = std::max(hi[s][col], rate);
      }
    }
  std::printf("%-22s %12s %12s %12s %12s\n", "GEMM (GFLOP/s)", "fp32", "amx", "avx512bf16", "f32-emulated");
  for (int s = 0; s < 3; ++s) {
    if (!only.empty() && only != shapes[s].key) continue;
    std::printf("%-22s", shapes[s].name);
    for (int col = 0; col < 4; ++col) {
      char cell[32];
      if (hi[s][col] < 0) std::snprintf(cell, sizeof cell, "n/a");
      else if (rounds == 1) std::snprintf(cell, sizeof cell, "%.0f", hi[s][col]);
      else std::snprintf(cell, sizeof cell, "%.0f-%.0f", lo[s][col], hi[s][col]);
      std::printf(" %12s", cell);
    }
    std::printf("\n");
  }
  return 0;
}
