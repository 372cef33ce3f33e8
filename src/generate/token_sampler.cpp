#include "trlhpc/generate/token_sampler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "trlhpc/core/error.hpp"

namespace trlhpc {

namespace {
constexpr float kRemoved = -std::numeric_limits<float>::infinity();

// Softmax in double of the (already filtered) logits.
std::vector<double> probabilities(const std::vector<float>& logits) {
  const float top = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp(static_cast<double>(logits[i]) - top);
  for (double& v : p) v /= sum;
  return p;
}
}  // namespace

int32_t argmax_token(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::vector<float> filtered_logits(std::span<const float> logits, const SamplingOptions& o) {
  std::vector<float> out(logits.begin(), logits.end());
  const float temperature = static_cast<float>(o.temperature);
  for (float& v : out) v /= temperature;
  const int64_t V = static_cast<int64_t>(out.size());
  if (o.top_k > 0 && o.top_k < V) {
    std::vector<float> sorted = out;
    std::nth_element(sorted.begin(), sorted.begin() + (o.top_k - 1), sorted.end(), std::greater<float>());
    const float kth = sorted[static_cast<size_t>(o.top_k - 1)];
    for (float& v : out)
      if (v < kth) v = kRemoved;
  }
  if (o.top_p < 1.0) {
    // transformers: sort ascending, drop the tokens whose cumulative probability is <= 1 - top_p,
    // never the most probable one.
    std::vector<int64_t> order(static_cast<size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return out[a] < out[b]; });
    const std::vector<double> p = probabilities(out);
    double cumulative = 0;
    for (int64_t r = 0; r + 1 < V; ++r) {
      cumulative += p[static_cast<size_t>(order[static_cast<size_t>(r)])];
      if (cumulative > 1.0 - o.top_p) break;
      out[static_cast<size_t>(order[static_cast<size_t>(r)])] = kRemoved;
    }
  }
  return out;
}

TokenSampler::TokenSampler(const SamplingOptions& options) : options_(options), rng_(options.seed) {
  if (!options.do_sample) return;
  if (!(options.temperature > 0) || !std::isfinite(options.temperature))
    throw UserError("--temperature " + std::to_string(options.temperature) + ": must be > 0 (greedy: leave out --do_sample)");
  if (options.top_k < 0) throw UserError("--top_k " + std::to_string(options.top_k) + ": must be >= 0 (0: off)");
  if (!(options.top_p > 0 && options.top_p <= 1))
    throw UserError("--top_p " + std::to_string(options.top_p) + ": must be in (0, 1]");
}

int32_t TokenSampler::next(std::span<const float> logits) {
  if (!options_.do_sample) return argmax_token(logits);
  const std::vector<double> p = probabilities(filtered_logits(logits, options_));
  std::discrete_distribution<int32_t> draw(p.begin(), p.end());
  return draw(rng_);
}

}  // namespace trlhpc
