#pragma once
// The attention forward kernel (flash attention with position + document-id masks, GQA and masked-tile
// skipping) and the log-sum-exp merge of two partial results (ring attention). Launched by attention.cu.
#include <algorithm>

#include "attention_kernel_common.cuh"

namespace trlhpc::cuda::attention_detail {

// ---- forward ----------------------------------------------------------------------------------------
// Block (query tile, head h, batch row b). Thread group of tpr = 256 / Br threads per query row runs the
// online softmax of that row.
template <class T, class G>
__global__ void __launch_bounds__(kAttnThreads) attention_fwd_kernel(const AttentionParams<T, G> p) {
  extern __shared__ __align__(128) unsigned char smem[];
  const AttentionSmem L = smem_plan<T>(AttentionPass::kForward, p.Br, p.Bc, p.HS);
  const int qt = blockIdx.x, h = blockIdx.y, Br = p.Br, Bc = p.Bc, HS = p.HS;
  const int64_t b = blockIdx.z, i0 = int64_t{qt} * Br;
  const int rows = static_cast<int>(std::min<int64_t>(Br, p.Tq - i0));
  const int g = h / (p.NH / p.KVH);
  T* q_s = smem_at<T>(smem, L.q);           // (Br, ldo)
  T* k_s = smem_at<T>(smem, L.k);           // (Bc, ldo)
  T* v_s = smem_at<T>(smem, L.v);           // (Bc, ldo)
  float* s_s = smem_at<float>(smem, L.s);   // (Br, lds) scores
  T* p_s = smem_at<T>(smem, L.p);           // (Br, ldp) probabilities (aliases s_s for fp32)
  float* o_s = smem_at<float>(smem, L.acc1);  // (Br, ldacc) unnormalised output
  float* inv_l_s = smem_at<float>(smem, L.row_a), *lse_s = smem_at<float>(smem, L.row_b);  // (Br) each
  int32_t* kpos_s = smem_at<int32_t>(smem, L.k_pos), *kdoc_s = smem_at<int32_t>(smem, L.k_doc);  // (Bc) each

  load_rows(q_s, L.ldo, p.q + ((b * p.Tq + i0) * p.NH + h) * HS, int64_t{p.NH} * HS, rows, Br, HS);
  for (int idx = threadIdx.x; idx < Br * HS; idx += kAttnThreads) o_s[idx / HS * L.ldacc + idx % HS] = 0.0f;
  const int tpr = kAttnThreads / Br, row = threadIdx.x / tpr, lane = threadIdx.x % tpr;
  const bool row_valid = row < rows;
  const int32_t qp = row_valid ? p.q_pos[b * p.Tq + i0 + row] : INT_MIN;
  const int32_t qd = row_valid ? p.q_doc[b * p.Tq + i0 + row] : INT_MIN;
  const TileRange q_range = p.q_ranges[b * p.q_tiles + qt];
  float m = kNegInf, l = 0.0f;  // running max and sum of the row (replicated over its thread group)

  for (int kt = 0; kt < p.k_tiles; ++kt) {
    const int64_t j0 = int64_t{kt} * Bc;
    const int k_valid = static_cast<int>(std::min<int64_t>(Bc, p.Tk - j0));
    const TileMask mask = classify(q_range, p.k_ranges[b * p.k_tiles + kt], k_valid < Bc, p.window);
    if (mask == TileMask::kSkip) continue;
    __syncthreads();  // the previous tile's products are done with k_s, v_s, p_s
    load_rows(k_s, L.ldo, p.k + ((b * p.Tk + j0) * p.KVH + g) * HS, int64_t{p.KVH} * HS, k_valid, Bc, HS);
    load_rows(v_s, L.ldo, p.v + ((b * p.Tk + j0) * p.KVH + g) * HS, int64_t{p.KVH} * HS, k_valid, Bc, HS);
    load_ids(kpos_s, kdoc_s, p.k_pos + b * p.Tk + j0, p.k_doc + b * p.Tk + j0, k_valid, Bc);
    __syncthreads();
    tile_mma<RowMajor, ColMajor>(s_s, L.lds, q_s, L.ldo, k_s, L.ldo, Br, Bc, HS, false);  // S = Q K^T
    __syncthreads();

    float* s_row = s_s + row * L.lds;  // (Bc)
    T* p_row = p_s + row * L.ldp;      // (Bc)
    float tile_max = kNegInf;
    for (int c = lane; c < Bc; c += tpr) {
      const bool allowed =
          mask == TileMask::kFull || (kdoc_s[c] == qd && kpos_s[c] <= qp && in_window(qp, kpos_s[c], p.window));
      const float x = allowed ? capped_score(s_row[c] * p.scale, p.softcap) : kNegInf;
      s_row[c] = x;
      tile_max = fmaxf(tile_max, x);
    }
    const float m_new = fmaxf(m, group_max(tile_max, tpr));
    const float alpha = m_new == kNegInf ? 1.0f : __expf(m - m_new);  // exp(-inf) = 0 drops an empty history
    float tile_sum = 0.0f;
    for (int c = lane; c < Bc; c += tpr) {
      const float e = m_new == kNegInf ? 0.0f : __expf(s_row[c] - m_new);
      tile_sum += e;
      p_row[c] = from_float<T>(e);
    }
    l = l * alpha + group_sum(tile_sum, tpr);
    m = m_new;
    for (int d = lane; d < HS; d += tpr) o_s[row * L.ldacc + d] *= alpha;
    __syncthreads();
    tile_mma<RowMajor, RowMajor>(o_s, L.ldacc, p_s, L.ldp, v_s, L.ldo, Br, HS, Bc, true);  // O += P V
  }

  if (lane == 0) {
    inv_l_s[row] = l > 0.0f ? 1.0f / l : 0.0f;
    lse_s[row] = l > 0.0f ? m + logf(l) : kNegInf;
  }
  __syncthreads();
  G* o_rows = p.o_out + ((b * p.Tq + i0) * p.NH + h) * HS;  // row r at r * NH * HS
  for (int idx = threadIdx.x; idx < rows * HS; idx += kAttnThreads) {
    const int r = idx / HS, d = idx % HS;
    o_rows[int64_t{r} * p.NH * HS + d] = from_float<G>(o_s[r * L.ldacc + d] * inv_l_s[r]);
  }
  for (int r = threadIdx.x; r < rows; r += kAttnThreads) p.lse_out[(b * p.NH + h) * p.Tq + i0 + r] = lse_s[r];
}

// ---- merge ------------------------------------------------------------------------------------------
// One warp per (b, t, h) row.
template <class T>
__global__ void attention_merge_kernel(T* __restrict__ o_acc, float* __restrict__ lse_acc, const T* __restrict__ o_blk,
                                       const float* __restrict__ lse_blk, int64_t B, int64_t Tn, int NH, int HS) {
  const int64_t row = blockIdx.x * int64_t{blockDim.x / 32} + threadIdx.x / 32;  // (b * T + t) * NH + h
  if (row >= B * Tn * NH) return;
  const int lane = threadIdx.x % 32;
  const int64_t h = row % NH, t = row / NH % Tn, b = row / NH / Tn;
  const int64_t li = (b * NH + h) * Tn + t;
  const float la = lse_acc[li], lb = lse_blk[li];
  if (lb == kNegInf) return;  // the block saw no allowed key
  float wa = 0.0f, wb = 1.0f, total = lb;
  if (la != kNegInf) {
    const double hi = fmax(static_cast<double>(la), static_cast<double>(lb));
    const double sum = hi + log(exp(la - hi) + exp(lb - hi));
    wa = static_cast<float>(exp(la - sum));
    wb = static_cast<float>(exp(lb - sum));
    total = static_cast<float>(sum);
  }
  for (int d = lane; d < HS; d += 32)
    o_acc[row * HS + d] = from_float<T>(to_float(o_acc[row * HS + d]) * wa + to_float(o_blk[row * HS + d]) * wb);
  __syncwarp();  // every lane has read lse_acc[li] before lane 0 overwrites it
  if (lane == 0) lse_acc[li] = total;
}

}  // namespace trlhpc::cuda::attention_detail
