#pragma once
// trlhpc's attention op (kernels/cuda/attention.cuh has the contract) through cuDNN's fused flash SDPA,
// for the calls cuDNN expresses exactly: bf16 self-attention over packed rows whose documents are runs
// of consecutive positions (kernels::packed_sequences), causal, optionally windowed, GQA. The
// dispatcher (src/ops/cuda_ops_attention_route.cu, kernels/attention_route.hpp) decides; everything else,
// and any shape cuDNN declines to build a plan for, runs the hand-written kernel.
//
// Each document run is one cuDNN sequence of a ragged (THD) layout: q/k/v/o stay where they are, in
// (B*T, heads, HS) order, and per-sequence ragged offsets point cuDNN at each run; seq_len_q = seq_len_kv
// = the run's length with the padding mask on; causal = cuDNN's top-left diagonal (i >= j inside the
// run); a window W = diagonal band left bound W (keeps j > i - W, i.e. pos_q - pos_k < W); GQA by giving
// K/V their own head count. Stats (cuDNN's natural-log log-sum-exp max + ln(sum exp) of the scaled
// scores, the same quantity as trlhpc's lse) go through a padded per-sequence tensor that
// cudnn_attention_glue scatters into lse and gathers back for the backward.
//
// Outputs: cuDNN writes bf16 and overwrites. The forward writes o directly when o is bf16 and widens a
// bf16 temporary into an F32 o; the backward writes bf16 temporaries added into dq/dk/dv (+=, the
// contract). So cuDNN's gradients are rounded to bf16 once before the add, where the hand-written kernel
// keeps fp32 until its single rounding to G: with F32 dq/dk/dv that is one extra bf16 rounding (relative
// 2^-8) per call. tests/cuda/test_attention_cudnn.cpp states the bounds.
//
// Graphs are cached by their dimensions (bounded LRU, CUDA-REVIEW-FIXES.md defect 7), the sequence count
// and the longest sequence bucketed to powers of two so that new batches reuse graphs.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "device_allocator.cuh"
#include "trlhpc/kernels/attention_route.hpp"

namespace trlhpc::cuda {

struct CudnnAttentionDims {
  int64_t B = 0, T = 0;  // packed rows of T tokens (Tq == Tk)
  int NH = 0, KVH = 0, HS = 0;
  float scale = 1.0f;
  int64_t window = 0;  // 0 = none
};

class CudnnAttention {
 public:
  // Compiled with cudnn-frontend (TRLHPC_HAVE_CUDNN_FRONTEND); false: every call takes the kernel.
  static bool built();
  // cuDNN >= 9 loads and the current device is sm_80 or newer (the fused flash SDPA's floor).
  static bool usable();

  explicit CudnnAttention(size_t graph_cache_capacity = 32);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // o (B*T, NH, HS) = attention, lse (B, NH, T). G: bf16, or float (widened). Returns false, having
  // written nothing, when cuDNN supports no plan for these dimensions (the caller runs the kernel);
  // throws on a failure to execute.
  template <class G>
  bool forward(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, G* o, float* lse,
               const kernels::PackedSequences& seq, const CudnnAttentionDims& d, DeviceAllocator& allocator,
               cudaStream_t stream);

  // dq += ..., dk += ..., dv += ... (G: bf16 or float). Same return convention.
  template <class G>
  bool backward(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, const __nv_bfloat16* o,
                const float* lse, const __nv_bfloat16* dout, G* dq, G* dk, G* dv, const kernels::PackedSequences& seq,
                const CudnnAttentionDims& d, DeviceAllocator& allocator, cudaStream_t stream);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trlhpc::cuda
