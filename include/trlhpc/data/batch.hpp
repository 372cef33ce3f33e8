#pragma once
// The unit the data pipeline hands to the model: one micro-batch on one rank, host memory.
//
// Rows are either padded sequences (one document per row, right padding) or packed rows (several
// documents per row, positions restarting at each document). Targets are already shifted: target[t]
// is the id the model must predict from token t (input_ids[t+1] of the same document when that token
// is trained on, else -100), so sequence sharding for cp/sp never needs a neighbour's tokens.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace trlhpc {

inline constexpr int32_t kIgnoreIndex = -100;
inline constexpr int32_t kPaddingDocId = -1;

struct Batch {
  int64_t rows = 0;     // B
  int64_t seq_len = 0;  // T
  std::vector<int32_t> input_ids;  // (B, T) token ids; padding uses the pad id (or 0)
  std::vector<int32_t> targets;    // (B, T) next-token targets, kIgnoreIndex where no loss
  std::vector<int32_t> positions;  // (B, T) position ids for RoPE, restarting at 0 per document
  std::vector<int32_t> doc_ids;    // (B, T) document ids unique within a row; kPaddingDocId for padding
  // (B, T) where each token comes from: its row of the (packed) dataset and its column in that row, -1
  // for padding. They follow the tokens through padding-free concatenation and cp/sp sharding, so a
  // per-token random draw keyed by them (LoRA dropout) is the same on every layout. Empty for batches
  // built by hand (then treated as all -1).
  std::vector<int32_t> source_rows;
  std::vector<int32_t> source_columns;
  // T as the micro-batch was collated, before cp/sp sharding padded or cut it (0: seq_len): the sequence
  // length transformers' NEFTune hook reads off the embedding output (model/neftune.hpp).
  int64_t collated_seq_len = 0;

  int64_t tokens() const { return rows * seq_len; }
  int64_t collated_length() const { return collated_seq_len > 0 ? collated_seq_len : seq_len; }
  int64_t target_tokens() const {
    int64_t n = 0;
    for (int32_t t : targets) n += t != kIgnoreIndex;
    return n;
  }
};

// A batch of one row of `seq_len` padding tokens: no targets, attends only to itself. Lets a rank with
// no data take part in a step or evaluation that other ranks run.
inline Batch padding_batch(int64_t seq_len) {
  Batch b;
  b.rows = 1;
  b.seq_len = seq_len;
  b.input_ids.assign(static_cast<size_t>(seq_len), 0);
  b.targets.assign(static_cast<size_t>(seq_len), kIgnoreIndex);
  b.positions.assign(static_cast<size_t>(seq_len), 0);
  b.doc_ids.assign(static_cast<size_t>(seq_len), kPaddingDocId);
  return b;
}

}  // namespace trlhpc
