#pragma once
// Deterministic column sums out (C) += sum_r f(r, c) over the rows of an (N, C) operand, used by the
// parameter gradients of bias and RMSNorm weights (parameter grads accumulate).
//
// No atomics: kernel 1 gives each block a (32 columns) x (kRowsPerBlock rows) tile; its 8 row lanes sum
// fixed strided rows and the lanes are added in lane order, giving partial (row_blocks, C). Kernel 2
// adds the partials of each column in row-block order. The summation tree depends only on N, so the
// result is bitwise reproducible. Kernel 1's blocks stride over the row blocks (column_reduce_grid.hpp:
// gridDim.y stops at 65,535), so N is not limited to 16.77M rows. Header-only templates: `Term` is a functor with
// `__device__ float operator()(int64_t r, int64_t c) const`.
#include <cuda_runtime.h>

#include <cstdint>

#include "device_allocator.cuh"
#include "trlhpc/core/cuda_check.hpp"
#include "trlhpc/kernels/column_reduce_grid.hpp"

namespace trlhpc::cuda {

inline constexpr int kColumnReduceRows = 256;  // rows per block of kernel 1

// partial (row_blocks, C): row block rb's column sums, for rb = blockIdx.y, blockIdx.y + gridDim.y, ...
template <class Term>
__global__ void column_partials_kernel(Term term, int64_t N, int64_t C, int64_t row_blocks,
                                       float* __restrict__ partial) {
  __shared__ float lanes[8][33];
  const int64_t c = blockIdx.x * int64_t{32} + threadIdx.x;
  for (int64_t rb = blockIdx.y; rb < row_blocks; rb += gridDim.y) {
    const int64_t r0 = rb * kColumnReduceRows;
    const int64_t r1 = r0 + kColumnReduceRows < N ? r0 + kColumnReduceRows : N;
    float s = 0.0f;
    if (c < C)
      for (int64_t r = r0 + threadIdx.y; r < r1; r += 8) s += term(r, c);
    __syncthreads();  // the previous row block's lanes have been read
    lanes[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
      float total = 0.0f;
      for (int l = 0; l < 8; ++l) total += lanes[l][threadIdx.x];
      partial[rb * C + c] = total;
    }
  }
}

// out (C) += sum over b of partial (blocks, C), in b order.
template <int kUnused = 0>
__global__ void add_column_partials_kernel(const float* __restrict__ partial, int64_t blocks, int64_t C,
                                           float* __restrict__ out) {
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < C; c += int64_t{gridDim.x} * blockDim.x) {
    float s = 0.0f;
    for (int64_t b = 0; b < blocks; ++b) s += partial[b * C + c];
    out[c] += s;
  }
}

// out (C) += sum_r term(r, c) for r < N.
template <class Term>
void column_sum_accumulate(const Term& term, int64_t N, int64_t C, float* out, DeviceAllocator& allocator,
                           cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  const kernels::ColumnReduceGrid g = kernels::column_reduce_grid(N, C, kColumnReduceRows);
  DeviceBuffer<float> partial(allocator, g.row_blocks * C);  // (row_blocks, C)
  const dim3 grid(static_cast<unsigned>(g.x), static_cast<unsigned>(g.y));
  column_partials_kernel<<<grid, dim3(32, 8), 0, stream>>>(term, N, C, g.row_blocks, partial.get());
  TRLHPC_CHECK_CUDA_LAUNCH("column_partials_kernel");
  add_column_partials_kernel<<<static_cast<unsigned>((C + 255) / 256), 256, 0, stream>>>(partial.get(), g.row_blocks,
                                                                                          C, out);
  TRLHPC_CHECK_CUDA_LAUNCH("add_column_partials_kernel");
}

}  // namespace trlhpc::cuda
