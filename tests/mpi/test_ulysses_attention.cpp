// Ulysses sequence parallel attention (sp) at layer level: o, lse, dq, dk, dv of UlyssesAttention on
// contiguous shards equal LocalAttention on the whole padded sequence, for sp = 1, 2, 4 (each size that
// divides the world, see sequence_attention_support.hpp), causal and packed with padding, and GQA with
// KVH >= sp (kv heads split) and KVH < sp (kv heads repeated sp/KVH times, their gradients summed).
// Bound: max|err| / max|ref| <= 1e-5 per tensor (fp32 summation order only: the primitive sees the
// same rows with fewer heads; repeated kv heads add their dk/dv copies). Measured: "[ measured ]".
#include <gtest/gtest.h>

#include "sequence_attention_support.hpp"
#include "trlhpc/ops/ops.hpp"
#include "trlhpc/parallel/ulysses_attention.hpp"

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

}  // namespace
}  // namespace trlhpc
