// Elementwise helpers for the CPU backend (fp32, OpenMP).
//
// add_inplace:    y += x      (gradient accumulation, residual adds)
// scale_inplace:  y *= s      (loss scaling, gradient clipping)
// sum_of_squares: sum x^2 in double (the gradient norm). The sum is split into fixed chunks whose
//                 partial sums are added in chunk order, so it is bitwise identical for every
//                 thread count (an OpenMP reduction clause would not guarantee that).
// cast_f32_to_bf16 / cast_bf16_to_f32: the dtype conversions of Ops::cast and of the Fp32Windows
//                 (src/ops/fp32_window.hpp) around the fp32 kernels under --bf16.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/lane_sum.hpp"
#include "trlhpc/kernels/cpu.hpp"
#include "trlhpc/kernels/elementwise_math.hpp"

namespace trlhpc::cpu {

void add_inplace(float* y, const float* x, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void scale_inplace(float* y, float s, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] *= s;
}

// Fp32Window's per-op conversions are often small: threads only past 64 Ki elements.
constexpr int64_t kCastParallelMin = 65536;

void cast_f32_to_bf16(uint16_t* dst, const float* src, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kCastParallelMin)
  for (int64_t i = 0; i < n; ++i) dst[i] = math::bf16_bits_from_float(src[i]);
}

void cast_bf16_to_f32(float* dst, const uint16_t* src, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kCastParallelMin)
  for (int64_t i = 0; i < n; ++i) dst[i] = math::float_from_bf16_bits(src[i]);
}

double sum_of_squares(const float* x, int64_t n) {
  if (n <= 0) return 0.0;
  constexpr int64_t kChunk = 1 << 14;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<size_t>(chunks));  // (chunks)
#pragma omp parallel for schedule(static)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t i0 = ch * kChunk, i1 = std::min(n, i0 + kChunk);
    const float* xc = x + i0;  // (i1 - i0)
    partial[static_cast<size_t>(ch)] =
        lane_sum<double>(i1 - i0, [xc](int64_t i) { return static_cast<double>(xc[i]) * xc[i]; });
  }
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

}  // namespace trlhpc::cpu
