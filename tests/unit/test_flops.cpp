// train/flops.hpp: training FLOPs as PaLM/Megatron count them with the causal attention term (issues 43
// and 44). Every expected value is hand arithmetic written out in numbers, not the code's own formula.
#include <gtest/gtest.h>

#include "trlhpc/train/flops.hpp"

namespace trlhpc {
namespace {

// hidden 64, 2 layers, 4 heads of 16 (2 kv heads), ffn 128, vocab 256, untied Llama.
ModelConfig hand_counted() {
  ModelConfig c;
  c.architecture = ModelArchitecture::Llama;
  c.hidden_size = 64, c.intermediate_size = 128, c.num_hidden_layers = 2, c.num_attention_heads = 4;
  c.num_key_value_heads = 2, c.head_dim = 16, c.vocab_size = 256, c.tie_word_embeddings = false;
  return c;
}

// Per layer: q 64x64 = 4096, k and v 32x64 = 2048 each, o 64x64 = 4096, gate/up/down 128x64 = 8192 each
// (24576), two norms 64 each (128): 36992. Two layers 73984, final norm 64: 74048, LM head 256x64 =
// 16384: N = 90432 (the input embedding's 16384 left out). 6 N = 542592 FLOP per token.
constexpr double kSixN = 542592;
// 12 H Q = 12 x 4 x 16 = 768 FLOP per (query, key) pair and layer.
constexpr double kPerPair = 768;

TEST(Flops, HandCountOfOneCausalRow) {
  const ModelConfig c = hand_counted();
  EXPECT_DOUBLE_EQ(non_embedding_parameters(c), 90432);
  // T = 8, one document: 1 + 2 + ... + 8 = 36 pairs per layer, 72 over 2 layers: 768 x 72 = 55296 FLOP;
  // 8 tokens x 542592 = 4340736; the row 4396032 FLOP, 549504 per token (= 6 N + 6 L H Q (T + 1) =
  // 542592 + 6 x 2 x 4 x 16 x 9 = 542592 + 6912).
  EXPECT_EQ(causal_pairs(8, 0), 36);
  EXPECT_DOUBLE_EQ(training_flops(c, 8, 72), 4396032);
  EXPECT_DOUBLE_EQ(training_flops_per_token(c, 8), 549504);
  EXPECT_DOUBLE_EQ(training_flops_per_token(c, 1), kSixN + kPerPair * 2);  // one token attends itself
}

TEST(Flops, TiedHeadStillCounts) {
  ModelConfig c = hand_counted();
  c.tie_word_embeddings = true;  // parameter_count holds the shared matrix once; the head's matmul is done
  EXPECT_DOUBLE_EQ(non_embedding_parameters(c), 90432);
}

// A row of T = 10: document A of 5 tokens, document B of 3, 2 padding tokens.
Batch packed_row() {
  Batch b;
  b.rows = 1, b.seq_len = 10;
  b.positions = {0, 1, 2, 3, 4, 0, 1, 2, 0, 0};
  b.doc_ids = {0, 0, 0, 0, 0, 1, 1, 1, kPaddingDocId, kPaddingDocId};
  b.input_ids.assign(10, 1);
  b.targets.assign(10, kIgnoreIndex);
  return b;
}

TEST(Flops, PackedRowCountsEachDocumentsOwnPairs) {
  const ModelConfig c = hand_counted();
  // A: 1+2+3+4+5 = 15 pairs, B: 1+2+3 = 6; 21 per layer, 42 over 2 layers; padding attends nothing.
  // FLOPs: 8 tokens x 542592 = 4340736, plus 768 x 42 = 32256: 4372992 (one 8-token document: 4396032).
  EXPECT_EQ(attended_pairs(c, packed_row()), 42);
  EXPECT_DOUBLE_EQ(training_flops(c, 8, 42), 4372992);
  // Cut in two shards (cp 2: each rank holds half the row's tokens, positions travel with them): tokens
  // 0-4 = A's positions 0-4 (1+2+3+4+5 = 15 per layer), tokens 5-9 = B's 0-2 and padding (1+2+3 = 6):
  // 30 + 12, the same 42 once summed over the ranks.
  Batch first = packed_row(), second = packed_row();
  first.seq_len = second.seq_len = 5;
  first.positions = {0, 1, 2, 3, 4}, first.doc_ids = {0, 0, 0, 0, 0};
  second.positions = {0, 1, 2, 0, 0}, second.doc_ids = {1, 1, 1, kPaddingDocId, kPaddingDocId};
  EXPECT_EQ(attended_pairs(c, first), 30);
  EXPECT_EQ(attended_pairs(c, second), 12);
}

// Layer 0 sliding with window 3, layer 1 full.
TEST(Flops, SlidingLayerCountsItsWindow) {
  ModelConfig c = hand_counted();
  c.sliding_window = 3;
  c.sliding_layers = {true, false};
  // T = 8: the sliding layer min(t+1, 3) = 1+2+3+3+3+3+3+3 = 21 pairs (3x4/2 + 5x3), the full one 36: 57.
  // 768 x 57 = 43776; with 4340736 for 6 N: 4384512 per row, 548064 per token.
  EXPECT_EQ(causal_pairs(8, 3), 21);
  EXPECT_DOUBLE_EQ(training_flops_per_token(c, 8), 548064);
  // T = 2 inside the window: 1+2 = 3 pairs in each layer, 6: (2 x 542592 + 768 x 6) / 2 = 544896.
  EXPECT_DOUBLE_EQ(training_flops_per_token(c, 2), 544896);
  // The packed row: A (5) in the sliding layer 1+2+3+3+3 = 12, B (3) 1+2+3 = 6; full layer 21: 39.
  EXPECT_EQ(attended_pairs(c, packed_row()), 39);
}

// Qwen3: head_dim 32 with hidden 64 over 4 heads, so the attention term counts H x head_dim = 128, not
// hidden, and q/k norm weights are parameters.
TEST(Flops, Qwen3CountsHeadDimAndQkNorms) {
  ModelConfig c = hand_counted();
  c.architecture = ModelArchitecture::Qwen3;
  c.head_dim = 32;
  c.qk_norm = true;
  // Per layer: q 128x64 = 8192, k and v 64x64 = 4096 each, o 64x128 = 8192, mlp 24576, norms 128,
  // q_norm and k_norm 32 each (64): 49344. 2 layers 98688 + 64 + head 16384 = 115136; 6 N = 690816.
  // 12 H Q = 12 x 4 x 32 = 1536; T = 8: 72 pairs: 110592 per row, 13824 per token: 704640.
  EXPECT_DOUBLE_EQ(non_embedding_parameters(c), 115136);
  EXPECT_DOUBLE_EQ(training_flops_per_token(c, 8), 704640);
}

}  // namespace
}  // namespace trlhpc
