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

#include "kernels/cpu/fast_exp.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace trlhpc::cpu {

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
