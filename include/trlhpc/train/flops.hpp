#pragma once
// Model FLOPs utilisation (MFU): the PaLM count (Chowdhery et al. 2022, appendix B) of 6 N training
// FLOPs per token, N the non-embedding parameters (the LM head counts, the input embedding lookup does
// not), plus 12 L H Q per (query, key) pair that attention computes, L layers, H heads, Q head size.
// PaLM writes the attention term as 12 L H Q T per token, every token attending T keys; a causal mask
// halves that and document masking of packed rows cuts it further, so the pairs counted here are the
// ones the causal, document-masked attention allows. Masked work is never counted as useful: MFU stays
// comparable between packed and unpacked runs and cannot exceed 100 % through attention that was skipped.
#include <cstdint>

#include "trlhpc/data/batch.hpp"
#include "trlhpc/model/model_config.hpp"

namespace trlhpc {

// Training FLOPs of `tokens` non-padding tokens whose attention covers `attended_pairs` (query, key) pairs.
double training_flops(const ModelConfig& config, int64_t tokens, int64_t attended_pairs);

// Per token, for one causal document of seq_len tokens (seq_len (seq_len + 1) / 2 pairs).
double training_flops_per_token(const ModelConfig& config, int64_t seq_len);

// The (query, key) pairs the attention mask allows in `batch`: for every non-padding token, the keys
// of its document at or before it. Documents are contiguous runs of one doc id within a row with
// increasing positions, as collation makes them (data/batch.hpp), so that is its index in the run + 1.
int64_t attended_pairs(const Batch& batch);

// Measured fp32 GEMM rate of this process's BLAS threads (FLOP/s), from a few 2048^3 sgemm calls;
// the CPU "peak" for MFU when --peak_flops is not given.
double measure_cpu_gemm_flops();

}  // namespace trlhpc
