#include "trlhpc/train/flops.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "trlhpc/kernels/cpu.hpp"

namespace trlhpc {

double training_flops(const ModelConfig& c, int64_t tokens, int64_t attended_pairs) {
  const double embedding = static_cast<double>(c.vocab_size * c.hidden_size);
  double n = static_cast<double>(c.parameter_count()) - embedding;
  if (c.tie_word_embeddings) n += embedding;  // the head still multiplies by the (shared) matrix
  return 6.0 * n * static_cast<double>(tokens) +
         12.0 * static_cast<double>(c.num_hidden_layers * c.num_attention_heads * c.head_dim) *
             static_cast<double>(attended_pairs);
}

double training_flops_per_token(const ModelConfig& c, int64_t seq_len) {
  return training_flops(c, seq_len, seq_len * (seq_len + 1) / 2) / static_cast<double>(seq_len);
}

int64_t attended_pairs(const Batch& batch) {
  int64_t pairs = 0;
  for (int64_t r = 0; r < batch.rows; ++r) {
    int64_t run = 0;  // index + 1 of the token in its document's run
    for (int64_t t = 0; t < batch.seq_len; ++t) {
      const size_t i = static_cast<size_t>(r * batch.seq_len + t);
      const int32_t doc = batch.doc_ids[i];
      if (doc == kPaddingDocId) {
        run = 0;
        continue;
      }
      run = t > 0 && batch.doc_ids[i - 1] == doc ? run + 1 : 1;
      pairs += run;
    }
  }
  return pairs;
}

double measure_cpu_gemm_flops() {
  // Best of several single calls: the least disturbed run is the closest to the hardware's rate. 2048
  // rather than 1024: the model's GEMMs (K of 512..8192, thousands of rows) run at the large-matrix
  // rate, which 1024^3 underestimates by 5-10 % (MFU above 100 % was printed with it).
  const int64_t n = 2048;
  std::vector<float> a(static_cast<size_t>(n * n), 0.5f), b(a), c(a);
  double best = 0;
  for (int r = 0; r < 4; ++r) {
    const auto start = std::chrono::steady_clock::now();
    cpu::matmul(a.data(), false, b.data(), false, c.data(), n, n, n, 1.0f, 0.0f);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 2.0 * static_cast<double>(n * n * n) / seconds);
  }
  return best;
}

}  // namespace trlhpc
