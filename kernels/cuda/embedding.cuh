#pragma once
// Token embedding, vocab-parallel aware, for the CUDA backend (CPU: kernels/cpu/embedding.cpp).
//
// Forward:  out[n, :] = table[ids[n] - vocab_start, :] when vocab_start <= ids[n] < vocab_start + V,
//           else 0 (the zeros make the tensor-parallel embedding one all-reduce).
// Backward: dtable[v, :] += sum over n with ids[n] - vocab_start == v of dout[n, :].
//           Without atomics: the in-slice tokens are stably radix-sorted by row (CUB), so each table
//           row's contributions form one contiguous run, and the block that owns the run adds them in
//           token order: deterministic, no hot spot on frequent tokens, and the same additions in the
//           same order as the CPU kernel.
#include <cuda_runtime.h>

#include <cstdint>

#include "device_allocator.cuh"

namespace trlhpc::cuda {

// ids (N), table (V, C) TT, out (N, C) TO; TT, TO in {float, bf16}.
template <class TT, class TO>
void embedding_fwd(const int32_t* ids, const TT* table, TO* out, int64_t N, int64_t C, int64_t V, int64_t vocab_start,
                   cudaStream_t stream);

// dout (N, C) TD in {float, bf16}; dtable (V, C) fp32, accumulated.
template <class TD>
void embedding_bwd(const int32_t* ids, const TD* dout, float* dtable, int64_t N, int64_t C, int64_t V,
                   int64_t vocab_start, DeviceAllocator& allocator, cudaStream_t stream);

}  // namespace trlhpc::cuda
