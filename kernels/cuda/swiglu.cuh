#pragma once
// SwiGLU (Shazeer 2020), the Llama/Qwen2 MLP core, for the CUDA backend (CPU: kernels/cpu/swiglu.cpp).
//
// Forward:  out = silu(gate) * up,  silu(g) = g s(g),  s(g) = 1 / (1 + exp(-g)).
// Backward (overwrite): dup = dout silu(gate),  dgate = dout up s (1 + g (1 - s)).
// The element math is math::swiglu / math::swiglu_grad (include/trlhpc/kernels/elementwise_math.hpp),
// shared with the host so the unit tests check it against the CPU kernel.
#include <cuda_runtime.h>

#include <cstdint>

namespace trlhpc::cuda {

// gate, up, out (n) of one dtype T in {float, bf16}.
template <class T>
void swiglu_fwd(const T* gate, const T* up, T* out, int64_t n, cudaStream_t stream);
template <class T>
void swiglu_bwd(const T* gate, const T* up, const T* dout, T* dgate, T* dup, int64_t n, cudaStream_t stream);

}  // namespace trlhpc::cuda
