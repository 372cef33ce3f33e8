#pragma once
// GeGLU with the tanh GELU (Gemma's MLP core) for the CUDA backend (CPU: kernels/cpu/geglu.cpp).
//
// Forward:  out = gelu_tanh(gate) * up.  Backward (overwrite): dup = dout gelu_tanh(gate),
// dgate = dout up gelu_tanh'(gate). The element math is math::geglu_tanh / geglu_tanh_grad
// (include/trlhpc/kernels/elementwise_math.hpp), shared with the host.
#include <cuda_runtime.h>

#include <cstdint>

namespace trlhpc::cuda {

// gate, up, out (n) of one dtype T in {float, bf16}.
template <class T>
void geglu_tanh_fwd(const T* gate, const T* up, T* out, int64_t n, cudaStream_t stream);
template <class T>
void geglu_tanh_bwd(const T* gate, const T* up, const T* dout, T* dgate, T* dup, int64_t n, cudaStream_t stream);

}  // namespace trlhpc::cuda
