// How the fused LM head + cross-entropy turns one target token's logits z (V) into its loss, beyond the
// plain negative log-likelihood nll_t = logsumexp(z) - z[y]. Both variants are per-token, so they keep
// the loss a sum over target tokens that the trainer normalises by the global target count, as
// transformers does with num_items_in_batch.
//
// label_smoothing eps (transformers' LabelSmoother, --label_smoothing_factor):
//   loss_t = (1 - eps) nll_t + eps / V * sum_v (-log p_v) = logsumexp(z) - (1 - eps) z[y] - eps mean_v(z)
//   dloss_t / dz = softmax(z) - (1 - eps) onehot(y) - eps / V
// (LabelSmoother divides the nll sum by N and the smoothed sum by N * V: the same per-token formula.)
// dft (TRL's loss_type "dft", Dynamic Fine-Tuning, arXiv:2508.05629): the nll weighted by the token's
// probability, detached from the graph:
//   loss_t = sg(p_y) nll_t,  p_y = exp(-nll_t);  dloss_t / dz = p_y (softmax(z) - onehot(y))
// Together (not what trlhpc sft builds: TRL ignores label smoothing under dft, and so does the config):
// the smoothed loss times sg(p_y).
#pragma once

#include <cmath>

namespace trlhpc {

struct TokenLoss {
  float label_smoothing = 0.0f;  // eps in [0, 1]; 0: none
  bool dft = false;

  // The plain cross-entropy: the kernels take their original path, bit for bit.
  bool plain() const { return label_smoothing == 0.0f && !dft; }
};

// One token's loss from its softmax statistics, by the formulas above: lse = logsumexp(z), z_y the
// target's logit, z_mean = mean_v z (read only under label smoothing). The vocab-parallel loss combines
// its all-reduced statistics with it (src/model/decoder_tensor_parallel.cpp); plain is lse - z_y, the
// expression it has always used. The fused kernels keep their own arithmetic (cross_entropy.cpp/.cu).
inline double token_loss_from_statistics(double lse, double z_y, double z_mean, const TokenLoss& token_loss) {
  const double nll = lse - z_y;
  if (token_loss.plain()) return nll;
  const double eps = token_loss.label_smoothing;
  const double smoothed = (1.0 - eps) * nll + eps * (lse - z_mean);
  return token_loss.dft ? std::exp(-nll) * smoothed : smoothed;
}

}  // namespace trlhpc
