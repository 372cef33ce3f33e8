// Vocab-parallel cross-entropy pieces (see vocab_parallel_cross_entropy.cuh).
#include <string>

#include "device_math.cuh"
#include "trlhpc/core/cuda_check.hpp"
#include "trlhpc/core/error.hpp"
#include "vocab_parallel_cross_entropy.cuh"

namespace trlhpc::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int32_t kIgnoreIndex = -100;

__global__ void ce_max_kernel(const float* __restrict__ logits, int64_t V, float* __restrict__ row_max) {
  __shared__ float scratch[32];
  const float* z = logits + blockIdx.x * V;  // (V)
  float m = -INFINITY;
  for (int64_t v = threadIdx.x; v < V; v += kThreads) m = fmaxf(m, z[v]);
  m = group_max(m, 32);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x < 32) {
    m = group_max(threadIdx.x < kThreads / 32 ? scratch[threadIdx.x] : -INFINITY, 32);
    if (threadIdx.x == 0) row_max[blockIdx.x] = m;
  }
}

__global__ void ce_sums_kernel(const float* __restrict__ logits, const int32_t* __restrict__ targets, int64_t V,
                               int64_t vocab_start, const float* __restrict__ row_max, float* __restrict__ sums) {
  __shared__ double scratch[32];
  const int64_t r = blockIdx.x;
  const int32_t y = targets[r];
  if (y == kIgnoreIndex) {
    if (threadIdx.x == 0) sums[2 * r] = sums[2 * r + 1] = 0.0f;
    return;
  }
  const float* z = logits + r * V;  // (V)
  const float m = row_max[r];
  double s = 0.0;
  for (int64_t v = threadIdx.x; v < V; v += kThreads) s += static_cast<double>(__expf(z[v] - m));
  s = warp_sum(s);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    s = warp_sum(threadIdx.x < kThreads / 32 ? scratch[threadIdx.x] : 0.0);
    if (threadIdx.x == 0) {
      sums[2 * r] = static_cast<float>(s);
      sums[2 * r + 1] = y >= vocab_start && y < vocab_start + V ? z[y - vocab_start] : 0.0f;
    }
  }
}

__global__ void ce_grad_kernel(float* __restrict__ logits, const int32_t* __restrict__ targets, int64_t V,
                               int64_t vocab_start, const float* __restrict__ row_max, const float* __restrict__ sums,
                               float grad_scale, float softcap) {
  const int64_t r = blockIdx.x;
  float* z = logits + r * V;  // (V)
  const int32_t y = targets[r];
  if (y == kIgnoreIndex) {
    for (int64_t v = threadIdx.x; v < V; v += kThreads) z[v] = 0.0f;
    return;
  }
  const float m = row_max[r], mult = grad_scale / sums[2 * r];
  const bool owned = y >= vocab_start && y < vocab_start + V;
  if (softcap > 0.0f) {  // z holds capped logits: times the cap's derivative 1 - (z / c)^2
    for (int64_t v = threadIdx.x; v < V; v += kThreads) {
      const float zv = z[v], t = zv / softcap;
      const float g = mult * __expf(zv - m);
      z[v] = (owned && v == y - vocab_start ? g - grad_scale : g) * (1.0f - t * t);
    }
    return;
  }
  for (int64_t v = threadIdx.x; v < V; v += kThreads) {
    const float g = mult * __expf(z[v] - m);
    z[v] = owned && v == y - vocab_start ? g - grad_scale : g;
  }
}

// logit_sums[r] = sum_v z[r, v] in double (the fused kernel's z_mean is a double sum too).
__global__ void ce_logit_sums_kernel(const float* __restrict__ logits, const int32_t* __restrict__ targets, int64_t V,
                                     float* __restrict__ logit_sums) {
  __shared__ double scratch[32];
  const int64_t r = blockIdx.x;
  if (targets[r] == kIgnoreIndex) {
    if (threadIdx.x == 0) logit_sums[r] = 0.0f;
    return;
  }
  const float* z = logits + r * V;  // (V)
  double l = 0.0;
  for (int64_t v = threadIdx.x; v < V; v += kThreads) l += static_cast<double>(z[v]);
  l = warp_sum(l);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = l;
  __syncthreads();
  if (threadIdx.x < 32) {
    l = warp_sum(threadIdx.x < kThreads / 32 ? scratch[threadIdx.x] : 0.0);
    if (threadIdx.x == 0) logit_sums[r] = static_cast<float>(l);
  }
}

// dlogits of the label-smoothed and/or DFT loss; the row's constants in double (every thread the same),
// then fp32 per element as ce_grad_kernel.
__global__ void ce_shaped_grad_kernel(float* __restrict__ logits, const int32_t* __restrict__ targets, int64_t V,
                                      int64_t vocab_start, int64_t vocab_size, const float* __restrict__ row_max,
                                      const float* __restrict__ sums, float grad_scale, float softcap, float eps,
                                      bool dft) {
  const int64_t r = blockIdx.x;
  float* z = logits + r * V;  // (V)
  const int32_t y = targets[r];
  if (y == kIgnoreIndex) {
    for (int64_t v = threadIdx.x; v < V; v += kThreads) z[v] = 0.0f;
    return;
  }
  const float m = row_max[r];
  const double s = sums[2 * r];
  // p_y = exp(-nll), nll = m + log s - z_y: detached, a constant of the row.
  const double w = dft ? exp(-(static_cast<double>(m) + log(s) - static_cast<double>(sums[2 * r + 1]))) : 1.0;
  const double scale = static_cast<double>(grad_scale) * w;
  const float mult = static_cast<float>(scale / s);
  const float uniform = static_cast<float>(scale * static_cast<double>(eps) / static_cast<double>(vocab_size));
  const float onehot = static_cast<float>(scale * (1.0 - static_cast<double>(eps)));
  const int64_t local_y = y >= vocab_start && y < vocab_start + V ? y - vocab_start : -1;
  for (int64_t v = threadIdx.x; v < V; v += kThreads) {
    const float zv = z[v];
    float g = mult * __expf(zv - m) - uniform;
    if (v == local_y) g -= onehot;
    if (softcap > 0.0f) {  // z holds capped logits: times the cap's derivative 1 - (z / c)^2
      const float t = zv / softcap;
      g *= 1.0f - t * t;
    }
    z[v] = g;
  }
}

// stats row r = (sum_v exp(z[v] - m) (z[v] - m) in double, the first global id v with z[v] == m or
// vocab_size): TRL's entropy and top-1 pieces, summed / min-reduced over tp by the caller. The first
// index is reduced as a float, exact for ids below 2^24 (every vocabulary trlhpc loads).
__global__ void ce_metrics_kernel(const float* __restrict__ logits, const int32_t* __restrict__ targets, int64_t V,
                                  int64_t vocab_start, int64_t vocab_size, const float* __restrict__ row_max,
                                  float* __restrict__ stats) {
  __shared__ double scratch[32];
  __shared__ float first_scratch[32];
  const int64_t r = blockIdx.x;
  if (targets[r] == kIgnoreIndex) {
    if (threadIdx.x == 0) stats[2 * r] = stats[2 * r + 1] = 0.0f;
    return;
  }
  const float* z = logits + r * V;  // (V)
  const float m = row_max[r];
  double w = 0.0;
  float first = static_cast<float>(vocab_size);
  for (int64_t v = threadIdx.x; v < V; v += kThreads) {
    const double d = static_cast<double>(z[v] - m);
    w += exp(d) * d;
    if (z[v] == m && static_cast<float>(vocab_start + v) < first) first = static_cast<float>(vocab_start + v);
  }
  w = warp_sum(w);
  first = -group_max(-first, 32);
  if (threadIdx.x % 32 == 0) {
    scratch[threadIdx.x / 32] = w;
    first_scratch[threadIdx.x / 32] = first;
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    w = warp_sum(threadIdx.x < kThreads / 32 ? scratch[threadIdx.x] : 0.0);
    first = -group_max(threadIdx.x < kThreads / 32 ? -first_scratch[threadIdx.x] : -static_cast<float>(vocab_size), 32);
    if (threadIdx.x == 0) {
      stats[2 * r] = static_cast<float>(w);
      stats[2 * r + 1] = first;
    }
  }
}

}  // namespace

void vocab_parallel_ce_max(const float* logits, int64_t M, int64_t V, float* row_max, cudaStream_t stream) {
  if (M <= 0) return;
  ce_max_kernel<<<static_cast<unsigned>(M), kThreads, 0, stream>>>(logits, V, row_max);
  TRLHPC_CHECK_CUDA_LAUNCH("ce_max_kernel");
}

void vocab_parallel_ce_sums(const float* logits, const int32_t* targets, int64_t M, int64_t V, int64_t vocab_start,
                            const float* row_max, float* sums, cudaStream_t stream) {
  if (M <= 0) return;
  ce_sums_kernel<<<static_cast<unsigned>(M), kThreads, 0, stream>>>(logits, targets, V, vocab_start, row_max, sums);
  TRLHPC_CHECK_CUDA_LAUNCH("ce_sums_kernel");
}

void vocab_parallel_ce_metrics(const float* logits, const int32_t* targets, int64_t M, int64_t V, int64_t vocab_start,
                               int64_t vocab_size, const float* row_max, float* stats, cudaStream_t stream) {
  if (M <= 0) return;
  ce_metrics_kernel<<<static_cast<unsigned>(M), kThreads, 0, stream>>>(logits, targets, V, vocab_start, vocab_size,
                                                                        row_max, stats);
  TRLHPC_CHECK_CUDA_LAUNCH("ce_metrics_kernel");
}

void vocab_parallel_ce_grad(float* logits, const int32_t* targets, int64_t M, int64_t V, int64_t vocab_start,
                            const float* row_max, const float* sums, float grad_scale, cudaStream_t stream,
                            float logit_softcap) {
  if (M <= 0) return;
  ce_grad_kernel<<<static_cast<unsigned>(M), kThreads, 0, stream>>>(logits, targets, V, vocab_start, row_max, sums,
                                                                     grad_scale, logit_softcap);
  TRLHPC_CHECK_CUDA_LAUNCH("ce_grad_kernel");
}

void vocab_parallel_ce_logit_sums(const float* logits, const int32_t* targets, int64_t M, int64_t V,
                                  float* logit_sums, cudaStream_t stream) {
  if (M <= 0) return;
  ce_logit_sums_kernel<<<static_cast<unsigned>(M), kThreads, 0, stream>>>(logits, targets, V, logit_sums);
  TRLHPC_CHECK_CUDA_LAUNCH("ce_logit_sums_kernel");
}

void vocab_parallel_ce_shaped_grad(float* logits, const int32_t* targets, int64_t M, int64_t V, int64_t vocab_start,
                                   int64_t vocab_size, const float* row_max, const float* sums, float grad_scale,
                                   float logit_softcap, const TokenLoss& token_loss, cudaStream_t stream) {
  TRLHPC_REQUIRE(token_loss.label_smoothing >= 0.0f && token_loss.label_smoothing <= 1.0f,
                 "vocab_parallel_ce_shaped_grad: label smoothing " + std::to_string(token_loss.label_smoothing) +
                     " is outside [0, 1]");
  TRLHPC_REQUIRE(vocab_size >= V, "vocab_parallel_ce_shaped_grad: vocab_size " + std::to_string(vocab_size) +
                                      " is smaller than the slice's " + std::to_string(V) + " columns");
  if (M <= 0) return;
  ce_shaped_grad_kernel<<<static_cast<unsigned>(M), kThreads, 0, stream>>>(
      logits, targets, V, vocab_start, vocab_size, row_max, sums, grad_scale, logit_softcap,
      token_loss.label_smoothing, token_loss.dft);
  TRLHPC_CHECK_CUDA_LAUNCH("ce_shaped_grad_kernel");
}

}  // namespace trlhpc::cuda
