// GeGLU with the tanh GELU (Shazeer 2020, "GLU Variants Improve Transformer"; Gemma's MLP with
// hidden_activation "gelu_pytorch_tanh") for the CPU backend (fp32, OpenMP).
//
// Forward:  out = gelu_tanh(gate) * up.   Backward (overwrite): dup = dout gelu_tanh(gate),
// dgate = dout up gelu_tanh'(gate). The element math is math::geglu_tanh / geglu_tanh_grad
// (include/trlhpc/kernels/elementwise_math.hpp), in torch's operation order and shared with the CUDA
// kernel. The bf16 variants (--bf16) widen each element, run the same math and round each result
// once, as the SwiGLU kernels do (docs/ARCHITECTURE.md "Mixed precision").
#include <bit>
#include <cstdint>

#include "trlhpc/kernels/cpu.hpp"
#include "trlhpc/kernels/elementwise_math.hpp"

namespace trlhpc::cpu {
namespace {

inline float widen(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }
inline uint16_t narrow(float f) { return math::bf16_bits_from_float(f); }

}  // namespace

void geglu_tanh_fwd(const float* gate, const float* up, float* out, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = math::geglu_tanh(gate[i], up[i]);
}

void geglu_tanh_bwd(const float* gate, const float* up, const float* dout, float* dgate, float* dup, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) math::geglu_tanh_grad(gate[i], up[i], dout[i], &dgate[i], &dup[i]);
}

void geglu_tanh_fwd_bf16(const uint16_t* gate, const uint16_t* up, uint16_t* out, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = narrow(math::geglu_tanh(widen(gate[i]), widen(up[i])));
}

void geglu_tanh_bwd_bf16(const uint16_t* gate, const uint16_t* up, const uint16_t* dout, uint16_t* dgate,
                         uint16_t* dup, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float dg, du;
    math::geglu_tanh_grad(widen(gate[i]), widen(up[i]), widen(dout[i]), &dg, &du);
    dgate[i] = narrow(dg);
    dup[i] = narrow(du);
  }
}

}  // namespace trlhpc::cpu
