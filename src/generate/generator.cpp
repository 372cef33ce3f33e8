#include "trlhpc/generate/generator.hpp"

#include <algorithm>

#include "trlhpc/core/error.hpp"
#include "trlhpc/model/decoder.hpp"
#include "trlhpc/parallel/communicator.hpp"

namespace trlhpc {

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
