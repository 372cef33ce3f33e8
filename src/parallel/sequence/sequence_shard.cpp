// Sequence sharding for cp (zigzag) and sp (contiguous); the rules and a worked example are in
// include/trlhpc/parallel/sequence/sequence_shard.hpp.
#include "trlhpc/parallel/sequence/sequence_shard.hpp"

#include <algorithm>
#include <iterator>
#include <vector>

#include "trlhpc/core/error.hpp"

namespace trlhpc {
namespace {

// The four per-token arrays of a Batch, so copies treat them alike.
std::vector<int32_t> Batch::*const kTokenArrays[] = {&Batch::input_ids, &Batch::targets, &Batch::positions,
                                                     &Batch::doc_ids};

// The optional ones (batch.hpp: empty for batches built by hand), -1 in padding.
std::vector<int32_t> Batch::*const kSourceArrays[] = {&Batch::source_rows, &Batch::source_columns};

void check_arrays(const Batch& b) {
  for (auto array : kTokenArrays)
    TRLHPC_ASSERT(static_cast<int64_t>((b.*array).size()) == b.tokens(),
                  "batch arrays do not match rows " + std::to_string(b.rows) + " x seq_len " +
                      std::to_string(b.seq_len));
  for (auto array : kSourceArrays)
    TRLHPC_ASSERT((b.*array).empty() || static_cast<int64_t>((b.*array).size()) == b.tokens(),
                  "batch source arrays do not match rows x seq_len");
}

// The arrays `b` carries: the four, and the source ones when present.
std::vector<std::vector<int32_t> Batch::*> arrays_of(const Batch& b) {
  std::vector<std::vector<int32_t> Batch::*> arrays(std::begin(kTokenArrays), std::end(kTokenArrays));
  if (!b.source_rows.empty()) arrays.insert(arrays.end(), std::begin(kSourceArrays), std::end(kSourceArrays));
  return arrays;
}

}  // namespace

int64_t SequenceShard::chunk_count() const {
  return (kind == SequenceShardKind::kZigzag ? 2 * int64_t{size} : int64_t{size}) * inner_size;
}

std::vector<int64_t> SequenceShard::kept_chunks() const {
  TRLHPC_ASSERT(size >= 1 && rank >= 0 && rank < size,
                "sequence shard rank " + std::to_string(rank) + " outside a group of " + std::to_string(size));
  if (kind == SequenceShardKind::kZigzag) return {rank, 2 * int64_t{size} - 1 - rank};
  return {rank};
}

SequenceShard sequence_shard_for(const ParallelDims& dims, int cp_rank, int sp_rank) {
  if (dims.cp > 1) return SequenceShard{SequenceShardKind::kZigzag, dims.cp, cp_rank, dims.sp, sp_rank};
  return SequenceShard{SequenceShardKind::kContiguous, dims.sp, sp_rank};
}

Batch pad_sequence(const Batch& batch, int64_t multiple) {
  TRLHPC_ASSERT(multiple >= 1, "pad_sequence multiple " + std::to_string(multiple));
  check_arrays(batch);
  const int64_t T = batch.seq_len, padded = (T + multiple - 1) / multiple * multiple;
  if (padded == T) return batch;
  Batch out;
  out.rows = batch.rows;
  out.seq_len = padded;
  out.collated_seq_len = batch.collated_length();
  out.input_ids.assign(static_cast<size_t>(out.tokens()), 0);
  out.targets.assign(static_cast<size_t>(out.tokens()), kIgnoreIndex);
  out.positions.assign(static_cast<size_t>(out.tokens()), 0);
  out.doc_ids.assign(static_cast<size_t>(out.tokens()), kPaddingDocId);
  if (!batch.source_rows.empty())
    for (auto array : kSourceArrays) (out.*array).assign(static_cast<size_t>(out.tokens()), -1);
  for (auto array : arrays_of(batch))
    for (int64_t b = 0; b < batch.rows; ++b)
      std::copy_n((batch.*array).begin() + b * T, T, (out.*array).begin() + b * padded);
  return out;
}

Batch shard_sequence(const Batch& batch, const SequenceShard& shard) {
  if (shard.inner_size > 1) {
    // Outer shard of the row padded for both splits, then its contiguous part for the inner rank.
    const Batch outer = shard_sequence(pad_sequence(batch, shard.chunk_count()), {shard.kind, shard.size, shard.rank});
    return shard_sequence(outer, {SequenceShardKind::kContiguous, shard.inner_size, shard.inner_rank});
  }
  const int64_t chunks = shard.chunk_count();
  const Batch padded = pad_sequence(batch, chunks);
  const int64_t T = padded.seq_len, chunk = T / chunks;
  const std::vector<int64_t> kept = shard.kept_chunks();
  Batch out;
  out.rows = padded.rows;
  out.seq_len = chunk * static_cast<int64_t>(kept.size());
  out.collated_seq_len = padded.collated_length();
  for (auto array : arrays_of(padded)) {
    std::vector<int32_t>& dst = out.*array;
    dst.reserve(static_cast<size_t>(out.tokens()));
    for (int64_t b = 0; b < padded.rows; ++b)
      for (int64_t c : kept) {
        auto first = (padded.*array).begin() + b * T + c * chunk;
        dst.insert(dst.end(), first, first + chunk);
      }
  }
  return out;
}

Batch unshard_sequence(std::span<const Batch> shards, SequenceShardKind kind) {
  TRLHPC_ASSERT(!shards.empty(), "unshard_sequence of no shards");
  const int size = static_cast<int>(shards.size());
  const int64_t rows = shards[0].rows, local = shards[0].seq_len;
  for (const Batch& s : shards) {
    check_arrays(s);
    TRLHPC_ASSERT(s.rows == rows && s.seq_len == local, "shards of different shapes");
  }
  const int64_t per_rank = kind == SequenceShardKind::kZigzag ? 2 : 1;
  TRLHPC_ASSERT(local % per_rank == 0, "zigzag shard of odd length " + std::to_string(local));
  const int64_t chunk = local / per_rank, T = local * size;
  Batch out;
  out.rows = rows;
  out.seq_len = T;
  out.collated_seq_len = shards[0].collated_seq_len;
  const auto arrays = arrays_of(shards[0]);
  for (auto array : arrays) (out.*array).assign(static_cast<size_t>(out.tokens()), 0);
  for (int r = 0; r < size; ++r) {
    const std::vector<int64_t> kept = SequenceShard{kind, size, r}.kept_chunks();
    for (auto array : arrays)
      for (int64_t b = 0; b < rows; ++b)
        for (size_t i = 0; i < kept.size(); ++i)
          std::copy_n((shards[static_cast<size_t>(r)].*array).begin() + b * local + static_cast<int64_t>(i) * chunk,
                      chunk, (out.*array).begin() + b * T + kept[i] * chunk);
  }
  return out;
}

}  // namespace trlhpc
