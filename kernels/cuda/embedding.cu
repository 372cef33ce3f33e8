// Embedding forward and the sort-based deterministic backward (see embedding.cuh).
#include <cub/device/device_radix_sort.cuh>

#include "device_math.cuh"
#include "embedding.cuh"
#include "trlhpc/core/cuda_check.hpp"

namespace trlhpc::cuda {

namespace {

template <class TT, class TO>
__global__ void embedding_fwd_kernel(const int32_t* __restrict__ ids, const TT* __restrict__ table,
                                     TO* __restrict__ out, int64_t N, int64_t C, int64_t V, int64_t vocab_start) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < N * C; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t n = i / C, c = i % C;
    const int64_t row = static_cast<int64_t>(ids[n]) - vocab_start;
    out[i] = from_float<TO>(row >= 0 && row < V ? to_float(table[row * C + c]) : 0.0f);
  }
}

// keys (N): the table row of each token, or V for tokens outside the slice; order (N) = 0..N-1.
__global__ void embedding_keys_kernel(const int32_t* __restrict__ ids, int64_t N, int64_t V, int64_t vocab_start,
                                      uint32_t* __restrict__ keys, int32_t* __restrict__ order) {
  for (int64_t n = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; n < N; n += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = static_cast<int64_t>(ids[n]) - vocab_start;
    keys[n] = static_cast<uint32_t>(row >= 0 && row < V ? row : V);
    order[n] = static_cast<int32_t>(n);
  }
}

// Block i owns sorted position i if it starts a run of equal rows; it adds the run's dout rows into
// the table row in token order (one thread per column).
template <class TD>
__global__ void embedding_runs_kernel(const uint32_t* __restrict__ keys, const int32_t* __restrict__ order,
                                      const TD* __restrict__ dout, float* __restrict__ dtable, int64_t N, int64_t C,
                                      int64_t V) {
  const int64_t i = blockIdx.x;
  const uint32_t key = keys[i];
  if (key >= V || (i > 0 && keys[i - 1] == key)) return;
  int64_t end = i + 1;
  while (end < N && keys[end] == key) ++end;
  float* dst = dtable + static_cast<int64_t>(key) * C;  // (C)
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    float acc = dst[c];
    for (int64_t j = i; j < end; ++j) acc += to_float(dout[static_cast<int64_t>(order[j]) * C + c]);
    dst[c] = acc;
  }
}

int bits_for(int64_t value) {  // bits to represent 0..value
  int bits = 1;
  while (bits < 32 && (int64_t{1} << bits) <= value) ++bits;
  return bits;
}

}  // namespace

template <class TT, class TO>
void embedding_fwd(const int32_t* ids, const TT* table, TO* out, int64_t N, int64_t C, int64_t V, int64_t vocab_start,
                   cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  embedding_fwd_kernel<<<grid_for(N * C, 256), 256, 0, stream>>>(ids, table, out, N, C, V, vocab_start);
  TRLHPC_CHECK_CUDA_LAUNCH("embedding_fwd_kernel");
}

template <class TD>
void embedding_bwd(const int32_t* ids, const TD* dout, float* dtable, int64_t N, int64_t C, int64_t V,
                   int64_t vocab_start, DeviceAllocator& allocator, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  DeviceBuffer<uint32_t> keys(allocator, N), sorted_keys(allocator, N);  // (N) each
  DeviceBuffer<int32_t> order(allocator, N), sorted_order(allocator, N);  // (N) each
  embedding_keys_kernel<<<grid_for(N, 256), 256, 0, stream>>>(ids, N, V, vocab_start, keys.get(), order.get());
  TRLHPC_CHECK_CUDA_LAUNCH("embedding_keys_kernel");
  const int end_bit = bits_for(V);
  size_t temp_bytes = 0;
  TRLHPC_CHECK_CUDA(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys.get(), sorted_keys.get(), order.get(),
                                                    sorted_order.get(), N, 0, end_bit, stream));
  DeviceBuffer<unsigned char> temp(allocator, static_cast<int64_t>(temp_bytes));
  TRLHPC_CHECK_CUDA(cub::DeviceRadixSort::SortPairs(temp.get(), temp_bytes, keys.get(), sorted_keys.get(), order.get(),
                                                    sorted_order.get(), N, 0, end_bit, stream));
  embedding_runs_kernel<<<static_cast<unsigned>(N), 256, 0, stream>>>(sorted_keys.get(), sorted_order.get(), dout,
                                                                      dtable, N, C, V);
  TRLHPC_CHECK_CUDA_LAUNCH("embedding_runs_kernel");
}

template void embedding_fwd<float, float>(const int32_t*, const float*, float*, int64_t, int64_t, int64_t, int64_t,
                                          cudaStream_t);
template void embedding_fwd<float, bf16>(const int32_t*, const float*, bf16*, int64_t, int64_t, int64_t, int64_t,
                                         cudaStream_t);
template void embedding_fwd<bf16, bf16>(const int32_t*, const bf16*, bf16*, int64_t, int64_t, int64_t, int64_t,
                                        cudaStream_t);
template void embedding_fwd<bf16, float>(const int32_t*, const bf16*, float*, int64_t, int64_t, int64_t, int64_t,
                                         cudaStream_t);
template void embedding_bwd<float>(const int32_t*, const float*, float*, int64_t, int64_t, int64_t, int64_t,
                                   DeviceAllocator&, cudaStream_t);
template void embedding_bwd<bf16>(const int32_t*, const bf16*, float*, int64_t, int64_t, int64_t, int64_t,
                                  DeviceAllocator&, cudaStream_t);

}  // namespace trlhpc::cuda
