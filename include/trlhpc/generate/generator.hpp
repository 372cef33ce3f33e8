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
#include <vector>

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
  bool stopped_at_eos = false;
};

// `on_token` (optional) sees each new token as it is chosen (streaming output).
GenerationResult generate(Decoder& decoder, std::span<const int32_t> prompt, const GenerationOptions& options,
                          Communicator* agree = nullptr, const std::function<void(int32_t)>& on_token = {});

}  // namespace trlhpc
