#include "trlhpc/train/flops.hpp"

#include <algorithm>

namespace trlhpc {

double training_flops_per_token(const ModelConfig& c, int64_t seq_len) {
  const double embedding = static_cast<double>(c.vocab_size * c.hidden_size);
  double n = static_cast<double>(c.parameter_count()) - embedding;
  if (c.tie_word_embeddings) n += embedding;  // the head still multiplies by the (shared) matrix
  // Each layer attends over T positions, a sliding layer over at most its window.
  double attended = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const int64_t window = c.attention_window(l);
    attended += static_cast<double>(window > 0 ? std::min(window, seq_len) : seq_len);
  }
  return 6.0 * n + 12.0 * static_cast<double>(c.num_attention_heads * c.head_dim) * attended;
}

}  // namespace trlhpc
