#pragma once
// Model FLOPs of training, for MFU, as PaLM (Chowdhery et al. 2022, appendix B) and Megatron-LM
// (Narayanan et al. 2021, section 5.1) count them, with the attention term for what a causal, document
// masked model attends:
//
//   step FLOPs = 6 N x tokens + 12 H Q x pairs
//
// N: non-embedding parameters (every weight a token's activations are multiplied by: 2 FLOPs per weight
//    forward, 4 backward for the input and weight gradients). The input embedding lookup is not a matmul
//    and is left out; the LM head is in, tied to the embedding or not (its matmul is done either way).
// pairs: (query, key) pairs attended, summed over the layers. Per pair, layer and head the scores q.k
//    and the weighted sum p.v take 2 Q FLOPs each forward (4 Q), the backward twice that (dq and dk from
//    the score gradients, dp and dv: 8 Q): 12 Q per pair and head, 12 H Q over the H query heads (GQA
//    shares k/v heads, not the products).
//
// Causal pairs: the query at position t of its document (t = 0, 1, ...) attends t + 1 keys, and a
// sliding-window layer of window W at most W of them (transformers' sliding_window_causal). One document
// of T tokens therefore holds
//   full layer:    sum_{t=0}^{T-1} (t + 1)        = T (T + 1) / 2
//   sliding (W):   sum_{t=0}^{T-1} min(t + 1, W)  = W (W + 1) / 2 + (T - W) W   for T >= W
// pairs, so a row of one document costs 6 N + 12 L H Q (T + 1) / 2 = 6 N + 6 L H Q (T + 1) per token with
// L full layers (PaLM's 12 L H Q T counts all T^2 pairs, the masked half too). Packed rows (positions
// restart per document, documents masked from each other) count each document's own pairs, so short
// documents are not credited with row-length attention. Recompute (gradient checkpointing) is not
// counted: it is not model FLOPs (that would be hardware FLOPs utilisation).
//
// With data, context and sequence parallelism a step's FLOPs are those of every token of the global
// batch (Trainer::step sums tokens and pairs over the `loss` group); each of the world's ranks holds a
// share of them, so MFU = step FLOPs / (step seconds x world size x peak per rank).
#include <cstdint>

#include "trlhpc/data/batch.hpp"
#include "trlhpc/model/model_config.hpp"

namespace trlhpc {

// N above.
double non_embedding_parameters(const ModelConfig& config);
// Causal (query, key) pairs of a document of `length` tokens in one layer of `window` (0: full).
int64_t causal_pairs(int64_t length, int64_t window);
// Pairs of a micro-batch's non-padding tokens, summed over the layers: the query at document position p
// attends p + 1 keys in a full layer and min(p + 1, W) in a sliding one. Needs the collator's invariant that positions count 0, 1, ... from each
// document's first token (packing_collate.cpp), which also holds for a cp/sp shard's tokens.
int64_t attended_pairs(const ModelConfig& config, const Batch& batch);
// 6 N tokens + 12 H Q pairs.
double training_flops(const ModelConfig& config, int64_t tokens, int64_t pairs);
// Per token of one document of `seq_len` tokens (a row without packing; planners and benchmarks).
double training_flops_per_token(const ModelConfig& config, int64_t seq_len);

}  // namespace trlhpc
