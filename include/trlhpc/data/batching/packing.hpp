#pragma once
// Packing tokenized examples into rows, and collating rows into the Batch the model consumes.
//
// Packing works on example lengths and returns rows of segments (example, start, length), so examples
// are never copied until collation. It mirrors trl/data_utils.py `pack_dataset`:
//   kBfd      best-fit decreasing: examples longer than max_length are truncated (keep_start), empty ones
//             dropped, the rest sorted by length (descending, stable) and each put into the open bin with
//             the least remaining space that still fits it (ties: the bin that reached that space first),
//             else a new bin. Sequences are never split. O(n log n + n log max_length) with a max segment
//             tree over remaining capacities, as TRL's `_SegmentTree`. Rows come out in bin-creation order.
//   kBfdSplit as kBfd, but an example longer than max_length is first cut into fragments of max_length
//             (the last one shorter), each packed as its own document (TRL "bfd_split").
//   kWrapped  concatenate everything and cut every max_length tokens: documents are split across rows and a
//             row is ONE sequence for attention and loss (TRL's wrapped rows carry no seq_lengths: positions
//             run 0..len-1 over the whole row and the last token of one document predicts the first token of
//             the next). PackedRow::one_document marks this.
// TRL packs inside `datasets.map` batches (1000 examples by default): each batch of examples is packed on
// its own, so the last bin/row of each batch may be short. PackingOptions::map_batch_size reproduces it;
// 0 packs the whole dataset at once (fuller rows, not TRL's).
//
// Collation (TRL's DataCollatorForLanguageModeling, with targets pre-shifted, see batch.hpp):
//   - every segment is a document (unless its row is one_document): positions restart at 0, doc ids count
//     0,1,2,... along the output row, and target[t] = input_ids[t+1] when t+1 is in the same document and
//     loss_mask[t+1] == 1, else kIgnoreIndex. Nothing is ever predicted across documents.
//   - rows are right-padded to the longest row of the micro-batch (or pad_to_length), rounded up to
//     pad_to_multiple_of; padding has the pad id, target kIgnoreIndex, position 0 (TRL pads position_ids with
//     0) and doc id kPaddingDocId.
//   - padding_free concatenates all rows of the micro-batch into one row (B = 1) before that padding.
//     TRL forces padding_free for bfd packing, so a TRL bfd micro-batch is one row.
// Unpacked training is the same code: unpacked_rows gives one row per example (collator truncation to
// max_length, keep_start or keep_end).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "trlhpc/data/batch.hpp"
#include "trlhpc/data/dataset/example.hpp"

namespace trlhpc::batching {

enum class PackingStrategy { kBfd, kBfdSplit, kWrapped };
enum class TruncationMode { kKeepStart, kKeepEnd };

// "bfd" | "bfd_split" | "wrapped"; UserError naming --packing_strategy otherwise.
PackingStrategy parse_packing_strategy(const std::string& name);
// "keep_start" | "keep_end"; UserError naming --truncation_mode otherwise.
TruncationMode parse_truncation_mode(const std::string& name);

// Tokens [start, start + length) of example `example`.
struct PackedSegment {
  int64_t example = 0;
  int32_t start = 0;
  int32_t length = 0;
  bool operator==(const PackedSegment&) const = default;
};

struct PackedRow {
  std::vector<PackedSegment> segments;
  bool one_document = false;  // wrapped: the whole row is one sequence (no document boundaries inside)

  int32_t length() const;
};

struct PackingOptions {
  int32_t max_length = 1024;      // row capacity in tokens (--max_length)
  int64_t map_batch_size = 1000;  // examples packed together (TRL's datasets.map batch); 0 = all at once
};

// Shortens an example to max_length tokens, keeping its start or its end (input_ids and loss_mask together).
void truncate_example(dataset::TokenizedExample& example, int32_t max_length, TruncationMode mode = TruncationMode::kKeepStart);

// input_ids.size() of every example.
std::vector<int32_t> example_lengths(const std::vector<dataset::TokenizedExample>& examples);

// Packs examples given by their lengths. `order` lists the example indices to pack, in order (e.g. the
// shuffled order TRL packs when shuffle_dataset is on); empty means 0..n-1. Segments name indices into
// `lengths`. UserError when max_length < 1.
std::vector<PackedRow> pack_bfd(const std::vector<int32_t>& lengths, const PackingOptions& options,
                                std::span<const int64_t> order = {}, bool split_overflow = false);
std::vector<PackedRow> pack_wrapped(const std::vector<int32_t>& lengths, const PackingOptions& options,
                                    std::span<const int64_t> order = {});
std::vector<PackedRow> pack(PackingStrategy strategy, const std::vector<int32_t>& lengths,
                            const PackingOptions& options, std::span<const int64_t> order = {});

// No packing: one row per example in `order` (empty = all), truncated to max_length (0 = no truncation).
std::vector<PackedRow> unpacked_rows(const std::vector<int32_t>& lengths, int32_t max_length,
                                     TruncationMode mode = TruncationMode::kKeepStart,
                                     std::span<const int64_t> order = {});

struct CollateOptions {
  bool padding_free = false;       // --padding_free: one row holding the whole micro-batch
  int32_t pad_to_multiple_of = 0;  // --pad_to_multiple_of: round the row length up (0 or 1: no rounding)
  int32_t pad_to_length = 0;       // > 0: pad rows to at least this length (e.g. max_length for fixed shapes)
  int32_t pad_token_id = 0;        // id written into padding positions
};

// The micro-batch made of rows[row_indices[i]] for each i, in that order. Segments index `examples`.
Batch collate(const std::vector<dataset::TokenizedExample>& examples, const std::vector<PackedRow>& rows,
              std::span<const int64_t> row_indices, const CollateOptions& options);

}  // namespace trlhpc::batching
