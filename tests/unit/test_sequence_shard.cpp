// Sequence sharding for cp (zigzag), sp (contiguous) and both: the worked examples of sequence_shard.hpp,
// padding of rows whose length does not split, and shard -> unshard round trips that give back the
// padded batch with every token on exactly one rank.
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "trlhpc/core/error.hpp"
#include "test_support.hpp"
#include "trlhpc/parallel/sequence/sequence_shard.hpp"

namespace trlhpc {
namespace {

// input_ids 0..T-1 (one document, so positions equal the index): shows which tokens a shard keeps.
Batch iota_batch(int64_t T) {
  Batch b;
  b.rows = 1;
  b.seq_len = T;
  b.input_ids.resize(static_cast<size_t>(T));
  std::iota(b.input_ids.begin(), b.input_ids.end(), 0);
  b.positions = b.input_ids;
  b.targets.assign(static_cast<size_t>(T), 7);
  b.doc_ids.assign(static_cast<size_t>(T), 0);
  return b;
}

void expect_same(const Batch& a, const Batch& b) {
  EXPECT_EQ(a.rows, b.rows);
  EXPECT_EQ(a.seq_len, b.seq_len);
  EXPECT_EQ(a.input_ids, b.input_ids);
  EXPECT_EQ(a.targets, b.targets);
  EXPECT_EQ(a.positions, b.positions);
  EXPECT_EQ(a.doc_ids, b.doc_ids);
}

TEST(SequenceShard, ZigzagWorkedExample) {
  const Batch b = iota_batch(8);
  EXPECT_EQ(shard_sequence(b, {SequenceShardKind::kZigzag, 2, 0}).input_ids, (std::vector<int32_t>{0, 1, 6, 7}));
  EXPECT_EQ(shard_sequence(b, {SequenceShardKind::kZigzag, 2, 1}).input_ids, (std::vector<int32_t>{2, 3, 4, 5}));
  // cp 4: 8 chunks of 2; rank 1 keeps chunks 1 and 6.
  const Batch b16 = iota_batch(16);
  EXPECT_EQ(shard_sequence(b16, {SequenceShardKind::kZigzag, 4, 1}).positions,
            (std::vector<int32_t>{2, 3, 12, 13}));
}

TEST(SequenceShard, ContiguousWorkedExample) {
  const Batch b = iota_batch(8);
  EXPECT_EQ(shard_sequence(b, {SequenceShardKind::kContiguous, 2, 0}).input_ids, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(shard_sequence(b, {SequenceShardKind::kContiguous, 2, 1}).input_ids, (std::vector<int32_t>{4, 5, 6, 7}));
  expect_same(shard_sequence(b, {SequenceShardKind::kContiguous, 1, 0}), b);  // sp = 1: the identity
}

TEST(SequenceShard, PadsRowsThatDoNotSplit) {
  // T = 5 under cp 2 (4 chunks): padded to 8, padding carries no target and its own doc id.
  const Batch b = iota_batch(5);
  const Batch p = pad_sequence(b, 4);
  ASSERT_EQ(p.seq_len, 8);
  for (int64_t t = 5; t < 8; ++t) {
    EXPECT_EQ(p.input_ids[static_cast<size_t>(t)], 0);
    EXPECT_EQ(p.targets[static_cast<size_t>(t)], kIgnoreIndex);
    EXPECT_EQ(p.positions[static_cast<size_t>(t)], 0);
    EXPECT_EQ(p.doc_ids[static_cast<size_t>(t)], kPaddingDocId);
  }
  const Batch r1 = shard_sequence(b, {SequenceShardKind::kZigzag, 2, 1});
  EXPECT_EQ(r1.seq_len, 4);
  EXPECT_EQ(r1.input_ids, (std::vector<int32_t>{2, 3, 4, 0}));
  EXPECT_EQ(r1.doc_ids, (std::vector<int32_t>{0, 0, 0, kPaddingDocId}));
  // A row that already splits is not padded.
  EXPECT_EQ(pad_sequence(iota_batch(12), 4).seq_len, 12);
  EXPECT_EQ(shard_sequence(iota_batch(12), {SequenceShardKind::kContiguous, 3, 2}).input_ids,
            (std::vector<int32_t>{8, 9, 10, 11}));
}

TEST(SequenceShard, RoundTripKeepsEveryTokenOnce) {
  for (SequenceShardKind kind : {SequenceShardKind::kZigzag, SequenceShardKind::kContiguous})
    for (int P : {1, 2, 3, 4, 8})
      for (int64_t T : {1, 7, 16, 33, 64}) {
        const Batch b = testing::random_packed_batch(3, T, static_cast<uint64_t>(T * 31 + P));
        std::vector<Batch> shards;
        int64_t targets = 0;
        for (int r = 0; r < P; ++r) {
          shards.push_back(shard_sequence(b, {kind, P, r}));
          targets += shards.back().target_tokens();
          EXPECT_EQ(shards.back().rows, 3);
        }
        const int64_t chunks = SequenceShard{kind, P, 0}.chunk_count();
        const Batch padded = pad_sequence(b, chunks);
        EXPECT_EQ(padded.seq_len % chunks, 0);
        EXPECT_EQ(targets, b.target_tokens()) << "P " << P << " T " << T;
        const Batch back = unshard_sequence(shards, kind);
        SCOPED_TRACE("P " + std::to_string(P) + " T " + std::to_string(T));
        expect_same(back, padded);
      }
}

TEST(SequenceShard, ShardForDims) {
  ParallelDims cp{1, 1, 4, 1, 1};
  const SequenceShard z = sequence_shard_for(cp, 3, 0);
  EXPECT_EQ(z.kind, SequenceShardKind::kZigzag);
  EXPECT_EQ(z.size, 4);
  EXPECT_EQ(z.kept_chunks(), (std::vector<int64_t>{3, 4}));
  ParallelDims sp{1, 2, 1, 2, 1};
  const SequenceShard c = sequence_shard_for(sp, 0, 1);
  EXPECT_EQ(c.kind, SequenceShardKind::kContiguous);
  EXPECT_EQ(c.kept_chunks(), (std::vector<int64_t>{1}));
  const ParallelDims dp{1, 8, 1, 1, 1};
  EXPECT_EQ(sequence_shard_for(dp, 0, 0).chunk_count(), 1);
  // Chunk counts agree with what ParallelDims asks max_length to be a multiple of.
  EXPECT_EQ(z.chunk_count(), cp.sequence_multiple());
  EXPECT_EQ(c.chunk_count(), sp.sequence_multiple());
  // cp x sp hybrid: zigzag over cp, then contiguous over sp.
  const ParallelDims both{1, 1, 2, 2, 1};
  const SequenceShard h = sequence_shard_for(both, 1, 0);
  EXPECT_EQ(h.kind, SequenceShardKind::kZigzag);
  EXPECT_EQ(h.size, 2);
  EXPECT_EQ(h.rank, 1);
  EXPECT_EQ(h.inner_size, 2);
  EXPECT_EQ(h.inner_rank, 0);
  EXPECT_EQ(h.chunk_count(), both.sequence_multiple());
}

// The worked example of sequence_shard.hpp (T = 16, cp 2, sp 2), and for other sizes: the sp parts of
// a cp rank, concatenated in sp order, are that cp rank's zigzag shard (what Ulysses reassembles for
// the ring), padded for both splits.
TEST(SequenceShard, HybridSplitsTheZigzagShardContiguously) {
  const Batch b16 = iota_batch(16);
  EXPECT_EQ(shard_sequence(b16, {SequenceShardKind::kZigzag, 2, 0, 2, 0}).input_ids, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(shard_sequence(b16, {SequenceShardKind::kZigzag, 2, 0, 2, 1}).input_ids,
            (std::vector<int32_t>{12, 13, 14, 15}));
  EXPECT_EQ(shard_sequence(b16, {SequenceShardKind::kZigzag, 2, 1, 2, 0}).input_ids, (std::vector<int32_t>{4, 5, 6, 7}));
  for (int cp : {2, 4})
    for (int sp : {2, 3, 4})
      for (int64_t T : {5, 24, 61}) {
        SCOPED_TRACE("cp " + std::to_string(cp) + " sp " + std::to_string(sp) + " T " + std::to_string(T));
        const Batch b = testing::random_packed_batch(2, T, static_cast<uint64_t>(T * 7 + cp * 3 + sp));
        const Batch padded = pad_sequence(b, 2 * cp * sp);
        for (int r = 0; r < cp; ++r) {
          const Batch want = shard_sequence(padded, {SequenceShardKind::kZigzag, cp, r});
          std::vector<Batch> parts;
          for (int q = 0; q < sp; ++q) parts.push_back(shard_sequence(b, {SequenceShardKind::kZigzag, cp, r, sp, q}));
          expect_same(unshard_sequence(parts, SequenceShardKind::kContiguous), want);
        }
      }
}

}  // namespace
}  // namespace trlhpc
