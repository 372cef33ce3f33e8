// Ring attention (cp) at layer level: o, lse, dq, dk, dv of RingAttention on zigzag shards equal
// LocalAttention on the whole padded sequence, for cp = 1, 2, 4 (each size that divides the world,
// see sequence_attention_support.hpp), with one causal document per row, packed documents of odd
// lengths crossing chunk boundaries, right padding (rows padded to the chunk count), GQA and MQA, and
// sliding windows (1, 2, shorter and longer than a chunk, longer than the row) on causal and packed rows.
// Bound: max|err| / max|ref| <= 1e-5 per tensor; the only difference is fp32 summation order (the
// log-sum-exp merge of blocks, dK/dV summed around the ring). Measured: printed as "[ measured ]".
#include <gtest/gtest.h>

#include "sequence_attention_support.hpp"
#include "trlhpc/ops/ops.hpp"
#include "trlhpc/parallel/sequence/ring_attention.hpp"

namespace trlhpc {
namespace {

using namespace trlhpc::testing;

constexpr double kBound = 1e-5;

std::vector<AttentionCase> cases() {
  return {
      {"causal", 2, 128, 4, 2, 16, false, 1},
      {"packed_padded", 3, 90, 4, 2, 16, true, 2},
      {"packed_mqa_multi_tile", 1, 301, 4, 1, 8, true, 3},
      {"tiny_packed", 1, 5, 2, 2, 4, true, 4},
      {"causal_window_1", 1, 64, 4, 2, 8, false, 5, 1},
      {"causal_window_2", 2, 40, 4, 2, 8, false, 6, 2},
      {"causal_window_11", 2, 128, 4, 2, 16, false, 7, 11},
      {"packed_window_3", 3, 90, 4, 2, 16, true, 8, 3},
      {"packed_mqa_window_70", 1, 301, 4, 1, 8, true, 9, 70},
      {"packed_window_longer_than_row", 2, 90, 4, 2, 8, true, 10, 1000},
  };
}

// The reference lse (B, NH, T) rearranged to the ring's layout for this shard: (B, 2, NH, Tc).
std::vector<float> ring_lse_layout(const FullAttention& f, const AttentionCase& c, const std::vector<int64_t>& index) {
  const int64_t T = f.rows.seq_len, Tl = static_cast<int64_t>(index.size()) / c.B, Tc = Tl / 2;
  std::vector<float> out(static_cast<size_t>(c.B * c.NH * Tl));
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t ch = 0; ch < 2; ++ch)
      for (int64_t h = 0; h < c.NH; ++h)
        for (int64_t i = 0; i < Tc; ++i) {
          const int64_t t = index[static_cast<size_t>(b * Tl + ch * Tc + i)] - b * T;  // position in the row
          out[static_cast<size_t>(((b * 2 + ch) * c.NH + h) * Tc + i)] = f.lse[static_cast<size_t>((b * c.NH + h) * T + t)];
        }
  return out;
}

TEST(RingAttention, MatchesLocalAttention) {
  auto ops = make_cpu_ops();
  double worst = 0;
  for (int P : group_sizes({1, 2, 4}))
    for (const AttentionCase& c : cases()) {
      SCOPED_TRACE("cp " + std::to_string(P) + ", case " + c.name);
      RankGroup group(P);
      const SequenceShard shard{SequenceShardKind::kZigzag, P, group.communicator->rank()};
      const FullAttention f = full_attention(*ops, c, shard.chunk_count());
      const std::vector<int64_t> index = local_to_global(c.B, f.rows.seq_len, shard);
      const ShardedAttention run(*ops, f, c, index);
      RingAttention ring(*group.communicator);
      run.forward(*ops, ring);
      run.backward(*ops, ring);
      worst = std::max(worst, run.expect_matches(*ops, f, c, index, ring_lse_layout(f, c, index), kBound));

      // A second backward (buffers reused) gives the same gradients: dq/dk/dv are overwritten.
      const std::vector<float> dq1 = download(*ops, run.dq), dk1 = download(*ops, run.dk);
      run.backward(*ops, ring);
      EXPECT_EQ(download(*ops, run.dq), dq1);
      EXPECT_EQ(download(*ops, run.dk), dk1);

      const RingAttentionStats& st = ring.stats();
      EXPECT_EQ(st.chunk_pairs, 3 * c.B * 4 * P);  // forward + two backwards, 4P pairs per row each
      if (!c.packed && c.window == 0) {
        // One causal document: chunk r never sees the later chunk of its own block, and half of the
        // pairs of every other block are masked (zigzag balance).
        EXPECT_EQ(st.chunk_pairs_skipped, 3 * c.B * (1 + 2 * (P - 1)));
      }
      EXPECT_EQ(st.transfers, 2 * (P - 1) + 2 * (3 * (P - 1) + 1));
    }
  report_worst_error("ring attention vs local (o, lse, dq, dk, dv)", worst);
}

// Skipping is exact: documents that never meet across ranks cost no computation on the far blocks.
TEST(RingAttention, SkipsBlocksOfOtherDocuments) {
  auto ops = make_cpu_ops();
  for (int P : group_sizes({2, 4})) {
    RankGroup group(P);
    const SequenceShard shard{SequenceShardKind::kZigzag, P, group.communicator->rank()};
    // Each zigzag chunk is its own document: no chunk pair across ranks or chunks has an allowed pair.
    const int64_t Tc = 8, T = 2 * P * Tc, HS = 8;
    Batch rows;
    rows.rows = 1;
    rows.seq_len = T;
    for (int64_t t = 0; t < T; ++t) rows.positions.push_back(int32_t(t % Tc)), rows.doc_ids.push_back(int32_t(t / Tc));
    rows.input_ids = rows.targets = rows.positions;
    const Batch local = shard_sequence(rows, shard);
    const int64_t Tl = local.seq_len;
    const Tensor q = upload(*ops, random_floats(size_t(Tl * 2 * HS), 5)), k = upload(*ops, random_floats(size_t(Tl * HS), 6));
    const Tensor v = upload(*ops, random_floats(size_t(Tl * HS), 7));
    const Tensor pos = upload(*ops, local.positions), doc = upload(*ops, local.doc_ids);
    const Tensor o = ops->allocate(q.shape()), lse = ops->allocate({2 * Tl});
    RingAttention ring(*group.communicator);
    ring.forward(*ops, q, k, v, pos, doc, o, lse, AttentionShape{1, Tl, Tl, 2, 1, HS, 0.3f});
    // Only the local diagonal pairs (chunk c with itself) are computed: 2 of 4P pairs.
    EXPECT_EQ(ring.stats().chunk_pairs, 4 * P);
    EXPECT_EQ(ring.stats().chunk_pairs_skipped, 4 * P - 2);
  }
}

// Blocks entirely outside a sliding window are skipped, not computed and masked: with window 1 on one
// causal document each query chunk needs only itself, so of the 4P chunk pairs of a forward only the
// 2 local diagonal ones are computed (the K/V blocks still travel: transfers are unchanged).
TEST(RingAttention, SkipsBlocksOutsideTheWindow) {
  auto ops = make_cpu_ops();
  for (int P : group_sizes({2, 4})) {
    RankGroup group(P);
    const SequenceShard shard{SequenceShardKind::kZigzag, P, group.communicator->rank()};
    const AttentionCase c{"causal_window_1", 1, 16 * P, 2, 1, 8, false, 21, 1};
    const FullAttention f = full_attention(*ops, c, shard.chunk_count());
    const std::vector<int64_t> index = local_to_global(c.B, f.rows.seq_len, shard);
    const ShardedAttention run(*ops, f, c, index);
    RingAttention ring(*group.communicator);
    run.forward(*ops, ring);
    EXPECT_EQ(ring.stats().chunk_pairs, 4 * P);
    EXPECT_EQ(ring.stats().chunk_pairs_skipped, 4 * P - 2);
    EXPECT_EQ(ring.stats().transfers, 2 * (P - 1));
    run.backward(*ops, ring);
    run.expect_matches(*ops, f, c, index, ring_lse_layout(f, c, index), kBound);
  }
}

}  // namespace
}  // namespace trlhpc
