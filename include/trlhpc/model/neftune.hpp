#pragma once
// NEFTune (Jain et al. 2023, "NEFTune: Noisy Embeddings Improve Instruction Finetuning", Algorithm 1) as
// transformers' Trainer applies it for TrainingArguments.neftune_noise_alpha (a forward hook on the input
// embedding module, active in training mode only; read, not copied): the embedding output X (B, L, d)
// becomes X + U(-m, m), m = alpha / sqrt(L * d), with L = X.size(1) and d = X.size(2): the micro-batch's
// collated sequence length (TRL's padding-free and packed micro-batches are one row of all its tokens, so
// L is that total) and the hidden size. Evaluation and generation add nothing.
//
// trlhpc draws element (token n, feature c) as m * neftune_unit_noise(key, source row, source column, c)
// (core/philox.hpp) with key = f(seed, optimizer step): the token's place in the dataset, not in the
// micro-batch or on a rank, decides its noise, so 1 rank, dp, tp (with or without sequence parallelism),
// cp and sp add the same noise to the same token. Padding (no source row) gets none; in TRL it does, but
// nothing trained or logged reads a padding position's embedding. The noise is additive: the gradient
// with respect to the embedding rows is the one without it, so the backward is unchanged. The stream is
// not torch's, so a run matches TRL's NEFTune run in distribution only (tests/e2e/test_neftune.sh).
#include <cstdint>

namespace trlhpc {

struct NeftuneNoise {
  double alpha = 0;   // neftune_noise_alpha; 0: off
  uint64_t seed = 0;  // --seed
  bool enabled() const { return alpha > 0; }
};

// m = alpha / sqrt(L * d), in fp32 as transformers computes it (torch.sqrt of the integer L * d).
float neftune_magnitude(double alpha, int64_t L, int64_t d);

// The noise stream of one optimizer step.
uint64_t neftune_key(uint64_t seed, int64_t step);

}  // namespace trlhpc
