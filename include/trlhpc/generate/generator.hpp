#pragma once
// generate(): autoregressive decoding of one sequence with a KV cache, as Hugging Face's
// `model.generate(input_ids, max_new_tokens=..., do_sample=..., ...)`: the prompt runs once (prefill),
// then each new token is one incremental forward (Decoder::forward_incremental); decoding stops after
// `max_new_tokens` or at the first token in `eos_token_ids`, which is kept in the output as
// transformers keeps it.
//
// Collective over the decoder's tp group. Every rank computes the same logits (gathered over tp); the
// token each step is still broadcast from rank 0 of `agree` (the world), so no rounding difference in
// a reduction can ever send the ranks' sequences apart.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "trlhpc/model/model_config.hpp"

#include "trlhpc/generate/token_sampler.hpp"

namespace trlhpc {

class Communicator;
class Decoder;

struct GenerationOptions {
  int64_t max_new_tokens = 128;
  SamplingOptions sampling;
  std::vector<int64_t> eos_token_ids;  // empty: never stop early
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // the new tokens (the EOS included when it ended the sequence)
  // log p(token) under the model's own logits (before temperature, top-k, top-p), one per token: what
  // transformers' log_softmax(output_logits) gives at the chosen ids; a deeper check than equal ids.
  std::vector<double> logprobs;
  bool stopped_at_eos = false;
};

// The length rule of `trlhpc generate`, checked before the KV cache (prompt + max_new_tokens positions)
// is allocated: UserError when max_new_tokens is < 1 or beyond the model's context
// (max_position_embeddings: no position past it was trained, and 1e9 asked for a 128 GB cache); a
// warning (returned; "" when none) when prompt + max_new_tokens passes the context, as transformers
// warns ("the current text generation call will exceed the model's predefined maximum length").
std::string check_generation_length(const ModelConfig& config, int64_t prompt_tokens, int64_t max_new_tokens);

// `on_token` (optional) sees each new token as it is chosen (streaming output).
GenerationResult generate(Decoder& decoder, std::span<const int32_t> prompt, const GenerationOptions& options,
                          Communicator* agree = nullptr, const std::function<void(int32_t)>& on_token = {});

}  // namespace trlhpc
