#pragma once
// KvCache: the keys (after RoPE) and values of the tokens one sequence has already run through a
// Decoder, per layer, so that generating a token costs one token's forward instead of the whole
// prefix's (Decoder::forward_incremental). Made by Decoder::make_kv_cache on the decoder's device, with
// the tp-local kv heads (KVH/tp, or one shared head when tp > KVH).
#include <cstdint>
#include <vector>

#include "trlhpc/core/tensor.hpp"

namespace trlhpc {

struct KvCache {
  int64_t capacity = 0;         // tokens it can hold
  int64_t length = 0;           // tokens held: positions [0, length) of the sequence
  std::vector<Tensor> keys;     // per layer (capacity, KVH*HS), rows [0, length) valid
  std::vector<Tensor> values;   // per layer (capacity, KVH*HS)
  Tensor positions;             // (capacity) I32: 0, 1, ..., capacity-1 (key and query positions)
  Tensor doc_ids;               // (capacity) I32: all 0 (one document)
};

}  // namespace trlhpc
