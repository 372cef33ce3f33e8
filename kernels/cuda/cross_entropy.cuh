#pragma once
// Fused LM head + cross-entropy that never materialises the full logits, CUDA backend
// (CPU: kernels/cpu/cross_entropy.cpp, same contract).
//
// hidden (N, C), weight (V, C) (the LM head or the tied embedding), targets (N), -100 = ignore.
// logits z_t = hidden_t @ weight^T; for each valid token t: loss_t = logsumexp(z_t) - z_t[target_t].
// Returns sum_t loss_t (double, added in token order on the host, as the CPU does). With dhidden set,
// also the backward of grad_scale * sum_t loss_t:
//   dz_t = grad_scale (softmax(z_t) - onehot(target_t)),  dhidden = dz @ weight (overwrite; 0 on ignored
//   tokens),  dweight += dz^T @ hidden.
// Per chunk of at most chunk_tokens valid tokens: gather hidden rows -> GEMM logits (chunk, V) fp32 ->
// one block per row: online max/sum, loss, dz in place (fp32) or into a bf16 copy (bf16 operands) ->
// GEMM dhidden rows (fp32, scattered) and GEMM dweight (+=). Ignored tokens cost no GEMM work.
// The targets are read on the host first (to validate them and to know the valid count and rows). Given
// host_targets (the same values, already on the host: the decoder keeps the batch it uploaded) the call
// does not copy them back, which would wait for all the work queued before it; it then synchronises
// once, at its end, for the returned loss (docs/CUDA-REVIEW-FIXES.md defect 6; a lazy loss needs the Ops contract
// to change, docs/CUDA-REVIEW-FIXES.md). Without host_targets it synchronises at its start too.
// logit_softcap c > 0 (Gemma 2): the chunk's logits are capped in place (c tanh(z / c)) before the
// softmax; loss, metrics and dz are those of the capped logits and dz is multiplied by 1 - (z / c)^2
// (z capped) on its way back to the head's output. 0 = none.
#include <cuda_runtime.h>

#include <cstdint>

#include "device_allocator.cuh"
#include "matmul.cuh"
#include "trlhpc/kernels/token_loss.hpp"

namespace trlhpc::cuda {

// TRL's metrics over the valid tokens (entropy of the softmax, top-1 hits), as the CPU kernel computes
// them; computed false when V >= 2^24 (the first-maximum index travels as a float).
struct LossMetricSums {
  bool computed = false;
  double entropy_sum = 0;
  int64_t top1 = 0;
};

// The per-token losses (and metric terms) of one call, still on the device. read() copies them back,
// waiting for the stream, and adds them in token order (the CPU kernel's order); until then nothing
// waits (docs/CUDA-REVIEW-FIXES.md defect 6: the trainer reads every micro-batch's sums once, at the step's end).
// The buffers go back to the stream-ordered allocator when this is destroyed.
struct PendingLossRows {
  DeviceBuffer<double> loss_rows, entropy_rows;  // (n_valid), (n_valid or 0)
  DeviceBuffer<int32_t> top1_rows;               // (n_valid or 0)
  int64_t n_valid = 0;
  bool want_metrics = false;
  cudaStream_t stream = nullptr;
  double read(LossMetricSums* metrics);
};

// T (hidden, weight) in {float, bf16}; TD (dhidden) in {float, bf16}; dweight fp32. dhidden == nullptr:
// forward only (dweight ignored). dweight == nullptr with dhidden set: no weight gradient.
// cross_entropy_launch queues the whole computation and returns the per-token sums unread: it does not
// synchronise when host_targets is given (otherwise it copies the targets back, which waits).
template <class T, class TD>
PendingLossRows cross_entropy_launch(const T* hidden, const T* weight, const int32_t* targets, int64_t N, int64_t C,
                                     int64_t V, float grad_scale, TD* dhidden, float* dweight, int64_t chunk_tokens,
                                     int64_t* valid_tokens, Matmul& matmul, DeviceAllocator& allocator,
                                     cudaStream_t stream, bool want_metrics, const int32_t* host_targets,
                                     float logit_softcap, const TokenLoss& token_loss = {});
// The same, read at once (one synchronisation at the end).
template <class T, class TD>
double cross_entropy_fwd_bwd(const T* hidden, const T* weight, const int32_t* targets, int64_t N, int64_t C, int64_t V,
                             float grad_scale, TD* dhidden, float* dweight, int64_t chunk_tokens,
                             int64_t* valid_tokens, Matmul& matmul, DeviceAllocator& allocator, cudaStream_t stream,
                             LossMetricSums* metrics = nullptr, const int32_t* host_targets = nullptr,
                             float logit_softcap = 0.0f, const TokenLoss& token_loss = {});

}  // namespace trlhpc::cuda
