// SwiGLU activation (Shazeer 2020, "GLU Variants Improve Transformer"), the Llama/Qwen2 MLP core,
// for the CPU backend (fp32, OpenMP).
//
// Forward:  out = silu(gate) * up,   silu(g) = g * s(g),  s(g) = 1 / (1 + exp(-g)).
// Backward (overwrite):
//   dup   = dout * silu(gate)
//   dgate = dout * up * s(g) * (1 + g * (1 - s(g)))       since d silu/dg = s + g s (1 - s).
// exp is a branch-free polynomial (below) so the loops vectorise; std::exp would not without
// -ffast-math.
#include <algorithm>
#include <bit>
#include <cstdint>

#include "trlhpc/kernels/cpu.hpp"

namespace trlhpc::cpu {

namespace {

// exp(x) in fp32 to about 2 ulp for x in [-87, 88], 0 below -87, branch-free (vectorises).
// x = n ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2), exp(r) by the degree-7 Taylor-like
// minimax polynomial of Cephes expf, 2^n assembled in the exponent bits. Round-to-nearest of
// x/ln2 uses the 1.5 * 2^23 trick, which the compiler may not fold without -ffast-math.
inline float exp_approx(float x) {
  const float xc = std::min(std::max(x, -87.0f), 88.0f);
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const float two_n = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return x < -87.0f ? 0.0f : p * two_n;
}

}  // namespace

void swiglu_fwd(const float* gate, const float* up, float* out, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + exp_approx(-g)) * up[i];
  }
}

void swiglu_bwd(const float* gate, const float* up, const float* dout, float* dgate, float* dup, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float s = 1.0f / (1.0f + exp_approx(-g));
    dup[i] = dout[i] * g * s;
    dgate[i] = dout[i] * up[i] * s * (1.0f + g * (1.0f - s));
  }
}

}  // namespace trlhpc::cpu
