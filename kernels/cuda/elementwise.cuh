#pragma once
// Elementwise ops and the global-norm reduction (CUDA backend; CPU: kernels/cpu/elementwise.cpp).
//
// add_inplace:    y += x        (residual adds, gradient accumulation)    gradient: dx = dy
// scale_inplace:  y *= s        (loss scaling, gradient clipping)         gradient: dx = s dy
// sum_of_squares: sum x^2 in double (the gradient norm). Deterministic: a fixed grid of blocks each
//                 sums a fixed strided subset in double, then one block adds the partials in a fixed
//                 tree order, so the result is bitwise reproducible run to run (not bitwise equal to
//                 the CPU's chunk order; both are exact to ~1e-15 relative).
#include <cuda_runtime.h>

#include <cstdint>

#include "device_allocator.cuh"

namespace trlhpc::cuda {

// y (n) += x (n). (TY, TX) in {(float, float), (bf16, bf16), (float, bf16)}.
template <class TY, class TX>
void add_inplace(TY* y, const TX* x, int64_t n, cudaStream_t stream);

// y (n) *= s (NaN * 0 stays NaN, as on the CPU).
template <class T>
void scale_inplace(T* y, float s, int64_t n, cudaStream_t stream);

// x (n) = cap tanh(x / cap) in place (Gemma 2's final logits: math::softcap); cap > 0.
void logit_softcap(float* x, int64_t n, float cap, cudaStream_t stream);

// *out (one double in device memory) = sum x^2 over x (n); queued on `stream`, no synchronisation.
template <class T>
void sum_of_squares(const T* x, int64_t n, double* out, DeviceAllocator& allocator, cudaStream_t stream);

}  // namespace trlhpc::cuda
