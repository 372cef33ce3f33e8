#pragma once
// The attention backward kernels: delta = rowsum(dO * O), then dK/dV per key tile and dQ per query tile,
// recomputing P from the forward's log-sum-exp. Launched by attention.cu.
#include <algorithm>

#include "attention_kernel_common.cuh"

namespace trlhpc::cuda::attention_detail {

// ---- backward ---------------------------------------------------------------------------------------
// delta (B, NH, Tq) = rowsum(dout * o), one warp per (b, i, h).
template <class T>
__global__ void attention_delta_kernel(const T* __restrict__ o, const T* __restrict__ dout, float* __restrict__ delta,
                                       int64_t B, int64_t Tq, int NH, int HS) {
  const int64_t row = blockIdx.x * int64_t{blockDim.x / 32} + threadIdx.x / 32;  // (b * Tq + i) * NH + h
  if (row >= B * Tq * NH) return;
  const int lane = threadIdx.x % 32;
  float s = 0.0f;
  for (int d = lane; d < HS; d += 32) s += to_float(o[row * HS + d]) * to_float(dout[row * HS + d]);
  s = group_sum(s, 32);
  const int64_t h = row % NH, i = row / NH % Tq, b = row / NH / Tq;
  if (lane == 0) delta[(b * NH + h) * Tq + i] = s;
}

// Loads the Br query-side rows of query tile qt of head h: q, dout, lse, delta, positions, doc ids.
template <class T, class G>
__device__ void load_query_side(const AttentionParams<T, G>& p, const AttentionSmem& L, unsigned char* smem, int64_t b,
                                int h, int qt) {
  const int Br = p.Br, HS = p.HS;
  const int64_t i0 = int64_t{qt} * Br;
  const int rows = static_cast<int>(std::min<int64_t>(Br, p.Tq - i0));
  const int64_t first = (b * p.Tq + i0) * p.NH + h;
  load_rows(smem_at<T>(smem, L.q), L.ldo, p.q + first * HS, int64_t{p.NH} * HS, rows, Br, HS);
  load_rows(smem_at<T>(smem, L.dout), L.ldo, p.dout + first * HS, int64_t{p.NH} * HS, rows, Br, HS);
  float* lse_s = smem_at<float>(smem, L.row_a);
  float* delta_s = smem_at<float>(smem, L.row_b);
  for (int r = threadIdx.x; r < Br; r += kAttnThreads) {
    lse_s[r] = r < rows ? p.lse_in[(b * p.NH + h) * p.Tq + i0 + r] : kNegInf;  // -inf: P = 0 on padded rows
    delta_s[r] = r < rows ? p.delta[(b * p.NH + h) * p.Tq + i0 + r] : 0.0f;
  }
  load_ids(smem_at<int32_t>(smem, L.q_pos), smem_at<int32_t>(smem, L.q_doc), p.q_pos + b * p.Tq + i0,
           p.q_doc + b * p.Tq + i0, rows, Br);
}

// Loads key tile kt of kv head g: k, v, positions, doc ids.
template <class T, class G>
__device__ void load_key_side(const AttentionParams<T, G>& p, const AttentionSmem& L, unsigned char* smem, int64_t b,
                              int g, int kt) {
  const int Bc = p.Bc, HS = p.HS;
  const int64_t j0 = int64_t{kt} * Bc;
  const int k_valid = static_cast<int>(std::min<int64_t>(Bc, p.Tk - j0));
  load_rows(smem_at<T>(smem, L.k), L.ldo, p.k + ((b * p.Tk + j0) * p.KVH + g) * HS, int64_t{p.KVH} * HS, k_valid, Bc,
            HS);
  load_rows(smem_at<T>(smem, L.v), L.ldo, p.v + ((b * p.Tk + j0) * p.KVH + g) * HS, int64_t{p.KVH} * HS, k_valid, Bc,
            HS);
  load_ids(smem_at<int32_t>(smem, L.k_pos), smem_at<int32_t>(smem, L.k_doc), p.k_pos + b * p.Tk + j0,
           p.k_doc + b * p.Tk + j0, k_valid, Bc);
}

// With q, dout, k, v of one tile pair loaded: S = Q K^T, dP = dO V^T, then P = exp(scale S - lse) on
// allowed pairs and dS = P (dP - delta), stored as T in p (if want_p) and ds; with a softcap c,
// P = exp(c t - lse) and dS = P (dP - delta) (1 - t^2), t = tanh(scale S / c).
template <class T, class G>
__device__ void probabilities_and_ds(const AttentionParams<T, G>& p, const AttentionSmem& L, unsigned char* smem,
                                     TileMask mask, bool want_p) {
  const int Br = p.Br, Bc = p.Bc, HS = p.HS;
  float* s_s = smem_at<float>(smem, L.s);    // (Br, lds)
  float* dp_s = smem_at<float>(smem, L.dp);  // (Br, lds)
  tile_mma<RowMajor, ColMajor>(s_s, L.lds, smem_at<T>(smem, L.q), L.ldo, smem_at<T>(smem, L.k), L.ldo, Br, Bc, HS,
                               false);
  tile_mma<RowMajor, ColMajor>(dp_s, L.lds, smem_at<T>(smem, L.dout), L.ldo, smem_at<T>(smem, L.v), L.ldo, Br, Bc, HS,
                               false);
  __syncthreads();
  const float* lse_s = smem_at<float>(smem, L.row_a);
  const float* delta_s = smem_at<float>(smem, L.row_b);
  const int32_t *qpos_s = smem_at<int32_t>(smem, L.q_pos), *qdoc_s = smem_at<int32_t>(smem, L.q_doc);
  const int32_t *kpos_s = smem_at<int32_t>(smem, L.k_pos), *kdoc_s = smem_at<int32_t>(smem, L.k_doc);
  T* p_s = want_p ? smem_at<T>(smem, L.p) : nullptr;  // (Br, ldp), aliases s_s for fp32; none in the dQ pass
  T* ds_s = smem_at<T>(smem, L.ds);  // (Br, ldp), aliases dp_s for fp32
  for (int idx = threadIdx.x; idx < Br * Bc; idx += kAttnThreads) {
    const int r = idx / Bc, c = idx % Bc;
    const float lse = lse_s[r];
    const bool allowed =
        lse != kNegInf && (mask == TileMask::kFull || (kdoc_s[c] == qdoc_s[r] && kpos_s[c] <= qpos_s[r] &&
                                                       in_window(qpos_s[r], kpos_s[c], p.window)));
    float prob, ds;
    if (p.softcap > 0.0f) {  // P = exp(c t - lse), dS = P (dP - delta) (1 - t^2), t = tanh(s / c)
      const float t = tanhf(s_s[r * L.lds + c] * p.scale / p.softcap);
      prob = allowed ? __expf(t * p.softcap - lse) : 0.0f;
      ds = prob * (dp_s[r * L.lds + c] - delta_s[r]) * (1.0f - t * t);
    } else {
      prob = allowed ? __expf(s_s[r * L.lds + c] * p.scale - lse) : 0.0f;
      ds = prob * (dp_s[r * L.lds + c] - delta_s[r]);
    }
    if (want_p) p_s[r * L.ldp + c] = from_float<T>(prob);
    ds_s[r * L.ldp + c] = from_float<T>(ds);
  }
}

// dst (rows, HS) of global rows `stride` apart += factor * acc (rows, ldacc).
template <class T>
__device__ void accumulate_rows(T* dst, int64_t stride, const float* acc, int ldacc, int rows, int HS, float factor) {
  for (int idx = threadIdx.x; idx < rows * HS; idx += kAttnThreads) {
    const int r = idx / HS, d = idx % HS;
    T* out = dst + r * stride + d;
    *out = from_float<T>(to_float(*out) + factor * acc[r * ldacc + d]);
  }
}

// Block (key tile kt, kv head g, batch row b): owns those dk/dv rows.
template <class T, class G>
__global__ void __launch_bounds__(kAttnThreads) attention_bwd_dkdv_kernel(const AttentionParams<T, G> p) {
  extern __shared__ __align__(128) unsigned char smem[];
  const AttentionSmem L = smem_plan<T>(AttentionPass::kBackwardDkDv, p.Br, p.Bc, p.HS);
  const int kt = blockIdx.x, g = blockIdx.y, Bc = p.Bc, HS = p.HS, group = p.NH / p.KVH;
  const int64_t b = blockIdx.z, j0 = int64_t{kt} * Bc;
  const int k_valid = static_cast<int>(std::min<int64_t>(Bc, p.Tk - j0));
  float* dk_s = smem_at<float>(smem, L.acc1);  // (Bc, ldacc)
  float* dv_s = smem_at<float>(smem, L.acc2);  // (Bc, ldacc)
  load_key_side(p, L, smem, b, g, kt);
  for (int idx = threadIdx.x; idx < Bc * HS; idx += kAttnThreads)
    dk_s[idx / HS * L.ldacc + idx % HS] = dv_s[idx / HS * L.ldacc + idx % HS] = 0.0f;
  const TileRange k_range = p.k_ranges[b * p.k_tiles + kt];
  bool touched = false;
  for (int h = g * group; h < (g + 1) * group; ++h)
    for (int qt = 0; qt < p.q_tiles; ++qt) {
      const TileMask mask = classify(p.q_ranges[b * p.q_tiles + qt], k_range, k_valid < Bc, p.window);
      if (mask == TileMask::kSkip) continue;
      touched = true;
      __syncthreads();  // the previous pair's products are done with the query side
      load_query_side(p, L, smem, b, h, qt);
      __syncthreads();
      probabilities_and_ds(p, L, smem, mask, true);
      __syncthreads();
      // dV (Bc, HS) += P^T (Bc, Br) dO (Br, HS);  dK += dS^T Q
      tile_mma<ColMajor, RowMajor>(dv_s, L.ldacc, smem_at<T>(smem, L.p), L.ldp, smem_at<T>(smem, L.dout), L.ldo, Bc, HS,
                                   p.Br, true);
      tile_mma<ColMajor, RowMajor>(dk_s, L.ldacc, smem_at<T>(smem, L.ds), L.ldp, smem_at<T>(smem, L.q), L.ldo, Bc, HS,
                                   p.Br, true);
    }
  if (!touched) return;  // uniform over the block: no allowed pair, nothing to add
  __syncthreads();
  const int64_t first = (b * p.Tk + j0) * p.KVH + g;
  accumulate_rows(p.dk + first * HS, int64_t{p.KVH} * HS, dk_s, L.ldacc, k_valid, HS, p.scale);
  accumulate_rows(p.dv + first * HS, int64_t{p.KVH} * HS, dv_s, L.ldacc, k_valid, HS, 1.0f);
}

// Block (query tile qt, head h, batch row b): owns those dq rows.
template <class T, class G>
__global__ void __launch_bounds__(kAttnThreads) attention_bwd_dq_kernel(const AttentionParams<T, G> p) {
  extern __shared__ __align__(128) unsigned char smem[];
  const AttentionSmem L = smem_plan<T>(AttentionPass::kBackwardDq, p.Br, p.Bc, p.HS);
  const int qt = blockIdx.x, h = blockIdx.y, Br = p.Br, HS = p.HS, g = h / (p.NH / p.KVH);
  const int64_t b = blockIdx.z, i0 = int64_t{qt} * Br;
  const int rows = static_cast<int>(std::min<int64_t>(Br, p.Tq - i0));
  float* dq_s = smem_at<float>(smem, L.acc1);  // (Br, ldacc)
  load_query_side(p, L, smem, b, h, qt);
  for (int idx = threadIdx.x; idx < Br * HS; idx += kAttnThreads) dq_s[idx / HS * L.ldacc + idx % HS] = 0.0f;
  const TileRange q_range = p.q_ranges[b * p.q_tiles + qt];
  bool touched = false;
  for (int kt = 0; kt < p.k_tiles; ++kt) {
    const int k_valid = static_cast<int>(std::min<int64_t>(p.Bc, p.Tk - int64_t{kt} * p.Bc));
    const TileMask mask = classify(q_range, p.k_ranges[b * p.k_tiles + kt], k_valid < p.Bc, p.window);
    if (mask == TileMask::kSkip) continue;
    touched = true;
    __syncthreads();
    load_key_side(p, L, smem, b, g, kt);
    __syncthreads();
    probabilities_and_ds(p, L, smem, mask, false);
    __syncthreads();
    // dQ (Br, HS) += dS (Br, Bc) K (Bc, HS)
    tile_mma<RowMajor, RowMajor>(dq_s, L.ldacc, smem_at<T>(smem, L.ds), L.ldp, smem_at<T>(smem, L.k), L.ldo, Br, HS,
                                 p.Bc, true);
  }
  if (!touched) return;
  __syncthreads();
  accumulate_rows(p.dq + ((b * p.Tq + i0) * p.NH + h) * HS, int64_t{p.NH} * HS, dq_s, L.ldacc, rows, HS, p.scale);
}

}  // namespace trlhpc::cuda::attention_detail
