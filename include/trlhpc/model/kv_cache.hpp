#pragma once
// KvCache: the keys (after RoPE) and values of the tokens one sequence has already run through a
// Decoder, per layer, so that generating a token costs one token's forward instead of the whole
// prefix's (Decoder::forward_incremental). Made by Decoder::make_kv_cache on the decoder's device, with
// the tp-local kv heads (KVH/tp, or one shared head when tp > KVH).
//
// A global layer keeps every token: row r holds position r. A sliding-window layer (window W: a query
// at p sees keys p - W + 1 .. p) keeps only what a later query can still see, the newest W - 1 tokens,
// in a buffer of W rows (one free row for the next decoded token), oldest first: row r holds position
// length - kept + r. Its memory stays at W rows however long the sequence grows, as transformers'
// DynamicSlidingWindowLayer drops the older keys. Worked example, W = 3, after 10 tokens: kept = 2,
// rows 0..1 hold positions 8, 9; decoding token 10 writes row 2, attends over positions 8..10, then
// keeps positions 9, 10 in rows 0..1. A prefill of more tokens than the free rows runs the layer on a
// transient buffer of kept + n rows (the prefill's activations are that large anyway) and keeps its
// last W - 1 rows.
#include <cstdint>
#include <vector>

#include "trlhpc/core/tensor.hpp"

namespace trlhpc {

struct KvCache {
  int64_t capacity = 0;         // tokens of the sequence it can hold
  int64_t length = 0;           // tokens run through: positions [0, length) of the sequence
  std::vector<int64_t> window;  // per layer: its sliding window W, 0 = global (keeps every token)
  std::vector<Tensor> keys;     // per layer (rows, KVH*HS): rows = capacity (global) or min(W, capacity)
  std::vector<Tensor> values;   // per layer (rows, KVH*HS)
  Tensor positions;             // (capacity) I32: 0, 1, ..., capacity-1 (key and query positions)
  Tensor doc_ids;               // (capacity) I32: all 0 (one document)

  // Tokens layer l holds: every token (global) or the newest min(length, W - 1) (sliding).
  int64_t kept(size_t layer) const {
    const int64_t w = window[layer];
    return w > 0 && length > w - 1 ? w - 1 : length;
  }
  // Rows of layer l's buffer: what it costs in memory, independent of `length` for a sliding layer.
  int64_t rows(size_t layer) const { return keys[layer].shape().empty() ? 0 : keys[layer].shape()[0]; }
};

}  // namespace trlhpc
