// Fused LM head + cross-entropy for the CPU backend (fp32 compute, double loss; OpenBLAS + OpenMP).
//
// For each token t with target y_t != -100 (ignore_index), with logits z_t = hidden_t @ weight^T (V):
//   loss_t = logsumexp(z_t) - z_t[y_t],  logsumexp(z) = max(z) + log(sum_v exp(z_v - max(z)))
// and the function returns sum_t loss_t in double. The backward of grad_scale * sum_t loss_t is
//   dz_t      = grad_scale * (softmax(z_t) - onehot(y_t))        (valid rows only)
//   dhidden_t = dz_t @ weight                  (overwrite; zero for ignored tokens)
//   dweight  += sum_t dz_t^T hidden_t          (accumulate)
// Memory: only chunk_tokens x V logits exist at a time. The valid tokens are gathered first, so
// ignored tokens (prompts masked with -100, padding) cost nothing: no logits, no gemm work.
// Per chunk: gather hidden rows -> sgemm logits -> per-row softmax statistics (OpenMP over rows, the
// sum of exponentials in double) -> dz in place -> sgemm dhidden (scattered back) and sgemm dweight.
// The loss is summed in token order, so it does not depend on the thread count.
// With metrics (TRL's entropy and is_top1): the exp pass also sums exp(z - max) * (z - max), so
// entropy_t = log(sum) - that / sum, and one more pass finds the first index of the maximum.
// With a logit softcap c (Gemma 2): each row is first capped in place, z <- c tanh(z / c), keeping
// t = tanh(z / c); the row's loss, metrics and softmax gradient are then those of the capped logits, and
// the gradient is multiplied by 1 - t^2 on its way back to the head's output (capped_row_loss).
// With a TokenLoss other than plain (label smoothing, DFT; token_loss.hpp) the row's loss and gradient
// are the ones given there (shaped_row_loss); the plain rows keep their original arithmetic, bit for bit.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "trlhpc/core/error.hpp"
#include "kernels/cpu/fast_exp.hpp"
#include "kernels/cpu/softcap.hpp"
#include "kernels/cpu/lane_sum.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace trlhpc::cpu {

namespace {

constexpr int32_t kIgnoreIndex = -100;


struct RowMetrics {
  double entropy = 0;
  bool top1 = false;
};

// The label-smoothed and/or DFT loss of a row (token_loss.hpp), once row_loss has left z (V) =
// exp(z - zmax) with sum = sum_v z: nll = logsumexp - z[y], z_mean = mean of the original logits.
// With the gradient, z becomes grad_scale * w * (softmax - (1 - eps) onehot(y) - eps / V), w = p_y (DFT,
// a constant: detached, as TRL's .detach()) or 1.
double shaped_row_loss(float* z, int64_t V, int32_t y, bool want_grad, float grad_scale, double sum, double nll,
                       float zmax, double z_mean, const TokenLoss& token_loss) {
  const double eps = token_loss.label_smoothing;
  const double lse = static_cast<double>(zmax) + std::log(sum);
  const double smoothed = (1.0 - eps) * nll + eps * (lse - z_mean);  // = nll when eps = 0
  const double w = token_loss.dft ? std::exp(-nll) : 1.0;
  if (want_grad) {
    const double scale = static_cast<double>(grad_scale) * w;
    const float mult = static_cast<float>(scale / sum);
    const float uniform = static_cast<float>(scale * eps / static_cast<double>(V));
#pragma omp simd
    for (int64_t v = 0; v < V; ++v) z[v] = z[v] * mult - uniform;
    z[y] -= static_cast<float>(scale * (1.0 - eps));
  }
  return w * smoothed;
}

// Loss of one row of logits z (V) for target y. z is overwritten: with exp(z - max) for the forward
// only, with grad_scale * (softmax(z) - onehot(y)) when the gradient is wanted. `metrics` (optional)
// receives the row's entropy and whether y is the first index of the maximum.
double row_loss(float* z, int64_t V, int32_t y, bool want_grad, float grad_scale, RowMetrics* metrics,
                const TokenLoss& token_loss) {
  // Three simple loops rather than one fused one: each vectorises on its own (GCC leaves a fused
  // exp + double-sum loop, or a std::max reduction, scalar), and a row of V floats stays in L2.
  const double z_target = z[y];
  // mean_v z for label smoothing, read before the row is overwritten with exponentials.
  const double z_mean =
      token_loss.label_smoothing > 0
          ? lane_sum<double>(V, [z](int64_t v) { return static_cast<double>(z[v]); }) / static_cast<double>(V)
          : 0.0;
  float zmax = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : zmax)
  for (int64_t v = 0; v < V; ++v) zmax = zmax > z[v] ? zmax : z[v];
  float weighted = 0.0f;  // sum exp(z - max) * (z - max), for the entropy
  if (metrics) {
    int64_t first = 0;
    while (first < V && z[first] != zmax) ++first;  // V only for a NaN row
    metrics->top1 = first == y;
    weighted = lane_sum<float>(V, [z, zmax](int64_t v) {
      const float d = z[v] - zmax;
      z[v] = exp_approx(d);
      return z[v] * d;
    });
  } else {
#pragma omp simd
    for (int64_t v = 0; v < V; ++v) z[v] = exp_approx(z[v] - zmax);
  }
  const double sum = lane_sum<double>(V, [z](int64_t v) { return static_cast<double>(z[v]); });
  if (metrics) metrics->entropy = std::log(sum) - static_cast<double>(weighted) / sum;
  const double nll = static_cast<double>(zmax) + std::log(sum) - z_target;
  if (!token_loss.plain()) return shaped_row_loss(z, V, y, want_grad, grad_scale, sum, nll, zmax, z_mean, token_loss);
  if (want_grad) {
    const float mult = static_cast<float>(static_cast<double>(grad_scale) / sum);
#pragma omp simd
    for (int64_t v = 0; v < V; ++v) z[v] *= mult;
    z[y] -= grad_scale;
  }
  return nll;
}

// row_loss of the softcapped row: z (V) <- c tanh(z / c) first, then row_loss; the gradient it leaves
// (with respect to the capped logits) is multiplied by d(c tanh(z / c)) / dz = 1 - t^2. t: (V) scratch.
double capped_row_loss(float* z, float* t, int64_t V, int32_t y, bool want_grad, float grad_scale, float cap,
                       RowMetrics* metrics, const TokenLoss& token_loss) {
#pragma omp simd
  for (int64_t v = 0; v < V; ++v) {
    t[v] = tanh_approx(z[v] / cap);
    z[v] = t[v] * cap;
  }
  const double loss = row_loss(z, V, y, want_grad, grad_scale, metrics, token_loss);
  if (want_grad) {
#pragma omp simd
    for (int64_t v = 0; v < V; ++v) z[v] *= 1.0f - t[v] * t[v];
  }
  return loss;
}

}  // namespace

void logit_softcap(float* x, int64_t n, float cap) {
  TRLHPC_REQUIRE(cap > 0 && std::isfinite(cap), "logit_softcap: cap " + std::to_string(cap) + " must be positive");
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] = softcap(x[i], cap);
}

double cross_entropy_fwd_bwd(const float* hidden, const float* weight, const int32_t* targets, int64_t N, int64_t C,
                             int64_t V, float grad_scale, float* dhidden, float* dweight, int64_t chunk_tokens,
                             int64_t* valid_tokens, CrossEntropyMetrics* metrics, bool bf16_gemm,
                             float logit_softcap, const TokenLoss& token_loss) {
  return cross_entropy_fwd_bwd(hidden, GemmOperand{weight, false}, targets, N, C, V, grad_scale, dhidden, dweight,
                               chunk_tokens, valid_tokens, metrics, bf16_gemm, logit_softcap, token_loss);
}

double cross_entropy_fwd_bwd(const float* hidden, const GemmOperand& weight, const int32_t* targets, int64_t N,
                             int64_t C, int64_t V, float grad_scale, float* dhidden, float* dweight,
                             int64_t chunk_tokens, int64_t* valid_tokens, CrossEntropyMetrics* metrics, bool bf16_gemm,
                             float logit_softcap, const TokenLoss& token_loss) {
  TRLHPC_REQUIRE(bf16_gemm || !weight.bf16, "cross_entropy_fwd_bwd: a bf16 weight needs the bf16 GEMMs (bf16_gemm)");
  // b: the weight (bf16 or fp32) or an fp32 buffer of this function.
  const auto gemm = [bf16_gemm](const float* a, bool ta, const GemmOperand& b, bool tb, float* c, int64_t M,
                                int64_t Nc, int64_t K, float beta) {
    if (bf16_gemm) matmul_bf16({a, false}, ta, b, tb, {c, false}, M, Nc, K, 1.0f, beta);
    else matmul(a, ta, static_cast<const float*>(b.data), tb, c, M, Nc, K, 1.0f, beta);
  };
  TRLHPC_REQUIRE(chunk_tokens > 0,
                 "cross_entropy_fwd_bwd: chunk_tokens must be positive, got " + std::to_string(chunk_tokens));
  TRLHPC_REQUIRE(logit_softcap >= 0 && std::isfinite(logit_softcap),
                 "cross_entropy_fwd_bwd: logit softcap " + std::to_string(logit_softcap) +
                     " is not a positive number; use 0 for none");
  TRLHPC_REQUIRE(token_loss.label_smoothing >= 0 && token_loss.label_smoothing <= 1,
                 "cross_entropy_fwd_bwd: label smoothing " + std::to_string(token_loss.label_smoothing) +
                     " is outside [0, 1]");
  const bool want_grad = dhidden != nullptr;
  // Valid token indices, in order: (n_valid)
  std::vector<int64_t> rows;
  rows.reserve(static_cast<size_t>(N));
  for (int64_t t = 0; t < N; ++t) {
    if (targets[t] == kIgnoreIndex) continue;
    TRLHPC_REQUIRE(targets[t] >= 0 && targets[t] < V, "cross_entropy_fwd_bwd: target " + std::to_string(targets[t]) +
                                                          " of token " + std::to_string(t) + " is outside [0, " +
                                                          std::to_string(V) + ") and is not the ignore index -100");
    rows.push_back(t);
  }
  const int64_t n_valid = static_cast<int64_t>(rows.size());
  if (valid_tokens) *valid_tokens = n_valid;
  if (want_grad) {
    // Ignored tokens get a zero gradient; valid rows are overwritten chunk by chunk below.
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < N; ++t)
      if (targets[t] == kIgnoreIndex) std::fill(dhidden + t * C, dhidden + (t + 1) * C, 0.0f);
  }
  if (n_valid == 0) return 0.0;

  const int64_t chunk = std::min(chunk_tokens, n_valid);
  std::vector<float> h_chunk(static_cast<size_t>(chunk * C));  // (chunk, C) gathered hidden rows
  // (chunk, V) logits, then dlogits; not zero-filled (the sgemm overwrites it), which saves a pass over it.
  const auto logits = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(chunk * V));
  std::vector<float> dh_chunk(want_grad ? static_cast<size_t>(chunk * C) : 0);  // (chunk, C)
  std::vector<double> loss_rows(static_cast<size_t>(chunk));                    // (chunk)
  std::vector<RowMetrics> metric_rows(metrics ? static_cast<size_t>(chunk) : 0);  // (chunk)
  // (chunk, V) tanh(z / c) of the capped rows, kept for their gradient
  const auto tanh_rows =
      std::make_unique_for_overwrite<float[]>(logit_softcap > 0 ? static_cast<size_t>(chunk * V) : 0);
  double total = 0.0;

  for (int64_t c0 = 0; c0 < n_valid; c0 += chunk) {
    const int64_t cm = std::min(chunk, n_valid - c0);
    const int64_t* chunk_rows = rows.data() + c0;  // (cm) token indices of this chunk
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < cm; ++r)
      std::copy(hidden + chunk_rows[r] * C, hidden + (chunk_rows[r] + 1) * C, h_chunk.data() + r * C);
    // logits (cm, V) = h_chunk (cm, C) @ weight^T (C, V)
    gemm(h_chunk.data(), false, weight, true, logits.get(), cm, V, C, 0.0f);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < cm; ++r) {
      RowMetrics* row_metrics = metrics ? &metric_rows[static_cast<size_t>(r)] : nullptr;
      float* z = logits.get() + r * V;  // (V)
      const int32_t y = targets[chunk_rows[r]];
      loss_rows[static_cast<size_t>(r)] =
          logit_softcap > 0
              ? capped_row_loss(z, tanh_rows.get() + r * V, V, y, want_grad, grad_scale, logit_softcap, row_metrics,
                                token_loss)
              : row_loss(z, V, y, want_grad, grad_scale, row_metrics, token_loss);
    }
    for (int64_t r = 0; r < cm; ++r) total += loss_rows[static_cast<size_t>(r)];
    if (metrics)
      for (int64_t r = 0; r < cm; ++r) {
        metrics->entropy_sum += metric_rows[static_cast<size_t>(r)].entropy;
        metrics->top1 += metric_rows[static_cast<size_t>(r)].top1;
      }
    if (!want_grad) continue;
    // dh_chunk (cm, C) = dlogits (cm, V) @ weight (V, C), then scattered to the token rows.
    gemm(logits.get(), false, weight, false, dh_chunk.data(), cm, C, V, 0.0f);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < cm; ++r)
      std::copy(dh_chunk.data() + r * C, dh_chunk.data() + (r + 1) * C, dhidden + chunk_rows[r] * C);
    // dweight (V, C) += dlogits^T (V, cm) @ h_chunk (cm, C)
    if (dweight) gemm(logits.get(), true, GemmOperand{h_chunk.data(), false}, false, dweight, V, C, cm, 1.0f);
  }
  return total;
}

}  // namespace trlhpc::cpu
