#pragma once
// Casts between the storage dtypes: fp32 <-> bf16 (round to nearest even, as torch's .to(bfloat16)).
// No gradient of its own: the backward of a cast is the cast the other way.
#include <cuda_runtime.h>

#include <cstdint>

namespace trlhpc::cuda {

// dst (n) = src (n) converted. TD, TS in {float, __nv_bfloat16}, TD != TS.
template <class TD, class TS>
void cast(TD* dst, const TS* src, int64_t n, cudaStream_t stream);

}  // namespace trlhpc::cuda
