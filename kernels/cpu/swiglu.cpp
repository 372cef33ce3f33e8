// SwiGLU activation (Shazeer 2020, "GLU Variants Improve Transformer"), the Llama/Qwen2 MLP core,
// for the CPU backend (fp32, OpenMP).
//
// Forward:  out = silu(gate) * up,   silu(g) = g * s(g),  s(g) = 1 / (1 + exp(-g)).
// Backward (overwrite):
//   dup   = dout * silu(gate)
//   dgate = dout * up * s(g) * (1 + g * (1 - s(g)))       since d silu/dg = s + g s (1 - s).
// exp is a branch-free polynomial (below) so the loops vectorise; std::exp would not without
// -ffast-math. The bf16 variants (--bf16) widen each element, run the same inline math and round the
// results once, so they equal the fp32 kernel on bf16 inputs followed by one rounding.
#include <algorithm>
#include <bit>
#include <cstdint>

#include "kernels/cpu/fast_exp.hpp"
#include "trlhpc/kernels/cpu.hpp"
#include "trlhpc/kernels/elementwise_math.hpp"

namespace trlhpc::cpu {
namespace {

inline float swiglu_value(float g, float u) { return g / (1.0f + exp_approx(-g)) * u; }

inline void swiglu_grads(float g, float u, float d, float& dg, float& du) {
  const float s = 1.0f / (1.0f + exp_approx(-g));
  du = d * g * s;
  dg = d * u * s * (1.0f + g * (1.0f - s));
}

inline float widen(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }
inline uint16_t narrow(float f) { return math::bf16_bits_from_float(f); }

}  // namespace

void swiglu_fwd(const float* gate, const float* up, float* out, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = swiglu_value(gate[i], up[i]);
}

void swiglu_bwd(const float* gate, const float* up, const float* dout, float* dgate, float* dup, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) swiglu_grads(gate[i], up[i], dout[i], dgate[i], dup[i]);
}

void swiglu_fwd_bf16(const uint16_t* gate, const uint16_t* up, uint16_t* out, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = narrow(swiglu_value(widen(gate[i]), widen(up[i])));
}

void swiglu_bwd_bf16(const uint16_t* gate, const uint16_t* up, const uint16_t* dout, uint16_t* dgate, uint16_t* dup,
                     int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float dg, du;
    swiglu_grads(widen(gate[i]), widen(up[i]), widen(dout[i]), dg, du);
    dgate[i] = narrow(dg);
    dup[i] = narrow(du);
  }
}

}  // namespace trlhpc::cpu
