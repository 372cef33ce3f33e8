#pragma once
// Counting gradient elements once under tensor parallelism, for the global gradient norm.
//
// A tp-split parameter (q/k/v/gate/up/o/down weights, column-parallel biases, vocab tables) holds
// different elements on each tp rank: every tp rank counts its slice. A tp-replicated one (norm
// weights, o_proj/down_proj biases) holds the same gradient on every tp rank: only tp rank 0 counts it.
// A kv-replicated one (k/v when tp > KVH) holds the same gradient on the tp/KVH ranks sharing its kv
// head (after the decoder's sub-group all-reduce): only the first rank of each sub-group counts it.
// The strategies then sum over the tp group (and over fsdp for shards), so each model element is
// counted exactly once. tp rank 0 counts everything it holds, so at tp = 1 this is the plain sum.
#include <cstdint>

#include "trlhpc/core/tensor.hpp"
#include "trlhpc/model/parameter_store.hpp"

namespace trlhpc {

class Ops;

// Sum of squares of `data`, which holds elements [begin, begin + data.numel()) of `unit`'s gradient
// buffer, counting only the elements this tp rank is responsible for (see above). Padding is zero.
double tp_counted_sum_of_squares(Ops& ops, const ParameterUnit& unit, int64_t begin, const Tensor& data, int tp_rank);

}  // namespace trlhpc
