// Ulysses sequence parallel attention (sp) at layer level: o, lse, dq, dk, dv of UlyssesAttention on
// contiguous shards equal LocalAttention on the whole padded sequence, for sp = 1, 2, 4 (each size that
// divides the world, see sequence_attention_support.hpp), causal and packed with padding, and GQA with
// KVH >= sp (kv heads split) and KVH < sp (kv heads repeated sp/KVH times, their gradients summed), with
// and without sliding windows (the window travels in the AttentionShape to the local kernel).
// Bound: max|err| / max|ref| <= 1e-5 per tensor (fp32 summation order only: the primitive sees the
// same rows with fewer heads; repeated kv heads add their dk/dv copies). Measured: "[ measured ]".
#include <gtest/gtest.h>

#include "sequence_attention_support.hpp"
#include "trlhpc/ops/ops.hpp"
#include "trlhpc/parallel/sequence/ring_attention.hpp"
#include "trlhpc/parallel/sequence/ulysses_attention.hpp"
#include "trlhpc/runtime/mpi_comm.hpp"

namespace trlhpc {
namespace {

using namespace trlhpc::testing;

constexpr double kBound = 1e-5;

std::vector<AttentionCase> cases() {
  return {
      {"causal_gqa", 2, 64, 4, 2, 16, false, 11},        // KVH 2: split at sp 2, repeated at sp 4
      {"packed_padded_mqa", 3, 90, 8, 1, 8, true, 12},   // KVH 1 < sp: repeated
      {"packed_mha", 1, 130, 4, 4, 8, true, 13},         // KVH = NH: split
      {"tiny_packed", 1, 5, 4, 2, 4, true, 14},
      {"packed_window_1", 2, 64, 4, 2, 8, true, 15, 1},
      {"causal_window_2", 1, 40, 4, 2, 8, false, 16, 2},
      {"packed_padded_window_9", 3, 90, 8, 1, 8, true, 17, 9},
      {"window_longer_than_row", 1, 64, 4, 2, 8, false, 18, 500},
  };
}

// The reference lse (B, NH, T) as this rank holds it: its heads over the whole row, (B, NH/P, T).
std::vector<float> ulysses_lse_layout(const FullAttention& f, const AttentionCase& c, int P, int r) {
  const int64_t T = f.rows.seq_len, NHl = c.NH / P;
  std::vector<float> out(static_cast<size_t>(c.B * NHl * T));
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t j = 0; j < NHl; ++j)
      std::copy_n(f.lse.begin() + (b * c.NH + r * NHl + j) * T, T, out.begin() + (b * NHl + j) * T);
  return out;
}

TEST(UlyssesAttention, MatchesLocalAttention) {
  auto ops = make_cpu_ops();
  double worst = 0;
  for (int P : group_sizes({1, 2, 4}))
    for (const AttentionCase& c : cases()) {
      if (c.NH % P != 0 || (c.KVH % P != 0 && P % c.KVH != 0)) continue;  // ParallelDims::validate_model rejects it
      SCOPED_TRACE("sp " + std::to_string(P) + ", case " + c.name);
      RankGroup group(P);
      const int r = group.communicator->rank();
      const SequenceShard shard{SequenceShardKind::kContiguous, P, r};
      const FullAttention f = full_attention(*ops, c, shard.chunk_count());
      const std::vector<int64_t> index = local_to_global(c.B, f.rows.seq_len, shard);
      const ShardedAttention run(*ops, f, c, index);
      UlyssesAttention ulysses(*group.communicator);
      run.forward(*ops, ulysses);
      run.backward(*ops, ulysses);
      worst = std::max(worst, run.expect_matches(*ops, f, c, index, ulysses_lse_layout(f, c, P, r), kBound));
      // Buffers are reused and dq/dk/dv overwritten: a second backward gives the same gradients.
      const std::vector<float> dk1 = download(*ops, run.dk);
      run.backward(*ops, ulysses);
      EXPECT_EQ(download(*ops, run.dk), dk1);
      EXPECT_EQ(ulysses.stats().forward_calls, 1);
      EXPECT_EQ(ulysses.stats().backward_calls, 2);
    }
  report_worst_error("Ulysses vs local (o, lse, dq, dk, dv)", worst);
}

// The reference lse as the hybrid holds it: the sp rank's heads [head0, head0 + NHl) over its cp
// shard's tokens `cp_index`, in the ring's (B, 2, NHl, Tc) layout.
std::vector<float> hybrid_lse_layout(const FullAttention& f, const AttentionCase& c, const std::vector<int64_t>& cp_index,
                                     int64_t NHl, int64_t head0) {
  const int64_t T = f.rows.seq_len, Tl = static_cast<int64_t>(cp_index.size()) / c.B, Tc = Tl / 2;
  std::vector<float> out(static_cast<size_t>(c.B * NHl * Tl));
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t ch = 0; ch < 2; ++ch)
      for (int64_t j = 0; j < NHl; ++j)
        for (int64_t i = 0; i < Tc; ++i) {
          const int64_t t = cp_index[static_cast<size_t>(b * Tl + ch * Tc + i)] - b * T;
          out[static_cast<size_t>(((b * 2 + ch) * NHl + j) * Tc + i)] =
              f.lse[static_cast<size_t>((b * c.NH + head0 + j) * T + t)];
        }
  return out;
}

// cp x sp hybrid (Ulysses inside, ring across): each rank holds an sp part of its zigzag cp shard; the
// all-to-all reassembles the cp shard for NH/sp heads and ring attention runs over the cp group.
// Ranks g of a group of cp * sp: cp rank g / sp, sp rank g % sp (the mesh's order: sp inner).
TEST(UlyssesAttention, OverRingAttentionMatchesLocalAttention) {
  if (world_size() % 4 != 0) GTEST_SKIP() << "needs cp 2 x sp 2 ranks";
  auto ops = make_cpu_ops();
  double worst = 0;
  for (const auto [cp, sp] : {std::pair{2, 2}, std::pair{2, 4}, std::pair{4, 2}}) {
    if (world_size() % (cp * sp) != 0) continue;
    for (const AttentionCase& c : cases()) {
      if (c.NH % sp != 0 || (c.KVH % sp != 0 && sp % c.KVH != 0)) continue;
      SCOPED_TRACE("cp " + std::to_string(cp) + " x sp " + std::to_string(sp) + ", case " + c.name);
      RankGroup group(cp * sp);
      const int g = group.communicator->rank(), cp_rank = g / sp, sp_rank = g % sp;
      const MpiComm sp_mpi = MpiComm::split(group.comm.get(), cp_rank, sp_rank);
      const MpiComm cp_mpi = MpiComm::split(group.comm.get(), sp_rank, cp_rank);
      MpiCommunicator sp_comm(sp_mpi.get()), cp_comm(cp_mpi.get());
      const SequenceShard shard{SequenceShardKind::kZigzag, cp, cp_rank, sp, sp_rank};
      const FullAttention f = full_attention(*ops, c, shard.chunk_count());
      const std::vector<int64_t> index = local_to_global(c.B, f.rows.seq_len, shard);
      const std::vector<int64_t> cp_index =
          local_to_global(c.B, f.rows.seq_len, SequenceShard{SequenceShardKind::kZigzag, cp, cp_rank});
      const ShardedAttention run(*ops, f, c, index);
      UlyssesAttention hybrid(sp_comm, std::make_unique<RingAttention>(cp_comm));
      run.forward(*ops, hybrid);
      run.backward(*ops, hybrid);
      const int64_t NHl = c.NH / sp;
      worst = std::max(worst, run.expect_matches(*ops, f, c, index, hybrid_lse_layout(f, c, cp_index, NHl, sp_rank * NHl),
                                                 kBound));
      // Buffers are reused and dq/dk/dv overwritten through the ring as well.
      const std::vector<float> dq1 = download(*ops, run.dq), dk1 = download(*ops, run.dk);
      run.backward(*ops, hybrid);
      EXPECT_EQ(download(*ops, run.dq), dq1);
      EXPECT_EQ(download(*ops, run.dk), dk1);
    }
  }
  report_worst_error("Ulysses over ring vs local (o, lse, dq, dk, dv)", worst);
}

}  // namespace
}  // namespace trlhpc
