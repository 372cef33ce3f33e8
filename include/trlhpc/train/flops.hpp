#pragma once
// Model FLOPs utilisation (MFU) per the PaLM paper (Chowdhery et al. 2022, appendix B): training
// FLOPs per token = 6 N + 12 L H Q T, with N the non-embedding parameters (the LM head counts, the
// input embedding lookup does not), L layers, H heads, Q head size, T the sequence length attended.
// The attention term counts every (query, key) pair of the row, as PaLM does, although a causal mask
// computes about half and document masking of packed rows less still: a packed run of short
// documents (the bundled tiny-chat job) can therefore print MFU above 100 %.
#include <cstdint>

#include "trlhpc/model/model_config.hpp"

namespace trlhpc {

class Ops;

double training_flops_per_token(const ModelConfig& config, int64_t seq_len);
// Measured fp32 GEMM rate of the backend (FLOP/s; on the CPU backend, this process's BLAS threads),
// from a few 2048^3 Ops::matmul calls: the "peak" for MFU when --peak_flops is not given.
double measure_gemm_flops(Ops& ops);

}  // namespace trlhpc
