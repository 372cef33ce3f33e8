#include "trlhpc/train/flops.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "trlhpc/ops/ops.hpp"

namespace trlhpc {

double training_flops_per_token(const ModelConfig& c, int64_t seq_len) {
  const double embedding = static_cast<double>(c.vocab_size * c.hidden_size);
  double n = static_cast<double>(c.parameter_count()) - embedding;
  if (c.tie_word_embeddings) n += embedding;  // the head still multiplies by the (shared) matrix
  return 6.0 * n + 12.0 * static_cast<double>(c.num_hidden_layers * c.num_attention_heads * c.head_dim * seq_len);
}

double measure_gemm_flops(Ops& ops) {
  // Best of several single calls: the least disturbed run is the closest to the hardware's rate. 2048
  // rather than 1024: the model's GEMMs (K of 512..8192, thousands of rows) run at the large-matrix
  // rate, which 1024^3 underestimates by 5-10 % (MFU above 100 % was printed with it).
  const int64_t n = 2048;
  const std::vector<float> half(static_cast<size_t>(n * n), 0.5f);
  const Tensor a = ops.allocate({n, n}), b = ops.allocate({n, n}), c = ops.allocate({n, n});
  ops.copy_from_host(a, half.data(), half.size() * sizeof(float));
  ops.copy_from_host(b, half.data(), half.size() * sizeof(float));
  double best = 0;
  for (int r = 0; r < 4; ++r) {
    const auto start = std::chrono::steady_clock::now();
    ops.matmul(a, false, b, false, c);
    float done = 0;  // a copy back waits for the product on an asynchronous backend
    ops.copy_to_host(&done, c, sizeof done);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 2.0 * static_cast<double>(n * n * n) / seconds);
  }
  return best;
}

}  // namespace trlhpc
