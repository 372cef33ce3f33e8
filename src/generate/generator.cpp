#include "trlhpc/generate/generator.hpp"

#include <algorithm>
#include <cmath>

#include "trlhpc/core/error.hpp"
#include "trlhpc/model/decoder.hpp"
#include "trlhpc/comm/communicator.hpp"

namespace trlhpc {

std::string check_generation_length(const ModelConfig& config, int64_t prompt_tokens, int64_t max_new_tokens) {
  const int64_t context = config.max_position_embeddings;
  if (max_new_tokens < 1) throw UserError("--max_new_tokens " + std::to_string(max_new_tokens) + ": must be >= 1");
  if (max_new_tokens > context)
    throw UserError("--max_new_tokens " + std::to_string(max_new_tokens) + ": more than the model's context " +
                    "(max_position_embeddings " + std::to_string(context) + " in config.json): pass at most " +
                    std::to_string(context));
  if (prompt_tokens + max_new_tokens <= context) return "";
  return "the prompt (" + std::to_string(prompt_tokens) + " tokens) + --max_new_tokens " + std::to_string(max_new_tokens) +
         " exceed the model's maximum length (max_position_embeddings " + std::to_string(context) +
         "): positions past it were never trained, so the continuation may be degenerate";
}

namespace {

// log softmax(logits)[token], summed in double from the largest logit down (stable for any range).
double log_probability(const std::vector<float>& logits, int32_t token) {
  const float top = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float z : logits) sum += std::exp(static_cast<double>(z) - top);
  return static_cast<double>(logits.at(static_cast<size_t>(token))) - top - std::log(sum);
}

}  // namespace

GenerationResult generate(Decoder& decoder, std::span<const int32_t> prompt, const GenerationOptions& options,
                          Communicator* agree, const std::function<void(int32_t)>& on_token) {
  if (prompt.empty()) throw UserError("the prompt is empty: nothing to continue (give a prompt or messages)");
  if (options.max_new_tokens < 1)
    throw UserError("--max_new_tokens " + std::to_string(options.max_new_tokens) + ": must be >= 1");
  TokenSampler sampler(options.sampling);
  const int64_t capacity = static_cast<int64_t>(prompt.size()) + options.max_new_tokens;
  KvCache cache = decoder.make_kv_cache(capacity);
  GenerationResult result;
  std::vector<float> logits = decoder.forward_incremental(cache, prompt);
  for (int64_t i = 0; i < options.max_new_tokens; ++i) {
    int32_t token = sampler.next(logits);
    if (agree) agree->broadcast(std::span<int32_t>(&token, 1), 0);
    result.tokens.push_back(token);
    result.logprobs.push_back(log_probability(logits, token));
    if (on_token) on_token(token);
    if (std::find(options.eos_token_ids.begin(), options.eos_token_ids.end(), token) != options.eos_token_ids.end()) {
      result.stopped_at_eos = true;
      break;
    }
    if (i + 1 < options.max_new_tokens) logits = decoder.forward_incremental(cache, std::span<const int32_t>(&token, 1));
  }
  return result;
}

}  // namespace trlhpc
