// Collation of packed (or unpacked) rows into a Batch; the rules are in packing.hpp.
//
// Worked example (padding_free=false, pad_to_multiple_of=4, pad id 0). Row 0 holds documents A = [a0 a1 a2]
// (loss_mask 0 1 1) and B = [b0 b1] (loss_mask 1 1); row 1 holds C = [c0 c1] (loss_mask 0 1). T = 5 -> 8.
//   input_ids  a0  a1  a2  b0  b1  0    0    0   | c0  c1   0 ...
//   positions   0   1   2   0   1  0    0    0   |  0   1   0 ...
//   doc_ids     0   0   0   1   1  -1   -1   -1  |  0   0  -1 ...
//   targets    a1  a2 -100 b1 -100 -100 -100 -100| c1 -100 -100 ...
// a2 does not predict b0 (another document); b0's own mask does not matter (nothing precedes it in B).
#include <algorithm>

#include "trlhpc/core/error.hpp"
#include "trlhpc/data/batching/packing.hpp"

namespace trlhpc::batching {
namespace {

int64_t round_up(int64_t n, int32_t multiple) {
  if (multiple <= 1) return n;
  return (n + multiple - 1) / multiple * multiple;
}

// Writes the tokens of `row` at out[offset...] and returns the tokens written. Documents are numbered from
// `next_doc` on, which is advanced. `mask` receives the loss mask for the target pass.
int64_t write_row(const std::vector<dataset::TokenizedExample>& examples, const PackedRow& row, Batch& out, int64_t offset,
                  int32_t& next_doc, std::vector<uint8_t>& mask) {
  int64_t t = offset;
  int32_t position = 0;
  if (row.one_document && !row.segments.empty()) ++next_doc;
  for (const PackedSegment& segment : row.segments) {
    TRLHPC_ASSERT(segment.example >= 0 && static_cast<size_t>(segment.example) < examples.size(),
                  "packed segment names an example that does not exist");
    const dataset::TokenizedExample& example = examples[static_cast<size_t>(segment.example)];
    TRLHPC_ASSERT(segment.start >= 0 && segment.length >= 0 && segment.start + segment.length <= example.length(),
                  "packed segment runs past the end of its example");
    TRLHPC_ASSERT(example.loss_mask.size() == example.input_ids.size(), "loss_mask and input_ids differ in length");
    if (!row.one_document) {
      ++next_doc;
      position = 0;
    }
    for (int32_t k = 0; k < segment.length; ++k, ++t) {
      size_t source = static_cast<size_t>(segment.start + k);
      out.input_ids[t] = example.input_ids[source];
      mask[t] = example.loss_mask[source];
      out.positions[t] = position++;
      out.doc_ids[t] = next_doc - 1;
    }
  }
  return t - offset;
}

}  // namespace

Batch collate(const std::vector<dataset::TokenizedExample>& examples, const std::vector<PackedRow>& rows,
              std::span<const int64_t> row_indices, const CollateOptions& options) {
  TRLHPC_REQUIRE(options.pad_to_multiple_of >= 0,
                 "--pad_to_multiple_of " + std::to_string(options.pad_to_multiple_of) + " must be >= 0");
  std::vector<int64_t> lengths;
  lengths.reserve(row_indices.size());
  for (int64_t r : row_indices) {
    TRLHPC_ASSERT(r >= 0 && static_cast<size_t>(r) < rows.size(), "micro-batch names a row that does not exist");
    lengths.push_back(rows[static_cast<size_t>(r)].length());
  }

  Batch batch;
  int64_t longest = 0;
  if (options.padding_free) {
    batch.rows = row_indices.empty() ? 0 : 1;
    for (int64_t n : lengths) longest += n;
  } else {
    batch.rows = static_cast<int64_t>(row_indices.size());
    for (int64_t n : lengths) longest = std::max(longest, n);
  }
  const int64_t padded = round_up(std::max<int64_t>(longest, options.pad_to_length), options.pad_to_multiple_of);
  batch.seq_len = batch.rows == 0 ? 0 : padded;
  const int64_t total = batch.rows * batch.seq_len;
  batch.input_ids.assign(total, options.pad_token_id);
  batch.targets.assign(total, kIgnoreIndex);
  batch.positions.assign(total, 0);
  batch.doc_ids.assign(total, kPaddingDocId);
  batch.source_rows.assign(total, -1);
  batch.source_columns.assign(total, -1);
  std::vector<uint8_t> mask(total, 0);

  int64_t offset = 0;
  int32_t next_doc = 0;
  for (size_t i = 0; i < row_indices.size(); ++i) {
    if (!options.padding_free) {
      offset = static_cast<int64_t>(i) * batch.seq_len;
      next_doc = 0;  // doc ids are unique within a row
    }
    const int64_t written = write_row(examples, rows[static_cast<size_t>(row_indices[i])], batch, offset, next_doc, mask);
    for (int64_t k = 0; k < written; ++k) {  // where each token comes from (LoRA dropout's key, batch.hpp)
      batch.source_rows[static_cast<size_t>(offset + k)] = static_cast<int32_t>(row_indices[i]);
      batch.source_columns[static_cast<size_t>(offset + k)] = static_cast<int32_t>(k);
    }
    offset += written;
  }

  // Shifted targets: token t predicts t+1 when both are in the same document and t+1 is trained on. Rows are
  // separated because a row ends either in padding (doc -1) or exactly at seq_len (no t+1 in this row).
  for (int64_t row = 0; row < batch.rows; ++row) {
    const int64_t base = row * batch.seq_len;
    for (int64_t t = base; t + 1 < base + batch.seq_len; ++t) {
      int32_t doc = batch.doc_ids[t];
      if (doc != kPaddingDocId && batch.doc_ids[t + 1] == doc && mask[t + 1]) batch.targets[t] = batch.input_ids[t + 1];
    }
  }
  return batch;
}

}  // namespace trlhpc::batching
