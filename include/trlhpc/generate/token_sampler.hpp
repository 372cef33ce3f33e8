#pragma once
// TokenSampler: the next token from a row of logits, with the decoding rules of Hugging Face's
// `generate` (transformers' GenerationConfig and logits processors):
//   greedy (do_sample = false): argmax, the lowest id among equal maxima (torch.argmax);
//   sampling: logits / temperature, then top-k (keep the k largest; ties with the k-th kept), then
//   top-p (keep the smallest set of most probable tokens whose probability reaches top_p, at least
//   one), then a draw from the softmax of what is left. That is transformers' processor order
//   (TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper). The generator is trlhpc's own
//   (std::mt19937_64 from `seed`), so a seed repeats trlhpc's draws, not PyTorch's.
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace trlhpc {

struct SamplingOptions {
  bool do_sample = false;    // false: greedy; the other fields are then unused
  double temperature = 1.0;  // > 0
  int64_t top_k = 50;        // 0: off (transformers' default 50)
  double top_p = 1.0;        // in (0, 1]; 1: off
  uint64_t seed = 42;
};

// The logits after temperature, top-k and top-p: removed tokens are -infinity (tests compare this).
std::vector<float> filtered_logits(std::span<const float> logits, const SamplingOptions& options);
// The first index of the largest logit.
int32_t argmax_token(std::span<const float> logits);

class TokenSampler {
 public:
  explicit TokenSampler(const SamplingOptions& options);  // UserError for an option out of range
  int32_t next(std::span<const float> logits);

 private:
  SamplingOptions options_;
  std::mt19937_64 rng_;
};

}  // namespace trlhpc
