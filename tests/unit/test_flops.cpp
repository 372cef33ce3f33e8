// train/flops.hpp: the PaLM training-FLOPs count per token (issue 3: 6 N + 12 L H Q T), with N counted
// here from the parameter shapes by hand (the input embedding excluded, an untied LM head included,
// a tied one counted once through the shared matrix).
#include <gtest/gtest.h>

#include "trlhpc/train/flops.hpp"

namespace trlhpc {
namespace {

ModelConfig small(bool tied) {
  ModelConfig c;
  c.architecture = ModelArchitecture::Llama;
  c.hidden_size = 32, c.intermediate_size = 64, c.num_hidden_layers = 2, c.num_attention_heads = 4;
  c.num_key_value_heads = 2, c.head_dim = 8, c.vocab_size = 100, c.tie_word_embeddings = tied;
  return c;
}

TEST(Flops, PalmCountPerToken) {
  for (bool tied : {false, true}) {
    const ModelConfig c = small(tied);
    // Per layer: q (32x32), k and v (16x32 each), o (32x32), gate/up/down (64x32 each), two norms (32).
    const double layer = 32 * 32 + 2 * 16 * 32 + 32 * 32 + 3 * 64 * 32 + 2 * 32;
    const double n = 2 * layer + 32 /* final norm */ + 100 * 32 /* LM head, tied or not */;
    const double attention = 12.0 * 2 * 4 * 8;  // 12 L H Q, per attended position
    for (int64_t T : {1, 7, 512})
      EXPECT_DOUBLE_EQ(training_flops_per_token(c, T), 6.0 * n + attention * static_cast<double>(T))
          << (tied ? "tied" : "untied") << " T " << T;
  }
}

// Qwen3: head_dim 16 with hidden 32 over 4 heads, so q/k/v/o are wider than the residual stream and the
// attention term counts H * head_dim (64), not hidden (32); the q/k norm weights (16 each) are parameters.
TEST(Flops, Qwen3CountsHeadDimAndQkNorms) {
  ModelConfig c = small(true);
  c.architecture = ModelArchitecture::Qwen3;
  c.head_dim = 16;
  c.qk_norm = true;
  // Per layer: q (64x32), k and v (32x32 each), o (32x64), gate/up/down (64x32 each), two norms (32),
  // q_norm and k_norm (16 each).
  const double layer = 64 * 32 + 2 * 32 * 32 + 32 * 64 + 3 * 64 * 32 + 2 * 32 + 2 * 16;
  const double n = 2 * layer + 32 + 100 * 32;
  const double attention = 12.0 * 2 * 4 * 16;
  EXPECT_DOUBLE_EQ(training_flops_per_token(c, 64), 6.0 * n + attention * 64.0);
}

// Sliding-window layers (Mistral, Gemma 3's local layers) attend over min(window, T) positions: layer 0
// sliding with window 16, layer 1 full. The parameters are those of PalmCountPerToken's untied model.
TEST(Flops, SlidingLayersCountTheirWindow) {
  ModelConfig c = small(false);
  c.sliding_window = 16;
  c.sliding_layers = {true, false};
  const double layer = 32 * 32 + 2 * 16 * 32 + 32 * 32 + 3 * 64 * 32 + 2 * 32;
  const double n = 2 * layer + 32 + 100 * 32;
  const double per_position = 12.0 * 4 * 8;  // 12 H Q, per layer and attended position
  EXPECT_DOUBLE_EQ(training_flops_per_token(c, 512), 6.0 * n + per_position * (16 + 512));
  EXPECT_DOUBLE_EQ(training_flops_per_token(c, 7), 6.0 * n + per_position * (7 + 7));  // T below the window
}

}  // namespace
}  // namespace trlhpc
