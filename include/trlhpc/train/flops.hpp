#pragma once
// Model FLOPs utilisation (MFU) per the PaLM paper (Chowdhery et al. 2022, appendix B): training
// FLOPs per token = 6 N + 12 L H Q T, with N the non-embedding parameters (the LM head counts, the
// input embedding lookup does not), L layers, H heads, Q head size, T the sequence length attended.
// The attention term counts every (query, key) pair of the row, as PaLM does, although a causal mask
// computes about half and document masking of packed rows less still: a packed run of short
// documents (the bundled tiny-chat job) can therefore print MFU above 100 %. A sliding-window layer
// (ModelConfig::attention_window) attends over min(window, T) positions instead: its kernels skip the
// key blocks outside the window, so counting T there would credit work never done.
#include <cstdint>

#include "trlhpc/model/model_config.hpp"

namespace trlhpc {

double training_flops_per_token(const ModelConfig& config, int64_t seq_len);
// The MFU denominator when --peak_flops is not given is the backend's measured GEMM rate:
// measure_matmul_flops (include/trlhpc/ops/backend.hpp).

}  // namespace trlhpc
