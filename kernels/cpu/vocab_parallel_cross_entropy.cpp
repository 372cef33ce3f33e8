// Vocab-parallel cross-entropy pieces for the CPU backend (Megatron-LM, Shoeybi et al. 2019, sec. 3:
// the LM head is split by vocabulary rows and the softmax statistics are all-reduced, so no rank ever
// holds a full-vocabulary logit row).
//
// A tp rank holds logits z (M, Vl) = h W_local^T for vocabulary ids [vocab_start, vocab_start + Vl).
// With the caller all-reducing between the steps, per row t with target y_t != -100:
//   1. vocab_parallel_ce_max:  m_local = max_v z[v]                      -> all-reduce max   -> m
//   2. vocab_parallel_ce_sums: s_local = sum_v exp(z[v] - m), z[y_t] if this rank owns y_t else 0
//                                                                          -> all-reduce sum   -> (s, z_y)
//      loss_t = m + log(s) - z_y                                           (caller, in double)
//   3. vocab_parallel_ce_grad: z <- grad_scale * (exp(z - m) / s - onehot_local(y_t))   (dlogits)
//   metrics (TRL's entropy and is_top1, optional, after step 1):
//      vocab_parallel_ce_metrics: (sum_v exp(z[v] - m) (z[v] - m), first global id v with z[v] == m or
//                                 vocab_size)                 -> all-reduce (sum, min) -> (w, first)
//      entropy_t = log(s) - w / s;  is_top1_t = (first == y_t)   (caller)
// Ignored rows (-100) get zeros in step 2 and a zero gradient in step 3. Sums of exponentials are
// taken in double, as in the fused kernel (cross_entropy.cpp).
// Softcapped logits (Gemma 2): the caller caps z in place first (logit_softcap, cross_entropy.cpp), so
// steps 1, 2 and the metrics see the capped logits as they are; step 3 is given the cap and multiplies
// dz by 1 - (z / c)^2, the cap's derivative recovered from the capped value.
// Label smoothing eps and DFT (token_loss.hpp, the fused kernel's shaped_row_loss on a split row):
//   2b. vocab_parallel_ce_logit_sums (label smoothing only): l_local = sum_v z[v]  -> all-reduce sum -> l
//      loss_t = token_loss_from_statistics(m + log s, z_y, l / V)                  (caller, in double)
//   3'. vocab_parallel_ce_shaped_grad instead of step 3, with w = p_y = exp(z_y - m) / s under DFT (from
//      the all-reduced (s, z_y): no extra collective; a constant, as TRL's .detach()) or 1:
//      z <- grad_scale * w * (exp(z - m) / s - (1 - eps) onehot_local(y_t) - eps / V)
//      eps / V goes to every entry of every slice, V the whole vocabulary (vocab_size), not the slice's.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "trlhpc/core/error.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace trlhpc::cpu {
namespace {
constexpr int32_t kIgnoreIndex = -100;
// True when target y is one of this rank's vocabulary rows [vocab_start, vocab_start + V).
inline bool owns(int32_t y, int64_t vocab_start, int64_t V) { return y >= vocab_start && y < vocab_start + V; }
}  // namespace

void vocab_parallel_ce_max(const float* logits, int64_t M, int64_t V, float* row_max) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < M; ++r) {
    const float* z = logits + r * V;
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t v = 0; v < V; ++v) m = m > z[v] ? m : z[v];
    row_max[r] = m;
  }
}

void vocab_parallel_ce_sums(const float* logits, const int32_t* targets, int64_t M, int64_t V, int64_t vocab_start,
                            const float* row_max, float* sums) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < M; ++r) {
    const float* z = logits + r * V;
    const int32_t y = targets[r];
    if (y == kIgnoreIndex) {
      sums[2 * r] = sums[2 * r + 1] = 0.0f;
      continue;
    }
    double s = 0.0;
    for (int64_t v = 0; v < V; ++v) s += std::exp(static_cast<double>(z[v] - row_max[r]));
    sums[2 * r] = static_cast<float>(s);
    sums[2 * r + 1] = owns(y, vocab_start, V) ? z[y - vocab_start] : 0.0f;
  }
}

void vocab_parallel_ce_metrics(const float* logits, const int32_t* targets, int64_t M, int64_t V, int64_t vocab_start,
                               int64_t vocab_size, const float* row_max, float* stats) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < M; ++r) {
    const float* z = logits + r * V;
    if (targets[r] == kIgnoreIndex) {
      stats[2 * r] = stats[2 * r + 1] = 0.0f;
      continue;
    }
    const float m = row_max[r];
    double w = 0.0;
    int64_t first = vocab_size;
    for (int64_t v = 0; v < V; ++v) {
      const double d = static_cast<double>(z[v] - m);
      w += std::exp(d) * d;
      if (z[v] == m && first == vocab_size) first = vocab_start + v;
    }
    stats[2 * r] = static_cast<float>(w);
    stats[2 * r + 1] = static_cast<float>(first);  // ids < 2^24 are exact in float (checked by the caller)
  }
}

void vocab_parallel_ce_grad(float* logits, const int32_t* targets, int64_t M, int64_t V, int64_t vocab_start,
                            const float* row_max, const float* sums, float grad_scale, float logit_softcap) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < M; ++r) {
    float* z = logits + r * V;
    const int32_t y = targets[r];
    if (y == kIgnoreIndex) {
      for (int64_t v = 0; v < V; ++v) z[v] = 0.0f;
      continue;
    }
    const double mult = static_cast<double>(grad_scale) / static_cast<double>(sums[2 * r]);
    if (logit_softcap > 0) {
      for (int64_t v = 0; v < V; ++v) {
        const float t = z[v] / logit_softcap;  // tanh of the uncapped logit over the cap
        float g = static_cast<float>(mult * std::exp(static_cast<double>(z[v] - row_max[r])));
        if (owns(y, vocab_start, V) && v == y - vocab_start) g -= grad_scale;
        z[v] = g * (1.0f - t * t);
      }
      continue;
    }
    for (int64_t v = 0; v < V; ++v) z[v] = static_cast<float>(mult * std::exp(static_cast<double>(z[v] - row_max[r])));
    if (owns(y, vocab_start, V)) z[y - vocab_start] -= grad_scale;
  }
}

void vocab_parallel_ce_logit_sums(const float* logits, const int32_t* targets, int64_t M, int64_t V,
                                  float* logit_sums) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < M; ++r) {
    const float* z = logits + r * V;
    double l = 0.0;  // double, as the fused kernel's z_mean: a row of V logits of one sign would lose digits in fp32
    if (targets[r] != kIgnoreIndex)
      for (int64_t v = 0; v < V; ++v) l += static_cast<double>(z[v]);
    logit_sums[r] = static_cast<float>(l);
  }
}

void vocab_parallel_ce_shaped_grad(float* logits, const int32_t* targets, int64_t M, int64_t V, int64_t vocab_start,
                                   int64_t vocab_size, const float* row_max, const float* sums, float grad_scale,
                                   float logit_softcap, const TokenLoss& token_loss) {
  TRLHPC_REQUIRE(token_loss.label_smoothing >= 0 && token_loss.label_smoothing <= 1,
                 "vocab_parallel_ce_shaped_grad: label smoothing " + std::to_string(token_loss.label_smoothing) +
                     " is outside [0, 1]");
  TRLHPC_REQUIRE(vocab_size >= V, "vocab_parallel_ce_shaped_grad: vocab_size " + std::to_string(vocab_size) +
                                      " is smaller than the slice's " + std::to_string(V) + " columns");
  const double eps = token_loss.label_smoothing;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < M; ++r) {
    float* z = logits + r * V;
    const int32_t y = targets[r];
    if (y == kIgnoreIndex) {
      for (int64_t v = 0; v < V; ++v) z[v] = 0.0f;
      continue;
    }
    const double m = row_max[r], s = sums[2 * r];
    // p_y = exp(-nll) with nll = m + log s - z_y, as the fused kernel's weight.
    const double w = token_loss.dft ? std::exp(-(m + std::log(s) - static_cast<double>(sums[2 * r + 1]))) : 1.0;
    const double scale = static_cast<double>(grad_scale) * w, mult = scale / s;
    const double uniform = scale * eps / static_cast<double>(vocab_size), onehot = scale * (1.0 - eps);
    const int64_t local_y = owns(y, vocab_start, V) ? y - vocab_start : -1;
    for (int64_t v = 0; v < V; ++v) {
      double g = mult * std::exp(static_cast<double>(z[v]) - m) - uniform;
      if (v == local_y) g -= onehot;
      if (logit_softcap > 0) {
        const double t = static_cast<double>(z[v]) / logit_softcap;  // tanh of the uncapped logit over the cap
        g *= 1.0 - t * t;
      }
      z[v] = static_cast<float>(g);
    }
  }
}

}  // namespace trlhpc::cpu
