#pragma once
// What the attention kernels of attention_fwd.cuh and attention_bwd.cuh share: their launch parameters
// and the loads of tiles into shared memory (tile products and layouts are in attention_tiles.cuh).
// Included by attention.cu only, the one translation unit that launches these kernels.
#include <cmath>
#include <cstdint>

#include "attention_tiles.cuh"
#include "device_math.cuh"
#include "trlhpc/kernels/elementwise_math.hpp"

namespace trlhpc::cuda::attention_detail {

inline constexpr float kNegInf = -INFINITY;

// T: q, k, v, o, dout; G: the outputs o_out (forward) and dq, dk, dv (backward, accumulated): T, or
// fp32 when a caller accumulates over several calls (ring attention) and must round once at the end
// (docs/CUDA-REVIEW-FIXES.md defect 1).
template <class T, class G>
struct AttentionParams {
  const T *q, *k, *v, *o, *dout;
  const int32_t *q_pos, *k_pos, *q_doc, *k_doc;
  const float *lse_in, *delta;
  G* o_out;
  float* lse_out;
  G *dq, *dk, *dv;
  const TileRange *q_ranges, *k_ranges;  // (B, q_tiles), (B, k_tiles)
  int64_t Tq, Tk;
  int NH, KVH, HS, Br, Bc, q_tiles, k_tiles;
  float scale;
  int64_t window;  // effective_window(AttentionDims::window)
  float softcap;   // 0: none
};

// A scaled score as the softmax sees it: capped when the layer has a softcap (before the mask).
__device__ inline float capped_score(float s, float softcap) {
  return softcap > 0.0f ? math::softcap(s, softcap) : s;
}

// dst (rows, ld) <- `valid` rows of HS elements, `stride` apart, from src; rows past `valid` are zero
// (padded keys must hold finite values: their P is 0, and 0 * garbage could be NaN).
template <class T>
__device__ void load_rows(T* dst, int ld, const T* src, int64_t stride, int valid, int rows, int HS) {
  for (int idx = threadIdx.x; idx < rows * HS; idx += kAttnThreads) {
    const int r = idx / HS, d = idx % HS;
    dst[r * ld + d] = r < valid ? src[r * stride + d] : from_float<T>(0.0f);
  }
}

// pos/doc of `rows` tile rows starting at `first`; padded rows get pos INT_MAX (never attended).
__device__ inline void load_ids(int32_t* pos_s, int32_t* doc_s, const int32_t* pos, const int32_t* doc, int valid, int rows) {
  for (int r = threadIdx.x; r < rows; r += kAttnThreads) {
    pos_s[r] = r < valid ? pos[r] : INT_MAX;
    doc_s[r] = r < valid ? doc[r] : INT_MIN;
  }
}

template <class T>
__device__ T* smem_at(unsigned char* base, int offset) {
  return reinterpret_cast<T*>(base + offset);
}

}  // namespace trlhpc::cuda::attention_detail
