#pragma once
// Vocab-parallel cross-entropy pieces (Megatron-LM, Shoeybi et al. 2019, sec. 3) for the CUDA backend
// (CPU: kernels/cpu/vocab_parallel_cross_entropy.cpp, same contract). A tp rank holds logits z (M, Vl)
// for vocabulary ids [vocab_start, vocab_start + Vl); the caller all-reduces between the steps:
//   1. max:  row_max[t] = max_v z[t, v]                                   (then all-reduce max)
//   2. sums: sums[t] = (sum_v exp(z[t,v] - m_t), z[t, y_t] if owned else 0)   (then all-reduce sum)
//   3. grad: z <- grad_scale (exp(z - m) / s - onehot_local(y))   in place: the dlogits; given the
//            logit softcap c > 0 the logits were capped in place (logit_softcap, elementwise.cuh) and
//            the dlogits are multiplied by 1 - (z / c)^2
//   metrics (TRL's entropy / top-1, after step 1): stats[t] = (sum_v exp(z - m)(z - m), first global id
//            with z == m, else vocab_size)                         (then all-reduce sum, min)
//   label smoothing eps / DFT (token_loss.hpp; CPU file header):
//   logit_sums: logit_sums[t] = sum_v z[t, v]   (label smoothing only; then all-reduce sum)
//   shaped_grad instead of grad: z <- grad_scale w (exp(z - m) / s - (1 - eps) onehot_local(y) - eps /
//            vocab_size), w = exp(z_y - m) / s under DFT (from the all-reduced sums), else 1; the softcap
//            as in grad
// Ignored rows (target -100) get zero sums and a zero gradient. One block per row; the sum of
// exponentials is accumulated in double and reduced in a fixed order.
#include <cuda_runtime.h>

#include <cstdint>

#include "trlhpc/kernels/token_loss.hpp"

namespace trlhpc::cuda {

// logits (M, V) fp32, row_max (M), targets (M), sums (M, 2).
void vocab_parallel_ce_max(const float* logits, int64_t M, int64_t V, float* row_max, cudaStream_t stream);
void vocab_parallel_ce_sums(const float* logits, const int32_t* targets, int64_t M, int64_t V, int64_t vocab_start,
                            const float* row_max, float* sums, cudaStream_t stream);
// stats (M, 2); zeros for ignored rows.
void vocab_parallel_ce_metrics(const float* logits, const int32_t* targets, int64_t M, int64_t V, int64_t vocab_start,
                               int64_t vocab_size, const float* row_max, float* stats, cudaStream_t stream);
void vocab_parallel_ce_grad(float* logits, const int32_t* targets, int64_t M, int64_t V, int64_t vocab_start,
                            const float* row_max, const float* sums, float grad_scale, cudaStream_t stream,
                            float logit_softcap = 0.0f);
// logit_sums (M): sum_v z in double, stored fp32; 0 for ignored rows.
void vocab_parallel_ce_logit_sums(const float* logits, const int32_t* targets, int64_t M, int64_t V,
                                  float* logit_sums, cudaStream_t stream);
// vocab_size: the whole vocabulary (eps / vocab_size), >= V.
void vocab_parallel_ce_shaped_grad(float* logits, const int32_t* targets, int64_t M, int64_t V, int64_t vocab_start,
                                   int64_t vocab_size, const float* row_max, const float* sums, float grad_scale,
                                   float logit_softcap, const TokenLoss& token_loss, cudaStream_t stream);

}  // namespace trlhpc::cuda
