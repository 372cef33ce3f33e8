#pragma once
// The glue between trlhpc's attention tensors and cuDNN's fused SDPA (kernels/cuda/cudnn_attention.hpp):
//   * lse: trlhpc keeps (B, NH, T) over the packed rows; the cuDNN graph reads and writes its Stats as a
//     packed (S_graph, NH, L_graph, 1) tensor, one slot per sequence (document run) padded to the graph's
//     longest sequence. A non-packed Stats layout is only honoured from cuDNN 9.12 (forward) and 9.26
//     (backward read), and the GPU machine's cuDNN comes from whatever wheel is there, so we scatter and
//     gather instead of pointing cuDNN into lse.
//   * outputs: cuDNN writes bf16 o/dq/dk/dv and overwrites; trlhpc's o may be an F32 accumulator and
//     dq/dk/dv accumulate (+=), so cuDNN writes to a bf16 temporary that is widened or added here.
// Sequences: sequence s covers the flat tokens [token_start[s], token_start[s] + length[s]) of B rows of T.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace trlhpc::cuda {

// lse[b, h, t0 + i] = stats[s, h, i] for i < length[s], where token_start[s] = b T + t0.
void cudnn_stats_to_lse(const float* stats, float* lse, const int64_t* token_start, const int32_t* length,
                        int64_t sequences, int NH, int64_t max_length, int64_t T, cudaStream_t stream);
// The inverse (padding slots are left as they are: cuDNN masks them).
void cudnn_lse_to_stats(const float* lse, float* stats, const int64_t* token_start, const int32_t* length,
                        int64_t sequences, int NH, int64_t max_length, int64_t T, cudaStream_t stream);

// dst = src (widening to fp32 when G = float).
template <class G>
void cudnn_store_output(G* dst, const __nv_bfloat16* src, int64_t n, cudaStream_t stream);
// dst += src, in fp32, rounded once to G.
template <class G>
void cudnn_accumulate_output(G* dst, const __nv_bfloat16* src, int64_t n, cudaStream_t stream);

}  // namespace trlhpc::cuda
