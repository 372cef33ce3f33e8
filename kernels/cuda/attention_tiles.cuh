#pragma once
// Block-level building blocks of the attention kernels (attention_fwd.cuh, attention_bwd.cuh), kept apart so that file shows
// the algorithm: tile products in shared memory, shared-memory layouts, and the tile mask test.
//
// Tile product: C (M x N, fp32, row stride ldc) = or += A (M x K) B (K x N), computed by the whole
// block (kAttnThreads threads), operands in shared memory. The storage layout of each operand is a
// compile-time tag (nvcuda::wmma::row_major / col_major), so one call covers the three products of
// flash attention: S = Q K^T (A row, B col), O += P V (row, row), dV += P^T dO (col, row).
//   * float operands: SIMT FMA. Thread (tr, tc) of a 16 x 16 grid owns rows tr + 16 i and columns
//     tc + 16 j, so a warp reads one broadcast A value and 16 distinct B rows or columns per step;
//     operand row strides are odd (padding 1) so those 16 rows fall into distinct banks.
//   * bf16 operands: tensor cores through WMMA 16x16x16 fragments with fp32 accumulation (sm_80+);
//     warps take output 16x16 tiles round-robin. M, N, K must be multiples of 16; row strides are
//     multiples of 8 elements (WMMA's rule) padded by 8 (bf16) or 4 (fp32) against bank conflicts.
// Callers own the __syncthreads() around each product.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <climits>
#include <cstdint>

#include "trlhpc/kernels/attention_smem_plan.hpp"

namespace trlhpc::cuda::attention_detail {

inline constexpr int kAttnThreads = 256;  // 8 warps; the 16 x 16 SIMT thread grid

using RowMajor = nvcuda::wmma::row_major;
using ColMajor = nvcuda::wmma::col_major;

// Element (r, k) of an operand stored with row stride ld: row-major a[r ld + k], col-major a[k ld + r].
template <class Layout>
struct Strides;
template <>
struct Strides<RowMajor> {
  __device__ static int row(int ld) { return ld; }
  __device__ static int col(int) { return 1; }
};
template <>
struct Strides<ColMajor> {
  __device__ static int row(int) { return 1; }
  __device__ static int col(int ld) { return ld; }
};

template <class LayoutA, class LayoutB>
__device__ inline void tile_mma(float* c, int ldc, const float* a, int lda, const float* b, int ldb, int M, int N,
                                int K, bool accumulate) {
  const int tr = threadIdx.x / 16, tc = threadIdx.x % 16;
  const int ars = Strides<LayoutA>::row(lda), acs = Strides<LayoutA>::col(lda);
  const int brs = Strides<LayoutB>::row(ldb), bcs = Strides<LayoutB>::col(ldb);
  // M <= 64 (4 rows per thread); N in chunks of 128 columns (8 per thread). A larger M would leave rows
  // unwritten: stop the kernel instead of computing garbage (docs/CUDA-REVIEW-FIXES.md defect 8).
  if (M > kernels::kMaxAttentionTileRows) __trap();
  for (int n0 = 0; n0 < N; n0 += 128) {
    float acc[4][8];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int r = tr + 16 * i, col = n0 + tc + 16 * j;
        acc[i][j] = accumulate && r < M && col < N ? c[r * ldc + col] : 0.0f;
      }
    for (int k = 0; k < K; ++k) {
      float av[4], bv[8];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = tr + 16 * i;
        av[i] = r < M ? a[r * ars + k * acs] : 0.0f;
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int col = n0 + tc + 16 * j;
        bv[j] = col < N ? b[k * brs + col * bcs] : 0.0f;
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int r = tr + 16 * i, col = n0 + tc + 16 * j;
        if (r < M && col < N) c[r * ldc + col] = acc[i][j];
      }
  }
}

// Start of the 16x16 fragment at (row0, col0) of an operand with the given storage layout.
template <class Layout>
__device__ inline const __nv_bfloat16* fragment_at(const __nv_bfloat16* base, int ld, int row0, int col0) {
  return base + row0 * Strides<Layout>::row(ld) + col0 * Strides<Layout>::col(ld);
}

template <class LayoutA, class LayoutB>
__device__ inline void tile_mma(float* c, int ldc, const __nv_bfloat16* a, int lda, const __nv_bfloat16* b, int ldb,
                                int M, int N, int K, bool accumulate) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  using namespace nvcuda;
  const int warp = threadIdx.x / 32, tiles_n = N / 16, tiles = (M / 16) * tiles_n;
  for (int t = warp; t < tiles; t += kAttnThreads / 32) {
    const int r0 = t / tiles_n * 16, c0 = t % tiles_n * 16;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    if (accumulate)
      wmma::load_matrix_sync(acc, c + r0 * ldc + c0, ldc, wmma::mem_row_major);
    else
      wmma::fill_fragment(acc, 0.0f);
    for (int k0 = 0; k0 < K; k0 += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, LayoutA> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, LayoutB> fb;
      wmma::load_matrix_sync(fa, fragment_at<LayoutA>(a, lda, r0, k0), lda);
      wmma::load_matrix_sync(fb, fragment_at<LayoutB>(b, ldb, k0, c0), ldb);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(c + r0 * ldc + c0, acc, ldc, wmma::mem_row_major);
  }
#else
  __trap();  // bf16 tensor cores need sm_80; attention.cu refuses bf16 on older devices
#endif
}

// Row paddings per storage type (see the header comment; attention_smem_plan.hpp applies the same).
template <class T>
struct TilePad;
template <>
struct TilePad<float> {
  static constexpr int kOperand = 1, kAccumulator = 1;
  static constexpr bool kSeparateProbabilities = false;  // P and dS overwrite S and dP in place
};
template <>
struct TilePad<__nv_bfloat16> {
  static constexpr int kOperand = 8, kAccumulator = 4;
  static constexpr bool kSeparateProbabilities = true;  // P and dS need bf16 copies for the MMA
};

// The shared-memory plan of each kernel (trlhpc/kernels/attention_smem_plan.hpp: host and device run
// the same code).
using kernels::AttentionPass;
using kernels::AttentionSmem;
template <class T>
__host__ __device__ inline AttentionSmem smem_plan(AttentionPass pass, int Br, int Bc, int HS) {
  return AttentionSmem::make(TilePad<T>::kSeparateProbabilities, pass, Br, Bc, HS);
}

// Min/max of positions and doc ids over one tile of rows (computed once per call by a small kernel).
struct TileRange {
  int32_t pos_min, pos_max, doc_min, doc_max;
};

enum class TileMask : int { kSkip, kFull, kPartial };

// The sliding window as the kernels test it (AttentionDims::window 0 = none = longer than any
// position difference, so the test never masks).
__host__ __device__ inline int64_t effective_window(int64_t window) { return window == 0 ? INT64_MAX : window; }

// Key at kp inside the window of the query at qp (pos_q - pos_k < window; int64: no overflow).
__device__ inline bool in_window(int32_t qp, int32_t kp, int64_t window) { return int64_t{qp} - kp < window; }

// kSkip: every key is later than every query, every key is at least `window` behind every query, or
// the doc-id ranges are disjoint: the pair is skipped.
// kFull: one single document on both sides, no key later than any query, every key within the window
// of every query, no padded key: no mask.
__device__ inline TileMask classify(const TileRange& q, const TileRange& k, bool keys_padded, int64_t window) {
  if (k.pos_min > q.pos_max || k.doc_max < q.doc_min || k.doc_min > q.doc_max) return TileMask::kSkip;
  if (!in_window(q.pos_min, k.pos_max, window)) return TileMask::kSkip;
  const bool one_doc = q.doc_min == q.doc_max && k.doc_min == k.doc_max && q.doc_min == k.doc_min;
  if (one_doc && k.pos_max <= q.pos_min && in_window(q.pos_max, k.pos_min, window) && !keys_padded)
    return TileMask::kFull;
  return TileMask::kPartial;
}

}  // namespace trlhpc::cuda::attention_detail
