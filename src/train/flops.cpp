#include "trlhpc/train/flops.hpp"

namespace trlhpc {

double training_flops_per_token(const ModelConfig& c, int64_t seq_len) {
  const double embedding = static_cast<double>(c.vocab_size * c.hidden_size);
  double n = static_cast<double>(c.parameter_count()) - embedding;
  if (c.tie_word_embeddings) n += embedding;  // the head still multiplies by the (shared) matrix
  return 6.0 * n + 12.0 * static_cast<double>(c.num_hidden_layers * c.num_attention_heads * c.head_dim * seq_len);
}

}  // namespace trlhpc
