// Flash-attention forward/backward with position + document-id masks, GQA and masked-tile skipping,
// and the log-sum-exp merge of ring attention (see attention.cuh; building blocks in attention_tiles.cuh).
#include <algorithm>
#include <cmath>
#include <string>

#include "attention.cuh"
#include "attention_tiles.cuh"
#include "device_math.cuh"
#include "trlhpc/kernels/elementwise_math.hpp"
#include "trlhpc/core/cuda_check.hpp"
#include "trlhpc/core/error.hpp"

namespace trlhpc::cuda {

using namespace attention_detail;

namespace {

constexpr float kNegInf = -INFINITY;

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

// ranges (B, tiles): min/max of pos and doc over each tile of `tile` rows.
__global__ void tile_ranges_kernel(const int32_t* __restrict__ pos, const int32_t* __restrict__ doc, int64_t B,
                                   int64_t T, int tile, int tiles, TileRange* __restrict__ ranges) {
  const int64_t item = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (item >= B * tiles) return;
  const int64_t b = item / tiles, t0 = item % tiles * tile, t1 = std::min<int64_t>(T, t0 + tile);
  TileRange r{INT_MAX, INT_MIN, INT_MAX, INT_MIN};
  for (int64_t t = t0; t < t1; ++t) {
    const int32_t p = pos[b * T + t], d = doc[b * T + t];
    r.pos_min = min(r.pos_min, p), r.pos_max = max(r.pos_max, p);
    r.doc_min = min(r.doc_min, d), r.doc_max = max(r.doc_max, d);
  }
  ranges[item] = r;
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
__device__ void load_ids(int32_t* pos_s, int32_t* doc_s, const int32_t* pos, const int32_t* doc, int valid, int rows) {
  for (int r = threadIdx.x; r < rows; r += kAttnThreads) {
    pos_s[r] = r < valid ? pos[r] : INT_MAX;
    doc_s[r] = r < valid ? doc[r] : INT_MIN;
  }
}

template <class T>
__device__ T* smem_at(unsigned char* base, int offset) {
  return reinterpret_cast<T*>(base + offset);
}

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

// ---- host side ----------------------------------------------------------------------------------------
using kernels::AttentionTiles;

// The tiles of one pass on this device (attention_smem_plan.hpp), or a RuntimeFailure naming the head size.
template <class T>
AttentionTiles choose_tiles(int HS, AttentionPass pass, const SmemLimits& limits) {
  const AttentionTiles t = kernels::choose_attention_tiles(TilePad<T>::kSeparateProbabilities, HS, pass, limits);
  if (t.Br == 0)
    throw_runtime_failure("CUDA", "attention tile choice",
                          "head size " + std::to_string(HS) + " needs more shared memory than the device's " +
                              std::to_string(limits.per_block_optin) + " bytes per block",
                          __FILE__, __LINE__);
  return t;
}

template <class T>
void check_dims(const AttentionDims& d) {
  TRLHPC_REQUIRE(d.KVH > 0 && d.NH % d.KVH == 0, "attention: " + std::to_string(d.NH) +
                                                    " query heads are not a multiple of " + std::to_string(d.KVH) +
                                                    " key/value heads (GQA needs whole groups)");
  TRLHPC_REQUIRE(d.HS > 0 && d.HS <= 512, "attention: head size " + std::to_string(d.HS) + " is outside 1..512");
  if constexpr (TilePad<T>::kSeparateProbabilities)
    TRLHPC_REQUIRE(d.HS % 16 == 0, "attention: bf16 attention runs on tensor cores and needs a head size that is a "
                                   "multiple of 16, got " + std::to_string(d.HS) + "; train in fp32");
  TRLHPC_ASSERT(d.B <= 65535 && d.NH <= 65535, "attention grid: B and NH must be <= 65535");
  TRLHPC_REQUIRE(d.softcap >= 0.0f && std::isfinite(d.softcap),
                 "attention: softcap " + std::to_string(d.softcap) + " is not a positive number; use 0 for none");
}

// Tile ranges of q (tile Br) and k (tile Bc) for a launch.
struct RangeBuffers {
  DeviceBuffer<TileRange> q, k;
  int q_tiles = 0, k_tiles = 0;
};

RangeBuffers tile_ranges(const int32_t* q_pos, const int32_t* q_doc, const int32_t* k_pos, const int32_t* k_doc,
                         const AttentionDims& d, int Br, int Bc, DeviceAllocator& allocator, cudaStream_t stream) {
  RangeBuffers r;
  r.q_tiles = static_cast<int>((d.Tq + Br - 1) / Br);
  r.k_tiles = static_cast<int>((d.Tk + Bc - 1) / Bc);
  r.q = DeviceBuffer<TileRange>(allocator, std::max<int64_t>(1, d.B * r.q_tiles));  // (B, q_tiles)
  r.k = DeviceBuffer<TileRange>(allocator, std::max<int64_t>(1, d.B * r.k_tiles));  // (B, k_tiles)
  if (d.B * r.q_tiles > 0) {
    tile_ranges_kernel<<<grid_for(d.B * r.q_tiles, 128, INT32_MAX), 128, 0, stream>>>(q_pos, q_doc, d.B, d.Tq, Br,
                                                                                      r.q_tiles, r.q.get());
    TRLHPC_CHECK_CUDA_LAUNCH("tile_ranges_kernel");
  }
  if (d.B * r.k_tiles > 0) {
    tile_ranges_kernel<<<grid_for(d.B * r.k_tiles, 128, INT32_MAX), 128, 0, stream>>>(k_pos, k_doc, d.B, d.Tk, Bc,
                                                                                      r.k_tiles, r.k.get());
    TRLHPC_CHECK_CUDA_LAUNCH("tile_ranges_kernel");
  }
  return r;
}

template <class T, class G>
AttentionParams<T, G> base_params(const AttentionDims& d, const RangeBuffers& r, const AttentionTiles& t) {
  AttentionParams<T, G> p{};
  p.q_ranges = r.q.get();
  p.k_ranges = r.k.get();
  p.Tq = d.Tq, p.Tk = d.Tk, p.NH = d.NH, p.KVH = d.KVH, p.HS = d.HS;
  p.Br = t.Br, p.Bc = t.Bc, p.q_tiles = r.q_tiles, p.k_tiles = r.k_tiles;
  p.scale = d.scale;
  p.window = effective_window(d.window);
  p.softcap = d.softcap;
  return p;
}

template <class Kernel>
void set_smem(Kernel kernel, int bytes) {
  TRLHPC_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

}  // namespace

template <class T, class G>
void attention_fwd(const T* q, const T* k, const T* v, const int32_t* q_pos, const int32_t* k_pos,
                   const int32_t* q_doc, const int32_t* k_doc, G* o, float* lse, const AttentionDims& d,
                   const SmemLimits& smem, DeviceAllocator& allocator, cudaStream_t stream) {
  check_dims<T>(d);
  if (d.B == 0 || d.Tq == 0 || d.NH == 0) return;
  const AttentionTiles t = choose_tiles<T>(d.HS, AttentionPass::kForward, smem);
  const RangeBuffers ranges = tile_ranges(q_pos, q_doc, k_pos, k_doc, d, t.Br, t.Bc, allocator, stream);
  AttentionParams<T, G> p = base_params<T, G>(d, ranges, t);
  p.q = q, p.k = k, p.v = v, p.q_pos = q_pos, p.k_pos = k_pos, p.q_doc = q_doc, p.k_doc = k_doc;
  p.o_out = o, p.lse_out = lse;
  set_smem(attention_fwd_kernel<T, G>, t.smem);
  const dim3 grid(static_cast<unsigned>(ranges.q_tiles), static_cast<unsigned>(d.NH), static_cast<unsigned>(d.B));
  attention_fwd_kernel<T, G><<<grid, kAttnThreads, t.smem, stream>>>(p);
  TRLHPC_CHECK_CUDA_LAUNCH("attention_fwd_kernel");
}

template <class T, class G>
void attention_bwd(const T* q, const T* k, const T* v, const T* o, const float* lse, const T* dout,
                   const int32_t* q_pos, const int32_t* k_pos, const int32_t* q_doc, const int32_t* k_doc, G* dq,
                   G* dk, G* dv, const AttentionDims& d, const SmemLimits& smem, DeviceAllocator& allocator,
                   cudaStream_t stream) {
  check_dims<T>(d);
  if (d.B == 0 || d.Tq == 0 || d.Tk == 0 || d.NH == 0) return;  // no allowed pair: every term is zero
  DeviceBuffer<float> delta(allocator, d.B * d.NH * d.Tq);  // (B, NH, Tq)
  const int64_t delta_rows = d.B * d.Tq * d.NH;
  attention_delta_kernel<<<grid_for(delta_rows, 8, INT32_MAX), 256, 0, stream>>>(o, dout, delta.get(), d.B, d.Tq, d.NH,
                                                                                d.HS);
  TRLHPC_CHECK_CUDA_LAUNCH("attention_delta_kernel");

  for (const bool dkdv : {true, false}) {
    const AttentionTiles t =
        choose_tiles<T>(d.HS, dkdv ? AttentionPass::kBackwardDkDv : AttentionPass::kBackwardDq, smem);
    const RangeBuffers ranges = tile_ranges(q_pos, q_doc, k_pos, k_doc, d, t.Br, t.Bc, allocator, stream);
    AttentionParams<T, G> p = base_params<T, G>(d, ranges, t);
    p.q = q, p.k = k, p.v = v, p.o = o, p.dout = dout, p.lse_in = lse, p.delta = delta.get();
    p.q_pos = q_pos, p.k_pos = k_pos, p.q_doc = q_doc, p.k_doc = k_doc;
    p.dq = dq, p.dk = dk, p.dv = dv;
    if (dkdv) {
      set_smem(attention_bwd_dkdv_kernel<T, G>, t.smem);
      const dim3 grid(static_cast<unsigned>(ranges.k_tiles), static_cast<unsigned>(d.KVH), static_cast<unsigned>(d.B));
      attention_bwd_dkdv_kernel<T, G><<<grid, kAttnThreads, t.smem, stream>>>(p);
      TRLHPC_CHECK_CUDA_LAUNCH("attention_bwd_dkdv_kernel");
    } else {
      set_smem(attention_bwd_dq_kernel<T, G>, t.smem);
      const dim3 grid(static_cast<unsigned>(ranges.q_tiles), static_cast<unsigned>(d.NH), static_cast<unsigned>(d.B));
      attention_bwd_dq_kernel<T, G><<<grid, kAttnThreads, t.smem, stream>>>(p);
      TRLHPC_CHECK_CUDA_LAUNCH("attention_bwd_dq_kernel");
    }
  }
}

template <class T>
int attention_blocks_per_sm(int HS, AttentionPass pass, const SmemLimits& smem) {
  const AttentionTiles t = choose_tiles<T>(HS, pass, smem);
  auto blocks = [&](auto kernel) {
    set_smem(kernel, t.smem);
    int n = 0;
    TRLHPC_CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kAttnThreads, t.smem));
    return n;
  };
  switch (pass) {
    case AttentionPass::kForward: return blocks(attention_fwd_kernel<T, T>);
    case AttentionPass::kBackwardDkDv: return blocks(attention_bwd_dkdv_kernel<T, T>);
    case AttentionPass::kBackwardDq: return blocks(attention_bwd_dq_kernel<T, T>);
  }
  return 0;
}
template int attention_blocks_per_sm<float>(int, AttentionPass, const SmemLimits&);
template int attention_blocks_per_sm<bf16>(int, AttentionPass, const SmemLimits&);

template <class T>
void attention_merge(T* o_acc, float* lse_acc, const T* o_blk, const float* lse_blk, int64_t B, int64_t Tn, int NH,
                     int HS, cudaStream_t stream) {
  const int64_t rows = B * Tn * NH;
  if (rows == 0) return;
  attention_merge_kernel<<<grid_for(rows, 8, INT32_MAX), 256, 0, stream>>>(o_acc, lse_acc, o_blk, lse_blk, B, Tn, NH,
                                                                          HS);
  TRLHPC_CHECK_CUDA_LAUNCH("attention_merge_kernel");
}

#define TRLHPC_INSTANTIATE_ATTENTION(T, G)                                                                      \
  template void attention_fwd<T, G>(const T*, const T*, const T*, const int32_t*, const int32_t*, const int32_t*, \
                                    const int32_t*, G*, float*, const AttentionDims&, const SmemLimits&,           \
                                    DeviceAllocator&, cudaStream_t);                                               \
  template void attention_bwd<T, G>(const T*, const T*, const T*, const T*, const float*, const T*, const int32_t*, \
                                    const int32_t*, const int32_t*, const int32_t*, G*, G*, G*, const AttentionDims&, \
                                    const SmemLimits&, DeviceAllocator&, cudaStream_t);
TRLHPC_INSTANTIATE_ATTENTION(float, float)
TRLHPC_INSTANTIATE_ATTENTION(bf16, bf16)
TRLHPC_INSTANTIATE_ATTENTION(bf16, float)  // bf16 inputs, fp32 accumulators (ring attention)
template void attention_merge<float>(float*, float*, const float*, const float*, int64_t, int64_t, int, int,
                                     cudaStream_t);
template void attention_merge<bf16>(bf16*, float*, const bf16*, const float*, int64_t, int64_t, int, int, cudaStream_t);
#undef TRLHPC_INSTANTIATE_ATTENTION

}  // namespace trlhpc::cuda
