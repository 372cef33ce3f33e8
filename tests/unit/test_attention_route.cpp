// The CUDA attention dispatcher's host logic (include/trlhpc/kernels/attention_route.hpp): the
// --cuda_attention values, which calls may go to cuDNN, and which packed-row masks cuDNN's
// ragged causal SDPA expresses exactly. No GPU needed.
#include <gtest/gtest.h>

#include <vector>

#include "trlhpc/kernels/attention_route.hpp"

using namespace trlhpc::kernels;

namespace {

AttentionCallFacts eligible() {
  AttentionCallFacts f;
  f.bf16_inputs = f.same_mask_ids = f.cudnn_built = f.cudnn_usable = true;
  f.head_size = 64;
  return f;
}

}  // namespace

TEST(AttentionRoute, ParsesPreference) {
  EXPECT_EQ(parse_attention_preference(""), AttentionPreference::Auto);
  EXPECT_EQ(parse_attention_preference("auto"), AttentionPreference::Auto);
  EXPECT_EQ(parse_attention_preference("cudnn"), AttentionPreference::Cudnn);
  EXPECT_EQ(parse_attention_preference("kernel"), AttentionPreference::Kernel);
  EXPECT_THROW(parse_attention_preference("CUDNN"), std::invalid_argument);
  EXPECT_THROW(parse_attention_preference("flash"), std::invalid_argument);
}

TEST(AttentionRoute, AutoIsTheKernelUntilMeasured) {
  EXPECT_FALSE(kCudnnAttentionMeasuredFaster);  // flip together with RESULTS from a GPU run
  EXPECT_FALSE(choose_attention(AttentionPreference::Auto, eligible()).cudnn);
  EXPECT_TRUE(choose_attention(AttentionPreference::Auto, eligible(), /*measured_faster=*/true).cudnn);
  EXPECT_TRUE(choose_attention(AttentionPreference::Cudnn, eligible()).cudnn);
  EXPECT_FALSE(choose_attention(AttentionPreference::Kernel, eligible(), true).cudnn);
}

TEST(AttentionRoute, IneligibleCallsFallBack) {
  auto with = [](auto change) {
    AttentionCallFacts f = eligible();
    change(f);
    const AttentionRoute r = choose_attention(AttentionPreference::Cudnn, f);
    EXPECT_EQ(r.reason.empty(), r.cudnn);  // a reason exactly when falling back
    return r.cudnn;
  };
  EXPECT_FALSE(with([](AttentionCallFacts& f) { f.cudnn_built = false; }));
  EXPECT_FALSE(with([](AttentionCallFacts& f) { f.cudnn_usable = false; }));
  EXPECT_FALSE(with([](AttentionCallFacts& f) { f.bf16_inputs = false; }));
  EXPECT_FALSE(with([](AttentionCallFacts& f) { f.same_mask_ids = false; }));
  EXPECT_FALSE(with([](AttentionCallFacts& f) { f.head_size = 60; }));
  EXPECT_FALSE(with([](AttentionCallFacts& f) { f.head_size = 264; }));
  EXPECT_FALSE(with([](AttentionCallFacts& f) { f.softcap = true; }));
  EXPECT_TRUE(with([](AttentionCallFacts& f) { f.window = 128; }));
  EXPECT_TRUE(with([](AttentionCallFacts& f) { f.head_size = 256; }));
}

TEST(AttentionRoute, PackedRowsBecomeSequences) {
  // Row 0: documents 7 (3 tokens) and 9 (2 tokens); row 1: one document of 5 tokens, positions from 4.
  const std::vector<int32_t> pos = {0, 1, 2, 0, 1, 4, 5, 6, 7, 8};
  const std::vector<int32_t> doc = {7, 7, 7, 9, 9, 7, 7, 7, 7, 7};
  const auto seq = packed_sequences(pos.data(), doc.data(), 2, 5);
  ASSERT_TRUE(seq.has_value());
  EXPECT_EQ(seq->token_start, (std::vector<int64_t>{0, 3, 5}));
  EXPECT_EQ(seq->length, (std::vector<int32_t>{3, 2, 5}));
  EXPECT_EQ(seq->max_length, 5);
}

TEST(AttentionRoute, MasksCudnnCannotExpressAreRejected) {
  // Positions that skip inside a document: pos_q - pos_k != i - j.
  const std::vector<int32_t> skip_pos = {0, 1, 3, 4}, one_doc = {1, 1, 1, 1};
  EXPECT_FALSE(packed_sequences(skip_pos.data(), one_doc.data(), 1, 4).has_value());
  // Document 1 interrupted by document 2 and resumed: its two runs see each other under trlhpc's mask.
  const std::vector<int32_t> pos = {0, 1, 0, 2}, split = {1, 1, 2, 1};
  EXPECT_FALSE(packed_sequences(pos.data(), split.data(), 1, 4).has_value());
  // Positions restarting inside one document id (two sequences under one id).
  const std::vector<int32_t> restart = {0, 1, 0, 1};
  EXPECT_FALSE(packed_sequences(restart.data(), one_doc.data(), 1, 4).has_value());
}

TEST(AttentionRoute, GraphDimensionsAreBucketed) {
  EXPECT_EQ(cudnn_graph_sequences(0), 1);
  EXPECT_EQ(cudnn_graph_sequences(3), 4);
  EXPECT_EQ(cudnn_graph_sequences(64), 64);
  EXPECT_EQ(cudnn_graph_max_length(300, 4096), 512);
  EXPECT_EQ(cudnn_graph_max_length(3000, 3072), 3072);  // capped at the row length
}
