#pragma once
// What the GEMM benchmarks share (bench/gemm_bench.cpp, bench/onednn_gemm_bench.cpp): the CPU's name,
// printed with every table since rates depend on it, and the timing of one GEMM call.
#include <chrono>
#include <fstream>
#include <string>

namespace trlhpc::bench {

// "model name" of /proc/cpuinfo's first processor.
inline std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

// Mean seconds of `repeat` calls of f after one untimed call (packing buffers, AMX permission, page
// faults, a library's first-call set-up).
template <class F>
double seconds_per_call(F&& f, int repeat) {
  f();
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < repeat; ++r) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / repeat;
}

}  // namespace trlhpc::bench
