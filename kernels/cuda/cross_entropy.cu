// Chunked fused LM head + cross-entropy (see cross_entropy.cuh).
#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "cross_entropy.cuh"
#include "device_math.cuh"
#include "elementwise.cuh"
#include "trlhpc/core/cuda_check.hpp"
#include "trlhpc/core/error.hpp"

namespace trlhpc::cuda {

namespace {

constexpr int32_t kIgnoreIndex = -100;
constexpr int kSoftmaxThreads = 512;

template <class T>
constexpr cudaDataType_t data_type() {
  return std::is_same<T, float>::value ? CUDA_R_32F : CUDA_R_16BF;
}

// rows (n_valid) = the indices t < N with targets[t] != -100, in increasing order: the valid rows,
// compacted on the device so the host never uploads them (an upload from pageable memory may wait for
// the stream). One block; thread i takes the i-th contiguous slice of the tokens, a serial scan of the
// per-thread counts gives each slice its first output slot.
constexpr int kCompactThreads = 1024;
__global__ void valid_rows_kernel(const int32_t* __restrict__ targets, int64_t N, int32_t* __restrict__ rows) {
  __shared__ int64_t first[kCompactThreads];
  const int64_t per = (N + kCompactThreads - 1) / kCompactThreads;
  const int64_t start = threadIdx.x * per, t0 = start < N ? start : N, t1 = t0 + per < N ? t0 + per : N;
  int64_t count = 0;
  for (int64_t t = t0; t < t1; ++t) count += targets[t] != kIgnoreIndex ? 1 : 0;
  first[threadIdx.x] = count;
  __syncthreads();
  if (threadIdx.x == 0) {
    int64_t run = 0;
    for (int i = 0; i < kCompactThreads; ++i) {
      const int64_t c = first[i];
      first[i] = run;
      run += c;
    }
  }
  __syncthreads();
  int64_t at = first[threadIdx.x];
  for (int64_t t = t0; t < t1; ++t)
    if (targets[t] != kIgnoreIndex) rows[at++] = static_cast<int32_t>(t);
}

// dst (rows, C) = src rows index[0..rows) of a (?, C) matrix, converted to TO.
template <class TI, class TO>
__global__ void gather_rows_kernel(const TI* __restrict__ src, const int32_t* __restrict__ index, TO* __restrict__ dst,
                                   int64_t rows, int64_t C) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * C; i += int64_t{gridDim.x} * blockDim.x)
    dst[i] = from_float<TO>(to_float(src[static_cast<int64_t>(index[i / C]) * C + i % C]));
}

// dst rows index[0..rows) of a (?, C) matrix = src (rows, C).
template <class TI, class TO>
__global__ void scatter_rows_kernel(const TI* __restrict__ src, const int32_t* __restrict__ index,
                                    TO* __restrict__ dst, int64_t rows, int64_t C) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * C; i += int64_t{gridDim.x} * blockDim.x)
    dst[static_cast<int64_t>(index[i / C]) * C + i % C] = from_float<TO>(to_float(src[i]));
}

// Block r: the loss of logits row r (V) for target targets[rows[r]], into loss[r]; with want_grad,
// dz row r = grad_scale (softmax - onehot). dz may alias logits (fp32): each element is read before
// its own thread writes it. With entropy set (TRL's metrics, as the CPU kernel computes them):
// entropy[r] = log(sum) - sum_v exp(z - max)(z - max) / sum, top1[r] = (first index of the maximum ==
// target); the index is reduced as a float, exact for V < 2^24 (the caller checks). softcap c > 0: the
// row holds capped logits (c tanh(.)), and dz is multiplied by 1 - (z / c)^2 (the cap's derivative).
// token_loss not plain (label smoothing eps, DFT; token_loss.hpp): loss[r] = w ((1 - eps) nll + eps (lse -
// mean z)) and dz = grad_scale w (softmax - (1 - eps) onehot - eps / V), w = p_y (DFT) or 1, as the CPU
// kernel; the plain rows keep their original arithmetic.
template <class TZ>
__global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_loss_kernel(const float* logits, const int32_t* __restrict__ rows, const int32_t* __restrict__ targets,
                        int64_t V, bool want_grad, float grad_scale, TZ* dz, double* __restrict__ loss,
                        double* __restrict__ entropy, int32_t* __restrict__ top1, float softcap,
                        TokenLoss token_loss) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const float* z = logits + r * V;  // (V)
  const int32_t y = targets[rows[r]];
  const float z_target = z[y];  // read before any thread overwrites the row with dz
  // Online max and sum of exp(z - max) per thread (Milakov & Gimelshein 2018), then across the block.
  float m = -INFINITY, s = 0.0f;
  for (int64_t v = threadIdx.x; v < V; v += kSoftmaxThreads) {
    const float x = z[v];
    if (x > m) {
      s = s * __expf(m - x) + 1.0f;
      m = x;
    } else {
      s += __expf(x - m);
    }
  }
  const int lane = threadIdx.x % 32;
  float block_max = group_max(m, 32);
  __syncthreads();
  if (lane == 0) scratch[threadIdx.x / 32] = block_max;
  __syncthreads();
  block_max = group_max(lane < kSoftmaxThreads / 32 ? scratch[lane] : -INFINITY, 32);
  const float sum = block_sum(m == -INFINITY ? 0.0f : s * __expf(m - block_max), scratch);
  const double nll = static_cast<double>(block_max) + log(static_cast<double>(sum)) - static_cast<double>(z_target);
  // The same for every thread, so the block_sum below is reached by all. (TokenLoss::plain() is host code.)
  const bool plain = token_loss.label_smoothing == 0.0f && !token_loss.dft;
  const double eps = token_loss.label_smoothing;
  const double w = token_loss.dft ? exp(-nll) : 1.0;  // p_y, detached
  if (!plain) {
    float z_part = 0.0f;
    if (eps > 0.0)
      for (int64_t v = threadIdx.x; v < V; v += kSoftmaxThreads) z_part += z[v];
    const double z_mean = eps > 0.0 ? static_cast<double>(block_sum(z_part, scratch)) / static_cast<double>(V) : 0.0;
    if (threadIdx.x == 0) loss[r] = w * ((1.0 - eps) * nll + eps * (nll + static_cast<double>(z_target) - z_mean));
  } else if (threadIdx.x == 0) {
    loss[r] = nll;
  }
  if (entropy) {
    float w = 0.0f, first = static_cast<float>(V);
    for (int64_t v = threadIdx.x; v < V; v += kSoftmaxThreads) {
      const float d = z[v] - block_max;
      w += __expf(d) * d;
      if (d == 0.0f && static_cast<float>(v) < first) first = static_cast<float>(v);
    }
    const float weighted = block_sum(w, scratch);
    const float first_max = -trlhpc::cuda::block_max(-first, scratch);
    if (threadIdx.x == 0) {
      entropy[r] = log(static_cast<double>(sum)) - static_cast<double>(weighted) / static_cast<double>(sum);
      top1[r] = static_cast<int32_t>(first_max) == y ? 1 : 0;
    }
  }
  if (!want_grad) return;
  if (!plain) {
    const float scale = static_cast<float>(static_cast<double>(grad_scale) * w);
    const float shaped_mult = scale / sum, on_target = static_cast<float>(scale * (1.0 - eps));
    const float uniform = static_cast<float>(scale * eps / static_cast<double>(V));
    for (int64_t v = threadIdx.x; v < V; v += kSoftmaxThreads) {
      const float zv = z[v], t = softcap > 0.0f ? zv / softcap : 0.0f;  // read before dz may overwrite it
      const float g = __expf(zv - block_max) * shaped_mult - uniform;
      dz[r * V + v] = from_float<TZ>((v == y ? g - on_target : g) * (1.0f - t * t));
    }
    return;
  }
  const float mult = grad_scale / sum;
  if (softcap > 0.0f) {
    for (int64_t v = threadIdx.x; v < V; v += kSoftmaxThreads) {
      const float zv = z[v], t = zv / softcap;  // read before this thread overwrites it (dz may alias z)
      const float g = __expf(zv - block_max) * mult;
      dz[r * V + v] = from_float<TZ>((v == y ? g - grad_scale : g) * (1.0f - t * t));
    }
    return;
  }
  for (int64_t v = threadIdx.x; v < V; v += kSoftmaxThreads) {
    const float g = __expf(z[v] - block_max) * mult;
    dz[r * V + v] = from_float<TZ>(v == y ? g - grad_scale : g);
  }
}

}  // namespace

double PendingLossRows::read(LossMetricSums* metrics) {
  std::vector<double> host_loss(static_cast<size_t>(n_valid));  // (n_valid)
  if (n_valid > 0)
    TRLHPC_CHECK_CUDA(cudaMemcpyAsync(host_loss.data(), loss_rows.get(), static_cast<size_t>(n_valid) * sizeof(double),
                                      cudaMemcpyDeviceToHost, stream));
  const bool metric_rows = want_metrics && n_valid > 0;
  std::vector<double> host_entropy(metric_rows ? static_cast<size_t>(n_valid) : 0);  // (n_valid)
  std::vector<int32_t> host_top1(metric_rows ? static_cast<size_t>(n_valid) : 0);    // (n_valid)
  if (metric_rows) {
    TRLHPC_CHECK_CUDA(cudaMemcpyAsync(host_entropy.data(), entropy_rows.get(),
                                      static_cast<size_t>(n_valid) * sizeof(double), cudaMemcpyDeviceToHost, stream));
    TRLHPC_CHECK_CUDA(cudaMemcpyAsync(host_top1.data(), top1_rows.get(), static_cast<size_t>(n_valid) * sizeof(int32_t),
                                      cudaMemcpyDeviceToHost, stream));
  }
  if (n_valid > 0) TRLHPC_CHECK_CUDA(cudaStreamSynchronize(stream));
  double total = 0.0;
  for (double l : host_loss) total += l;
  if (metrics) {  // added in token order, as the loss (and the CPU kernel)
    *metrics = LossMetricSums{};
    metrics->computed = want_metrics;
    for (double e : host_entropy) metrics->entropy_sum += e;
    for (int32_t t : host_top1) metrics->top1 += t;
  }
  return total;
}

template <class T, class TD>
double cross_entropy_fwd_bwd(const T* hidden, const T* weight, const int32_t* targets, int64_t N, int64_t C, int64_t V,
                             float grad_scale, TD* dhidden, float* dweight, int64_t chunk_tokens,
                             int64_t* valid_tokens, Matmul& matmul, DeviceAllocator& allocator, cudaStream_t stream,
                             LossMetricSums* metrics, const int32_t* host_targets, float logit_softcap,
                             const TokenLoss& token_loss) {
  return cross_entropy_launch(hidden, weight, targets, N, C, V, grad_scale, dhidden, dweight, chunk_tokens,
                              valid_tokens, matmul, allocator, stream, metrics != nullptr, host_targets, logit_softcap,
                              token_loss)
      .read(metrics);
}

template <class T, class TD>
PendingLossRows cross_entropy_launch(const T* hidden, const T* weight, const int32_t* targets, int64_t N, int64_t C,
                                     int64_t V, float grad_scale, TD* dhidden, float* dweight, int64_t chunk_tokens,
                                     int64_t* valid_tokens, Matmul& matmul, DeviceAllocator& allocator,
                                     cudaStream_t stream, bool want_metrics_in, const int32_t* host_targets,
                                     float logit_softcap, const TokenLoss& token_loss) {
  TRLHPC_REQUIRE(chunk_tokens > 0,
                 "cross_entropy_fwd_bwd: chunk_tokens must be positive, got " + std::to_string(chunk_tokens));
  TRLHPC_REQUIRE(logit_softcap >= 0.0f && std::isfinite(logit_softcap),
                 "cross_entropy_fwd_bwd: logit softcap " + std::to_string(logit_softcap) +
                     " is not a positive number; use 0 for none");
  TRLHPC_REQUIRE(token_loss.label_smoothing >= 0.0f && token_loss.label_smoothing <= 1.0f,
                 "cross_entropy_fwd_bwd: label smoothing " + std::to_string(token_loss.label_smoothing) +
                     " is outside [0, 1]");
  const bool want_grad = dhidden != nullptr;
  std::vector<int32_t> copied_targets;  // (N) when the caller has no host copy
  if (!host_targets && N > 0) {
    copied_targets.resize(static_cast<size_t>(N));
    TRLHPC_CHECK_CUDA(cudaMemcpyAsync(copied_targets.data(), targets, static_cast<size_t>(N) * sizeof(int32_t),
                                      cudaMemcpyDeviceToHost, stream));
    TRLHPC_CHECK_CUDA(cudaStreamSynchronize(stream));  // waits for everything queued before the call
    host_targets = copied_targets.data();
  }
  int64_t n_valid = 0;  // validated on the host (the same message on every backend); compacted on the device
  for (int64_t t = 0; t < N; ++t) {
    const int32_t y = host_targets[t];
    if (y == kIgnoreIndex) continue;
    TRLHPC_REQUIRE(y >= 0 && y < V, "cross_entropy_fwd_bwd: target " + std::to_string(y) + " of token " +
                                        std::to_string(t) + " is outside [0, " + std::to_string(V) +
                                        ") and is not the ignore index -100");
    ++n_valid;
  }
  if (valid_tokens) *valid_tokens = n_valid;
  if (want_grad && N > 0)  // ignored tokens get a zero gradient; valid rows are overwritten below
    TRLHPC_CHECK_CUDA(cudaMemsetAsync(dhidden, 0, static_cast<size_t>(N * C) * sizeof(TD), stream));
  PendingLossRows pending;
  pending.stream = stream;
  pending.want_metrics = want_metrics_in && V < (int64_t{1} << 24);
  if (n_valid == 0) return pending;

  const int64_t chunk = std::min(chunk_tokens, n_valid);
  TRLHPC_ASSERT(N < (int64_t{1} << 31), "cross_entropy_fwd_bwd: token indices travel as int32");
  DeviceBuffer<int32_t> rows_d(allocator, n_valid);  // (n_valid)
  valid_rows_kernel<<<1, kCompactThreads, 0, stream>>>(targets, N, rows_d.get());
  TRLHPC_CHECK_CUDA_LAUNCH("valid_rows_kernel");
  DeviceBuffer<T> h_chunk(allocator, chunk * C);        // (chunk, C) gathered hidden rows
  DeviceBuffer<float> logits(allocator, chunk * V);     // (chunk, V), then dz when T is fp32
  constexpr bool kSeparateDz = !std::is_same<T, float>::value;
  DeviceBuffer<T> dz_copy(allocator, want_grad && kSeparateDz ? chunk * V : 0);  // (chunk, V) bf16 dz
  DeviceBuffer<float> dh_chunk(allocator, want_grad ? chunk * C : 0);           // (chunk, C)
  const bool want_metrics = pending.want_metrics;
  pending.n_valid = n_valid;
  pending.loss_rows = DeviceBuffer<double>(allocator, n_valid);                        // (n_valid)
  pending.entropy_rows = DeviceBuffer<double>(allocator, want_metrics ? n_valid : 0);  // (n_valid)
  pending.top1_rows = DeviceBuffer<int32_t>(allocator, want_metrics ? n_valid : 0);    // (n_valid)
  double* loss_rows = pending.loss_rows.get();
  double* entropy_rows = pending.entropy_rows.get();
  int32_t* top1_rows = pending.top1_rows.get();
  T* dz = kSeparateDz ? dz_copy.get() : reinterpret_cast<T*>(logits.get());

  for (int64_t c0 = 0; c0 < n_valid; c0 += chunk) {
    const int64_t cm = std::min(chunk, n_valid - c0);
    const int32_t* chunk_rows = rows_d.get() + c0;  // (cm)
    gather_rows_kernel<<<grid_for(cm * C, 256), 256, 0, stream>>>(hidden, chunk_rows, h_chunk.get(), cm, C);
    TRLHPC_CHECK_CUDA_LAUNCH("gather_rows_kernel");
    // logits (cm, V) = h_chunk (cm, C) @ weight^T
    matmul.run(h_chunk.get(), false, weight, true, logits.get(), data_type<T>(), CUDA_R_32F, cm, V, C, 1.0f, 0.0f,
               stream);
    if (logit_softcap > 0.0f) trlhpc::cuda::logit_softcap(logits.get(), cm * V, logit_softcap, stream);
    softmax_loss_kernel<T><<<static_cast<unsigned>(cm), kSoftmaxThreads, 0, stream>>>(
        logits.get(), chunk_rows, targets, V, want_grad, grad_scale, dz, loss_rows + c0,
        want_metrics ? entropy_rows + c0 : nullptr, want_metrics ? top1_rows + c0 : nullptr,
        logit_softcap, token_loss);
    TRLHPC_CHECK_CUDA_LAUNCH("softmax_loss_kernel");
    if (!want_grad) continue;
    // dh_chunk (cm, C) = dz (cm, V) @ weight (V, C), scattered to the token rows
    matmul.run(dz, false, weight, false, dh_chunk.get(), data_type<T>(), CUDA_R_32F, cm, C, V, 1.0f, 0.0f, stream);
    scatter_rows_kernel<<<grid_for(cm * C, 256), 256, 0, stream>>>(dh_chunk.get(), chunk_rows, dhidden, cm, C);
    TRLHPC_CHECK_CUDA_LAUNCH("scatter_rows_kernel");
    // dweight (V, C) += dz^T (V, cm) @ h_chunk (cm, C)
    if (dweight)
      matmul.run(dz, true, h_chunk.get(), false, dweight, data_type<T>(), CUDA_R_32F, V, C, cm, 1.0f, 1.0f, stream);
  }
  return pending;
}

template double cross_entropy_fwd_bwd<float, float>(const float*, const float*, const int32_t*, int64_t, int64_t,
                                                    int64_t, float, float*, float*, int64_t, int64_t*, Matmul&,
                                                    DeviceAllocator&, cudaStream_t, LossMetricSums*, const int32_t*,
                                                    float, const TokenLoss&);
template double cross_entropy_fwd_bwd<bf16, float>(const bf16*, const bf16*, const int32_t*, int64_t, int64_t, int64_t,
                                                   float, float*, float*, int64_t, int64_t*, Matmul&,
                                                   DeviceAllocator&, cudaStream_t, LossMetricSums*, const int32_t*,
                                                   float, const TokenLoss&);
template double cross_entropy_fwd_bwd<bf16, bf16>(const bf16*, const bf16*, const int32_t*, int64_t, int64_t, int64_t,
                                                  float, bf16*, float*, int64_t, int64_t*, Matmul&, DeviceAllocator&,
                                                  cudaStream_t, LossMetricSums*, const int32_t*, float,
                                                  const TokenLoss&);
template double cross_entropy_fwd_bwd<float, bf16>(const float*, const float*, const int32_t*, int64_t, int64_t,
                                                   int64_t, float, bf16*, float*, int64_t, int64_t*, Matmul&,
                                                   DeviceAllocator&, cudaStream_t, LossMetricSums*, const int32_t*,
                                                   float, const TokenLoss&);

#define TRLHPC_CE_LAUNCH(T, TD)                                                                                     \
  template PendingLossRows cross_entropy_launch<T, TD>(const T*, const T*, const int32_t*, int64_t, int64_t, int64_t, \
                                                       float, TD*, float*, int64_t, int64_t*, Matmul&,               \
                                                       DeviceAllocator&, cudaStream_t, bool, const int32_t*, float, \
                                                       const TokenLoss&);
TRLHPC_CE_LAUNCH(float, float)
TRLHPC_CE_LAUNCH(bf16, float)
TRLHPC_CE_LAUNCH(bf16, bf16)
TRLHPC_CE_LAUNCH(float, bf16)
#undef TRLHPC_CE_LAUNCH

}  // namespace trlhpc::cuda
