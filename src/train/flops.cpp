#include "trlhpc/train/flops.hpp"

#include <algorithm>
#include <vector>

namespace trlhpc {

double non_embedding_parameters(const ModelConfig& c) {
  const double embedding = static_cast<double>(c.vocab_size * c.hidden_size);
  double n = static_cast<double>(c.parameter_count()) - embedding;
  if (c.tie_word_embeddings) n += embedding;  // the head still multiplies by the (shared) matrix
  return n;
}

int64_t causal_pairs(int64_t length, int64_t window) {
  if (window <= 0 || window >= length) return length * (length + 1) / 2;
  return window * (window + 1) / 2 + (length - window) * window;
}

int64_t attended_pairs(const ModelConfig& c, const Batch& batch) {
  // Per token: full layers x (p + 1), plus min(p + 1, W) per sliding layer.
  int64_t full_layers = 0;
  std::vector<int64_t> windows;  // of the sliding layers
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    if (c.attention_window(l) > 0)
      windows.push_back(c.attention_window(l));
    else
      ++full_layers;
  }
  int64_t pairs = 0;
  for (size_t i = 0; i < batch.doc_ids.size(); ++i) {
    if (batch.doc_ids[i] == kPaddingDocId) continue;
    const int64_t keys = static_cast<int64_t>(batch.positions[i]) + 1;
    pairs += full_layers * keys;
    for (int64_t w : windows) pairs += std::min(keys, w);
  }
  return pairs;
}

double training_flops(const ModelConfig& c, int64_t tokens, int64_t pairs) {
  return 6.0 * non_embedding_parameters(c) * static_cast<double>(tokens) +
         12.0 * static_cast<double>(c.num_attention_heads * c.head_dim) * static_cast<double>(pairs);
}

double training_flops_per_token(const ModelConfig& c, int64_t seq_len) {
  if (seq_len <= 0) return 6.0 * non_embedding_parameters(c);
  int64_t pairs = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) pairs += causal_pairs(seq_len, c.attention_window(l));
  return training_flops(c, seq_len, pairs) / static_cast<double>(seq_len);
}

}  // namespace trlhpc
