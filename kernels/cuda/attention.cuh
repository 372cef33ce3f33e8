#pragma once
// The masked attention primitive (ARCHITECTURE.md "Attention is one primitive") for the CUDA backend,
// flash-attention style (CPU: kernels/cpu/attention.cpp; same semantics, same tile skipping).
//
// q (B, Tq, NH, HS), k and v (B, Tk, KVH, HS); q_pos, q_doc (B, Tq); k_pos, k_doc (B, Tk).
// Query (b, i) attends key (b, j) iff q_doc[b,i] == k_doc[b,j] && q_pos[b,i] >= k_pos[b,j] (and, with
// a sliding window W = AttentionDims::window > 0, q_pos[b,i] - k_pos[b,j] < W); query
// head h uses kv head h / (NH / KVH) (GQA). o (B, Tq, NH, HS) = softmax(scale q k^T + mask) v and
// lse (B, NH, Tq) = natural-log log-sum-exp of the masked scaled scores; a query with no allowed key
// gets o = 0, lse = -inf.
//
// Forward (FlashAttention-2, Dao 2023, Alg. 1): a block owns (b, h, Br queries); it walks the Bc-wide
// key tiles keeping the running row max m, sum l and unnormalised O in shared memory (online softmax,
// Milakov & Gimelshein 2018), rescaling by exp(m_old - m_new) when the max grows. A (query tile, key
// tile) pair is skipped when the tiles' position/doc ranges prove every pair masked (causal: half the
// tiles; packed documents: everything off the block diagonal) and takes the unmasked path when they
// prove every pair allowed.
// Softcapping (softcap c > 0, Gemma 2): the scaled scores become c tanh(s / c) before the mask, so P
// and lse are those of the capped scores, and the backward multiplies dS by 1 - tanh(s / c)^2.
// Backward (FlashAttention-2, Alg. 2) from the saved lse, with delta_i = rowsum(dO_i * O_i):
//   P = exp(scale S - lse), dP = dO V^T, dS = P * (dP - delta),
//   dV += P^T dO,  dK += scale dS^T Q,  dQ += scale dS K          (all three ACCUMULATE, for ring attention)
// Deterministic without atomics: one kernel owns (b, kv head, key tile) and visits the query heads of
// its group and the query tiles in a fixed order for dK/dV; a second owns (b, h, query tile) for dQ,
// recomputing S and dP (the price of not scattering dQ with atomics: two more tile products).
// Tensor cores for bf16 (WMMA, fp32 accumulate, HS % 16 == 0); fp32 tiles run SIMT FMA so fp32
// results match the CPU to ~1e-6. Tile sizes adapt to the shared memory of the device.
#include <cuda_runtime.h>

#include <cstdint>

#include "device_allocator.cuh"
#include "trlhpc/kernels/attention_smem_plan.hpp"

namespace trlhpc::cuda {

struct AttentionDims {
  int64_t B = 0, Tq = 0, Tk = 0;
  int NH = 0, KVH = 0, HS = 0;
  float scale = 1.0f;
  int64_t window = 0;  // sliding window (AttentionShape::window); 0 = none
  float softcap = 0.0f;  // tanh softcapping of the scaled scores (AttentionShape::softcap); 0 = none
};

using kernels::SmemLimits;

// T in {float, bf16}: q, k, v (and o, dout in the backward). G, the outputs' type: T, or float with
// bf16 inputs so that a caller accumulating over several calls (ring attention: o before the merge,
// dq/dk/dv over the steps) keeps fp32 sums and rounds once (docs/CUDA-REVIEW-FIXES.md defect 1).
// smem: device_smem_limits() of the device (device_query.cuh).
template <class T, class G>
void attention_fwd(const T* q, const T* k, const T* v, const int32_t* q_pos, const int32_t* k_pos,
                   const int32_t* q_doc, const int32_t* k_doc, G* o, float* lse, const AttentionDims& d,
                   const SmemLimits& smem, DeviceAllocator& allocator, cudaStream_t stream);

// dq (B,Tq,NH,HS), dk/dv (B,Tk,KVH,HS) accumulate (+=), in fp32 before one rounding to G.
template <class T, class G>
void attention_bwd(const T* q, const T* k, const T* v, const T* o, const float* lse, const T* dout,
                   const int32_t* q_pos, const int32_t* k_pos, const int32_t* q_doc, const int32_t* k_doc, G* dq,
                   G* dk, G* dv, const AttentionDims& d, const SmemLimits& smem, DeviceAllocator& allocator,
                   cudaStream_t stream);

// How many blocks of the `pass` kernel (G = T) with the tiles chosen for HS one SM of the current
// device holds (cudaOccupancyMaxActiveBlocksPerMultiprocessor): the CUDA test of defect 2 asks for 2.
template <class T>
int attention_blocks_per_sm(int HS, kernels::AttentionPass pass, const SmemLimits& smem);

// Ring attention: lse' = logaddexp(lse_acc, lse_blk), o_acc' = o_acc e^(lse_acc - lse') + o_blk e^(lse_blk - lse').
// o (B, Tn, NH, HS), lse (B, NH, Tn) with Tn the rows' length; a -inf side weighs 0.
template <class T>
void attention_merge(T* o_acc, float* lse_acc, const T* o_blk, const float* lse_blk, int64_t B, int64_t Tn, int NH,
                     int HS, cudaStream_t stream);

}  // namespace trlhpc::cuda
