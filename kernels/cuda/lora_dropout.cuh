#pragma once
// LoRA's input dropout for the CUDA backend (CPU: kernels/cpu/lora_dropout.cpp, the rules in
// include/trlhpc/kernels/cpu.hpp). The keep decision is core/philox.hpp's dropout_keeps, the same
// function on host and device, so both backends draw the same mask.
#include <cuda_runtime.h>

#include <cstdint>

namespace trlhpc::cuda {

// x, out (N, F) of one dtype T in {float, bf16} (may alias); rows, columns (N).
template <class T>
void lora_dropout(const T* x, T* out, const int32_t* rows, const int32_t* columns, int64_t N, int64_t F,
                  int64_t feature_offset, float p, uint64_t key, cudaStream_t stream);

}  // namespace trlhpc::cuda
