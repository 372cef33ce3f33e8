// train/flops.hpp: the attended (query, key) pairs of a batch against a brute-force count of the
// attention mask itself (same document, key position not after the query, no padding), on worked
// examples and random packed batches; and the FLOPs formula's parts.
#include <gtest/gtest.h>

#include "test_support.hpp"
#include "trlhpc/train/flops.hpp"

namespace trlhpc {
namespace {

// What the attention primitive allows, pair by pair.
int64_t brute_force_pairs(const Batch& b) {
  int64_t pairs = 0;
  for (int64_t r = 0; r < b.rows; ++r)
    for (int64_t q = 0; q < b.seq_len; ++q)
      for (int64_t k = 0; k < b.seq_len; ++k) {
        const size_t iq = static_cast<size_t>(r * b.seq_len + q), ik = static_cast<size_t>(r * b.seq_len + k);
        pairs += b.doc_ids[iq] != kPaddingDocId && b.doc_ids[iq] == b.doc_ids[ik] && b.positions[ik] <= b.positions[iq];
      }
  return pairs;
}

TEST(Flops, AttendedPairsWorkedExamples) {
  // One causal document of 4 tokens: 1 + 2 + 3 + 4.
  Batch one{1, 4, {1, 1, 1, 1}, {0, 0, 0, 0}, {0, 1, 2, 3}, {0, 0, 0, 0}};
  EXPECT_EQ(attended_pairs(one), 10);
  // Documents of 3 and 2 tokens and one padding token: 6 + 3.
  Batch packed{1, 6, {1, 1, 1, 1, 1, 0}, {0, 0, 0, 0, 0, 0}, {0, 1, 2, 0, 1, 0}, {0, 0, 0, 1, 1, kPaddingDocId}};
  EXPECT_EQ(attended_pairs(packed), 9);
  EXPECT_EQ(attended_pairs(padding_batch(7)), 0);
}

TEST(Flops, AttendedPairsEqualTheMaskCount) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const Batch b = testing::random_packed_batch(3, 5 + static_cast<int64_t>(seed) * 3, seed);
    EXPECT_EQ(attended_pairs(b), brute_force_pairs(b)) << "seed " << seed;
  }
}

TEST(Flops, TrainingFlopsParts) {
  ModelConfig c;
  c.architecture = ModelArchitecture::Llama;
  c.hidden_size = 32, c.intermediate_size = 64, c.num_hidden_layers = 2, c.num_attention_heads = 4;
  c.num_key_value_heads = 2, c.head_dim = 8, c.vocab_size = 100, c.tie_word_embeddings = false;
  const double per_pair = 12.0 * 2 * 4 * 8;
  const double per_token = training_flops(c, 1, 0) / 6.0;  // N: every parameter but the input embedding
  EXPECT_DOUBLE_EQ(per_token, static_cast<double>(c.parameter_count() - c.vocab_size * c.hidden_size));
  EXPECT_DOUBLE_EQ(training_flops(c, 10, 55) - training_flops(c, 10, 0), 55 * per_pair);
  // One causal document of T tokens: (T + 1) / 2 pairs per token, half of PaLM's 12 L H Q T for large T.
  EXPECT_DOUBLE_EQ(training_flops_per_token(c, 9), 6.0 * per_token + per_pair * 5.0);
}

}  // namespace
}  // namespace trlhpc
