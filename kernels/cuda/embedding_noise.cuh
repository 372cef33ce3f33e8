#pragma once
// NEFTune's noise on the input embeddings for the CUDA backend (CPU: kernels/cpu/embedding_noise.cpp, the
// rules in include/trlhpc/kernels/cpu.hpp). The draw is core/philox.hpp's neftune_unit_noise, the same
// function on host and device, so both backends add the same noise.
#include <cuda_runtime.h>

#include <cstdint>

namespace trlhpc::cuda {

// x (N, C) of T in {float, bf16}, in place; rows, columns (N).
template <class T>
void embedding_noise(T* x, const int32_t* rows, const int32_t* columns, int64_t N, int64_t C, float magnitude,
                     uint64_t key, cudaStream_t stream);

}  // namespace trlhpc::cuda
