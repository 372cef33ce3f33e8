// Layout glue for cuDNN's fused attention (cudnn_attention_glue.cuh): memory-bound copies, one thread
// per element, grid-stride so any size fits a 1-D grid.
#include "cudnn_attention_glue.cuh"
#include "trlhpc/core/cuda_check.hpp"

namespace trlhpc::cuda {
namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 16 ? (b < 1 ? 1 : b) : 65535 * 16);
}

// to_lse: stats -> lse; else lse -> stats. Element e = (s * NH + h) * L + i of the stats tensor.
template <bool to_lse>
__global__ void stats_lse_kernel(const float* from, float* to, const int64_t* token_start, const int32_t* length,
                                 int64_t sequences, int NH, int64_t L, int64_t T) {
  const int64_t n = sequences * NH * L;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n; e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = e % L, sh = e / L;
    const int64_t s = sh / NH, h = sh % NH;
    if (i >= length[s]) continue;
    const int64_t flat = token_start[s] + i;  // b T + t
    const int64_t b = flat / T, t = flat % T;
    const int64_t lse_index = (b * NH + h) * T + t;
    if constexpr (to_lse)
      to[lse_index] = from[e];
    else
      to[e] = from[lse_index];
  }
}

template <class G, bool accumulate>
__global__ void output_kernel(G* dst, const __nv_bfloat16* src, int64_t n) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n; e += int64_t{gridDim.x} * blockDim.x) {
    float v = __bfloat162float(src[e]);
    if constexpr (accumulate) {
      if constexpr (sizeof(G) == 4)
        v += dst[e];
      else
        v += __bfloat162float(dst[e]);
    }
    if constexpr (sizeof(G) == 4)
      dst[e] = v;
    else
      dst[e] = __float2bfloat16_rn(v);
  }
}

}  // namespace

void cudnn_stats_to_lse(const float* stats, float* lse, const int64_t* token_start, const int32_t* length,
                        int64_t sequences, int NH, int64_t max_length, int64_t T, cudaStream_t stream) {
  const int64_t n = sequences * NH * max_length;
  if (n == 0) return;
  stats_lse_kernel<true><<<blocks_for(n), kThreads, 0, stream>>>(stats, lse, token_start, length, sequences, NH,
                                                                  max_length, T);
  TRLHPC_CHECK_CUDA(cudaGetLastError());
}

void cudnn_lse_to_stats(const float* lse, float* stats, const int64_t* token_start, const int32_t* length,
                        int64_t sequences, int NH, int64_t max_length, int64_t T, cudaStream_t stream) {
  const int64_t n = sequences * NH * max_length;
  if (n == 0) return;
  stats_lse_kernel<false><<<blocks_for(n), kThreads, 0, stream>>>(lse, stats, token_start, length, sequences, NH,
                                                                   max_length, T);
  TRLHPC_CHECK_CUDA(cudaGetLastError());
}

template <class G>
void cudnn_store_output(G* dst, const __nv_bfloat16* src, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  output_kernel<G, false><<<blocks_for(n), kThreads, 0, stream>>>(dst, src, n);
  TRLHPC_CHECK_CUDA(cudaGetLastError());
}

template <class G>
void cudnn_accumulate_output(G* dst, const __nv_bfloat16* src, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  output_kernel<G, true><<<blocks_for(n), kThreads, 0, stream>>>(dst, src, n);
  TRLHPC_CHECK_CUDA(cudaGetLastError());
}

template void cudnn_store_output<float>(float*, const __nv_bfloat16*, int64_t, cudaStream_t);
template void cudnn_store_output<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, int64_t, cudaStream_t);
template void cudnn_accumulate_output<float>(float*, const __nv_bfloat16*, int64_t, cudaStream_t);
template void cudnn_accumulate_output<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, int64_t, cudaStream_t);

}  // namespace trlhpc::cuda
