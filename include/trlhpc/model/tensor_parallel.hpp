#pragma once
// Tensor-parallel index math: which elements of a full Hugging Face tensor a tp rank holds, and how
// the tp slices reassemble (loading, deterministic init, export). Split kinds: tp_layout.hpp.
//
// Worked example, row-parallel o_proj (C, NH*HS) = (2, 4), tp = 2, rank 1 holds columns 2..3:
//   local (2, 2) element (i, j) = global element i*4 + 2 + j; local flat range [1, 3) = local (0,1),
//   (1,0) -> global ranges [3, 4) and [6, 7).
// Column-parallel / vocab-parallel slices are one contiguous range: rank r of a (R, K) tensor split in
// rows holds global elements [r*R/tp*K, (r+1)*R/tp*K).
#include <cstdint>
#include <functional>
#include <span>

#include "trlhpc/model/model_config.hpp"
#include "trlhpc/model/parameter_names.hpp"
#include "trlhpc/model/tp_layout.hpp"

namespace trlhpc {

// Throws UserError naming the numbers unless num_attention_heads, intermediate_size and vocab_size
// all divide by tp_size, num_key_value_heads divides by tp_size or divides it (kv heads replicated on
// tp/KVH ranks), and tp_size >= 1. Pure: call it on every rank before any collective.
void validate_tensor_parallel(const ModelConfig& config, int tp_size);

// The per-rank architecture: NH/tp, max(1, KVH/tp), F/tp, V/tp (head_dim, C unchanged). Validates first.
ModelConfig tp_local_config(const ModelConfig& config, int tp_size);

// The full (tp size 1) shape of a tp-local parameter.
Shape tp_full_shape(const ParameterSpec& local, int tp_size);
// The full spec of a tp-local one: same name, kind and unit, full shape, split Replicated.
ParameterSpec tp_full_spec(const ParameterSpec& local, int tp_size);

// Calls visit(global_begin, global_end, local_offset) for each contiguous run of full-tensor elements
// that local flat elements [begin, end) of `local` map to on rank tp.rank, in order; local_offset is
// where the run starts in [begin, end) (0 for the first).
void for_each_tp_global_range(const ParameterSpec& local, TpLayout tp, int64_t begin, int64_t end,
                              const std::function<void(int64_t, int64_t, int64_t)>& visit);

// Reassembles the full tensor (row-major, tp_full_shape) from `gathered` = the tp ranks' local
// tensors concatenated in rank order (an all_gather), into `full`.
void tp_assemble_full(const ParameterSpec& local, int tp_size, std::span<const float> gathered, std::span<float> full);

}  // namespace trlhpc
