#pragma once
// Rotary position embedding (Su et al. 2021), Hugging Face rotate-half layout, in place, for the CUDA
// backend (CPU: kernels/cpu/rope.cpp).
//
// For token n, head h and i < HS/2, angle = fp32(pos[n] * inv_freq[i]) (as transformers forms it),
// x1 = x[n,h,i], x2 = x[n,h,i+HS/2]:   x1' = x1 cos - x2 sin,  x2' = x2 cos + x1 sin.
// The map is a rotation, so the backward is the rotation by -angle (rope_bwd). cos/sin of the fp32
// angle are evaluated in double and rounded to fp32, as the CPU kernel does, once per (token, i) for
// all heads. The pair rotation itself is math::rope_rotate (include/trlhpc/kernels/elementwise_math.hpp).
#include <cuda_runtime.h>

#include <cstdint>

namespace trlhpc::cuda {

// x (N, H, HS) in place; pos (N); inv_freq (HS/2). T in {float, bf16}.
template <class T>
void rope_fwd(T* x, const int32_t* pos, const float* inv_freq, int64_t N, int64_t H, int64_t HS, cudaStream_t stream);
template <class T>
void rope_bwd(T* dx, const int32_t* pos, const float* inv_freq, int64_t N, int64_t H, int64_t HS, cudaStream_t stream);

}  // namespace trlhpc::cuda
