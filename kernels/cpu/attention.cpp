// Masked multi-head attention (GQA) for the CPU backend: blocked, flash-style, fp32, OpenMP.
//
// Forward (Dao et al. 2022, "FlashAttention", Alg. 1; online softmax of Milakov & Gimelshein 2018).
//   s_ij = scale * q_i . k_j on allowed pairs (doc_q == doc_k && pos_q >= pos_k, and with a sliding
//          window W > 0 also pos_q - pos_k < W), -inf elsewhere
//   o_i  = sum_j softmax_j(s_i) v_j,   lse_i = log sum_j exp(s_ij)    (o = 0, lse = -inf if none allowed)
// Queries are cut into tiles of kQueryTile rows and keys into tiles of kKeyTile. For one (b, h, query
// tile) the key tiles are visited in order keeping a running max m_i, running sum l_i and unnormalised
// output O_i; a new tile with row max m' rescales them by exp(m_i - m'). A tile pair is skipped when a
// cheap range test (min/max of positions and doc ids of both tiles) proves every pair masked, and
// takes the no-mask path when it proves every pair allowed (same single document, keys not later).
//
// Softcapping (Gemma 2, softcap c > 0): the scaled scores of a tile become c tanh(s / c) before the mask
// (transformers' order), so lse and P are those of the capped scores; c = 0 skips it entirely.
//
// Backward (FlashAttention-2, Dao 2023, Alg. 2), recomputing P from the saved global lse:
//   P_ij = exp(s_ij - lse_i),  delta_i = do_i . o_i,  dP = do v^T,  dS = P * (dP - delta)
//   dv_j += sum_i P_ij do_i,   dk_j += scale sum_i dS_ij q_i,   dq_i += scale sum_j dS_ij k_j
// The three gradients accumulate (+=) so ring attention can sum its K/V blocks. To be deterministic
// without atomics, each output row has exactly one writer: pass 1 runs over (b, kv head, key tile) and
// owns those dk/dv rows (looping over the query heads of the group and the query tiles in a fixed
// order), computing P and dS and storing dS; pass 2 runs over (b, head, query tile), owns those dq rows
// and multiplies the stored dS by k. The sum order never depends on the thread count. The dS store is
// bounded (kScoreStoreBytes): the query tiles go through both passes in slabs that fit it.
// With softcapping, t = tanh(s / c) is recomputed with the scores, P = exp(c t - lse) and
// dS = P * (dP - delta) * (1 - t^2) (d(c tanh(s / c)) / ds); the rest is unchanged.
//
// Tile products use one register-blocked kernel, C += A B with B rows contiguous (kernel form
// "broadcast a scalar of A, multiply a row of B"), so no BLAS call happens inside a parallel region.
// Operands are repacked once per call so that every tile is one contiguous block: power-of-two row
// strides such as NH*HS floats would map a tile's rows onto a few L1 sets and thrash them.
//   kt, vt (B, KVH, k_tiles, HS, kKeyTile): k^T and v^T tile by tile (for q k^T and do v^T)
//   kp, vp (B, KVH, Tkp, HS): k and v per kv head;  backward: qh, doh (B, NH, Tq, HS) per head
// Tkp = Tk rounded up to kKeyTile, with zero padding (padded keys are always masked).
// Under --bf16, q, k, v, o and dout are bf16 bits: the templates read them where the repacking (or the
// scaled query tile) reads them and write o where it is stored (element_io.hpp), so no widened copy of a
// whole tensor is made and the fp32 arithmetic is that of the fp32 instantiation.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "trlhpc/core/error.hpp"
#include "kernels/cpu/element_io.hpp"
#include "kernels/cpu/fast_exp.hpp"
#include "kernels/cpu/lane_sum.hpp"
#include "kernels/cpu/scratch.hpp"
#include "kernels/cpu/softcap.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace trlhpc::cpu {

namespace {

constexpr int64_t kQueryTile = 64;
constexpr int64_t kKeyTile = 64;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();


// SIMD width for the tile kernel, as a GCC/Clang vector type (lowered to the best ISA -march allows).
#if defined(__AVX512F__)
constexpr int64_t kLanes = 16;
#else
constexpr int64_t kLanes = 8;
#endif
using vfloat = float __attribute__((vector_size(kLanes * sizeof(float))));

inline vfloat load(const float* p) {
  vfloat v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void store(float* p, vfloat v) { std::memcpy(p, &v, sizeof(v)); }

// One register block of gemm_acc: rows [i, i+R) x columns [j, j + NV * kLanes).
template <int64_t R, int64_t NV>
inline void gemm_block(int64_t i, int64_t j, int64_t k, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                       int64_t ldb, float* c, int64_t ldc) {
  vfloat acc[R][NV];
  for (int64_t r = 0; r < R; ++r)
    for (int64_t v = 0; v < NV; ++v) acc[r][v] = load(c + (i + r) * ldc + j + v * kLanes);
  const float* ap = a + i * a_rs;
  for (int64_t p = 0; p < k; ++p, ap += a_cs) {
    vfloat bv[NV];
    for (int64_t v = 0; v < NV; ++v) bv[v] = load(b + p * ldb + j + v * kLanes);
    for (int64_t r = 0; r < R; ++r) {
      const float ar = ap[r * a_rs];
      for (int64_t v = 0; v < NV; ++v) acc[r][v] += ar * bv[v];
    }
  }
  for (int64_t r = 0; r < R; ++r)
    for (int64_t v = 0; v < NV; ++v) store(c + (i + r) * ldc + j + v * kLanes, acc[r][v]);
}

// C (m, n) += A (m, k) B (k, n). A's element (i, p) is a[i * a_rs + p * a_cs] (so A^T is a_rs = 1),
// B's row p starts at b + p * ldb and C's row i at c + i * ldc, both unit stride.
// Blocks of R rows x 2 vectors keep 2R accumulators in registers (2R FMAs per 2 loads + R broadcasts);
// leftover columns take 1-vector blocks, then a plain loop; leftover rows take 1-row blocks.
void gemm_acc(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t ldb,
              float* c, int64_t ldc) {
  // AVX-512 has 32 vector registers: 8 rows x 2 vectors = 16 accumulators (measured 1.5x faster on the
  // cp_bench attention than 4 rows; 12 and 16 rows were slower). AVX2's 16 registers hold 4 x 2.
  constexpr int64_t R = kLanes == 16 ? 8 : 4;
  const int64_t n2 = n - n % (2 * kLanes), n1 = n - n % kLanes;
  int64_t i = 0;
  auto row_block = [&]<int64_t Rows>(int64_t i0) {
    for (int64_t j = 0; j < n2; j += 2 * kLanes) gemm_block<Rows, 2>(i0, j, k, a, a_rs, a_cs, b, ldb, c, ldc);
    if (n1 > n2) gemm_block<Rows, 1>(i0, n2, k, a, a_rs, a_cs, b, ldb, c, ldc);
    for (int64_t r = i0; r < i0 + Rows; ++r)
      for (int64_t p = 0; p < k; ++p) {
        const float ar = a[r * a_rs + p * a_cs];
        for (int64_t j = n1; j < n; ++j) c[r * ldc + j] += ar * b[p * ldb + j];
      }
  };
  for (; i + R <= m; i += R) row_block.template operator()<R>(i);
  for (; i < m; ++i) row_block.template operator()<1>(i);
}

// Position/doc ranges of a tile, and what a (query tile, key tile) pair needs.
struct TileRange {
  int32_t pos_min, pos_max, doc_min, doc_max;
};
enum class TileMask { kSkip, kFull, kPartial };

// The sliding window as the kernels test it: keys with pos_q - pos_k >= window are masked; no window
// (0) is a window longer than any position difference, so the test never masks and the no-window
// numerics are those of the plain causal mask.
int64_t effective_window(int64_t window) {
  if (window < 0) throw UserError("attention: sliding window " + std::to_string(window) + " is negative; use 0 for none");
  return window == 0 ? std::numeric_limits<int64_t>::max() : window;
}

// A softcap is 0 (none) or a positive finite cap.
void check_softcap(float softcap) {
  if (!(softcap >= 0) || !std::isfinite(softcap))
    throw UserError("attention: softcap " + std::to_string(softcap) + " is not a positive number; use 0 for none");
}

// Ranges of every tile of pos, doc (B, T): (B, ceil(T / tile)).
std::vector<TileRange> tile_ranges(const int32_t* pos, const int32_t* doc, int64_t B, int64_t T, int64_t tile) {
  const int64_t tiles = (T + tile - 1) / tile;
  std::vector<TileRange> out(static_cast<size_t>(B * tiles));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < tiles; ++t) {
      TileRange r{std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min(),
                  std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()};
      for (int64_t i = t * tile; i < std::min(T, (t + 1) * tile); ++i) {
        r.pos_min = std::min(r.pos_min, pos[b * T + i]), r.pos_max = std::max(r.pos_max, pos[b * T + i]);
        r.doc_min = std::min(r.doc_min, doc[b * T + i]), r.doc_max = std::max(r.doc_max, doc[b * T + i]);
      }
      out[static_cast<size_t>(b * tiles + t)] = r;
    }
  return out;
}

// kSkip: every key is later than every query, every key is at least `window` behind every query,
// or the doc ranges are disjoint. kFull: one single document on both sides, no key later than any
// query, every key within the window of every query, and no padded key in the tile.
TileMask classify(const TileRange& q, const TileRange& k, bool keys_padded, int64_t window) {
  if (k.pos_min > q.pos_max || k.doc_max < q.doc_min || k.doc_min > q.doc_max) return TileMask::kSkip;
  if (int64_t{q.pos_min} - k.pos_max >= window) return TileMask::kSkip;
  const bool one_doc = q.doc_min == q.doc_max && k.doc_min == k.doc_max && q.doc_min == k.doc_min;
  if (one_doc && k.pos_max <= q.pos_min && int64_t{q.pos_max} - k.pos_min < window && !keys_padded)
    return TileMask::kFull;
  return TileMask::kPartial;
}

// Sets the disallowed entries of a score tile s (rows, kKeyTile) to -inf. Keys past k_valid are padding.
// A key is allowed iff same document and oldest <= pos_k <= pos_q, oldest = pos_q - window + 1
// (transformers' sliding_window_overlay: kv_idx > q_idx - sliding_window).
void apply_mask(float* s, int64_t rows, int64_t k_valid, const int32_t* q_pos, const int32_t* q_doc,
                const int32_t* k_pos, const int32_t* k_doc, int64_t window) {
  for (int64_t r = 0; r < rows; ++r) {
    float* sr = s + r * kKeyTile;  // (kKeyTile)
    const int32_t qp = q_pos[r], qd = q_doc[r];
    // Clamped to int32: positions are int32, so a window reaching below INT32_MIN masks nothing.
    const int64_t oldest64 = window == std::numeric_limits<int64_t>::max() ? std::numeric_limits<int32_t>::min()
                                                                            : int64_t{qp} - window + 1;
    const int32_t oldest = static_cast<int32_t>(std::max<int64_t>(oldest64, std::numeric_limits<int32_t>::min()));
#pragma omp simd
    for (int64_t j = 0; j < k_valid; ++j)
      sr[j] = (k_doc[j] == qd && k_pos[j] <= qp && k_pos[j] >= oldest) ? sr[j] : kNegInf;
    for (int64_t j = k_valid; j < kKeyTile; ++j) sr[j] = kNegInf;
  }
}

// Softcaps the first `rows` rows of a score tile s (rows, kKeyTile) in place (before the mask).
void cap_scores(float* s, int64_t rows, float cap) {
#pragma omp simd
  for (int64_t i = 0; i < rows * kKeyTile; ++i) s[i] = softcap(s[i], cap);
}

// Per (b, kv head) repacked K and V (see the header comment). Transposed ones are only built if asked.
// The buffers a call needs, kept by the calling thread between calls (kernels/cpu/scratch.hpp: fresh
// pages per call cost more page faults than the whole backward's arithmetic on small heads).
struct AttentionScratch {
  Scratch kt, vp, vt, kp;  // PackedKV
  Scratch delta, qh, doh;  // attention_bwd's per-head copies
  Scratch ds;              // attention_bwd's dS store
};
AttentionScratch& attention_scratch() {
  thread_local AttentionScratch scratch;
  return scratch;
}

struct PackedKV {
  int64_t Tkp, HS;
  float *kt, *vp, *vt, *kp;  // (B, KVH, k_tiles, HS, kKeyTile) x2, (B, KVH, Tkp, HS) x2 (kt, vt, kp, vp)
  // Tile t of k^T (v^T) for batch row b and kv head g: (HS, kKeyTile).
  const float* kt_tile(int64_t b, int64_t KVH, int64_t g, int64_t t) const {
    return kt + (b * KVH + g) * Tkp * HS + t * HS * kKeyTile;
  }
  const float* vt_tile(int64_t b, int64_t KVH, int64_t g, int64_t t) const {
    return vt + (b * KVH + g) * Tkp * HS + t * HS * kKeyTile;
  }
};

// GQA needs whole groups of query heads per kv head.
void check_heads(int64_t NH, int64_t KVH) {
  TRLHPC_REQUIRE(KVH > 0 && NH % KVH == 0, "attention: " + std::to_string(NH) + " query heads are not a multiple of " +
                                               std::to_string(KVH) + " key/value heads (GQA needs whole groups)");
}

template <class T>
PackedKV pack_kv(const T* k, const T* v, int64_t B, int64_t Tk, int64_t KVH, int64_t HS, bool backward) {
  PackedKV p{};
  p.Tkp = (Tk + kKeyTile - 1) / kKeyTile * kKeyTile, p.HS = HS;
  const int64_t size = B * KVH * p.Tkp * HS;
  AttentionScratch& scratch = attention_scratch();
  auto zeroed = [size](Scratch& buffer) {  // the padded keys past Tk must read as zeros
    float* data = buffer.reserve(size);
    std::fill(data, data + size, 0.0f);
    return data;
  };
  p.kt = zeroed(scratch.kt);
  p.vp = zeroed(scratch.vp);
  if (backward) p.vt = zeroed(scratch.vt), p.kp = zeroed(scratch.kp);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t g = 0; g < KVH; ++g) {
      const int64_t base = (b * KVH + g) * p.Tkp * HS;
      for (int64_t j = 0; j < Tk; ++j) {
        const T* kj = k + ((b * Tk + j) * KVH + g) * HS;  // (HS)
        const T* vj = v + ((b * Tk + j) * KVH + g) * HS;  // (HS)
        const int64_t tile_base = base + j / kKeyTile * HS * kKeyTile + j % kKeyTile;
        for (int64_t d = 0; d < HS; ++d) {
          const float kd = load_element(kj, d), vd = load_element(vj, d);
          p.kt[tile_base + d * kKeyTile] = kd;
          p.vp[base + j * HS + d] = vd;
          if (backward) {
            p.vt[tile_base + d * kKeyTile] = vd;
            p.kp[base + j * HS + d] = kd;
          }
        }
      }
    }
  return p;
}

template <class T, class O>
void attention_fwd_impl(const T* q, const T* k, const T* v, const int32_t* q_pos, const int32_t* k_pos,
                        const int32_t* q_doc, const int32_t* k_doc, O* o, float* lse, int64_t B, int64_t Tq,
                        int64_t Tk, int64_t NH, int64_t KVH, int64_t HS, float scale, int64_t window_size,
                        float softcap) {
  check_heads(NH, KVH);
  check_softcap(softcap);
  const int64_t q_tiles = (Tq + kQueryTile - 1) / kQueryTile, k_tiles = (Tk + kKeyTile - 1) / kKeyTile;
  const int64_t group = NH / KVH;                                                        // query heads per kv head
  const std::vector<TileRange> q_ranges = tile_ranges(q_pos, q_doc, B, Tq, kQueryTile);  // (B, q_tiles)
  const std::vector<TileRange> k_ranges = tile_ranges(k_pos, k_doc, B, Tk, kKeyTile);    // (B, k_tiles)
  const PackedKV kv = pack_kv(k, v, B, Tk, KVH, HS, false);
  const int64_t Tkp = kv.Tkp;
  const int64_t window = effective_window(window_size);

#pragma omp parallel
  {
    std::vector<float> q_tile(static_cast<size_t>(kQueryTile * HS));   // (kQueryTile, HS) scaled queries
    std::vector<float> o_acc(static_cast<size_t>(kQueryTile * HS));    // (kQueryTile, HS) unnormalised o
    std::vector<float> s(static_cast<size_t>(kQueryTile * kKeyTile));  // (kQueryTile, kKeyTile) scores, then p
    float row_max[kQueryTile], row_sum[kQueryTile];                    // (kQueryTile) running max and sum

#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < B * NH * q_tiles; ++item) {
      const int64_t b = item / (NH * q_tiles), h = item / q_tiles % NH, qt = item % q_tiles;
      const int64_t g = h / group, i0 = qt * kQueryTile, rows = std::min(kQueryTile, Tq - i0);
      for (int64_t r = 0; r < rows; ++r) {
        const T* qi = q + ((b * Tq + i0 + r) * NH + h) * HS;  // (HS)
        for (int64_t d = 0; d < HS; ++d) q_tile[static_cast<size_t>(r * HS + d)] = load_element(qi, d) * scale;
      }
      std::fill(o_acc.begin(), o_acc.end(), 0.0f);
      std::fill(row_max, row_max + kQueryTile, kNegInf);
      std::fill(row_sum, row_sum + kQueryTile, 0.0f);
      const float* vp_bg = kv.vp + (b * KVH + g) * Tkp * HS;  // (Tkp, HS)

      for (int64_t kt = 0; kt < k_tiles; ++kt) {
        const int64_t j0 = kt * kKeyTile, k_valid = std::min(kKeyTile, Tk - j0);
        const TileMask mask = classify(q_ranges[static_cast<size_t>(b * q_tiles + qt)],
                                       k_ranges[static_cast<size_t>(b * k_tiles + kt)], k_valid < kKeyTile, window);
        if (mask == TileMask::kSkip) continue;
        std::fill(s.begin(), s.end(), 0.0f);
        gemm_acc(rows, kKeyTile, HS, q_tile.data(), HS, 1, kv.kt_tile(b, KVH, g, kt), kKeyTile, s.data(), kKeyTile);
        if (softcap > 0) cap_scores(s.data(), rows, softcap);
        if (mask == TileMask::kPartial)
          apply_mask(s.data(), rows, k_valid, q_pos + b * Tq + i0, q_doc + b * Tq + i0, k_pos + b * Tk + j0,
                     k_doc + b * Tk + j0, window);
        for (int64_t r = 0; r < rows; ++r) {
          float* sr = s.data() + r * kKeyTile;  // (kKeyTile)
          float tile_max = kNegInf;
#pragma omp simd reduction(max : tile_max)
          for (int64_t j = 0; j < kKeyTile; ++j) tile_max = tile_max > sr[j] ? tile_max : sr[j];  // vectorises
          const float m_new = std::max(row_max[r], tile_max);
          if (m_new == kNegInf) {  // nothing allowed yet for this query: contributes zeros
            std::fill(sr, sr + kKeyTile, 0.0f);
            continue;
          }
          // Summed in double lanes: float lanes (as fixed-order as these) moved e2e.test_trl_curves'
          // --bf16 grad_norm gap to TRL from 1.1 % to 2.9 % at step 9; double lanes give 1.4 %.
          const float sum = static_cast<float>(lane_sum<double>(kKeyTile, [sr, m_new](int64_t j) {
            sr[j] = exp_approx(sr[j] - m_new);
            return static_cast<double>(sr[j]);
          }));
          const float alpha = exp_approx(row_max[r] - m_new);  // 0 when the old max is -inf
          row_sum[r] = row_sum[r] * alpha + sum;
          row_max[r] = m_new;
          if (alpha != 1.0f) {
            float* orow = o_acc.data() + r * HS;  // (HS)
#pragma omp simd
            for (int64_t d = 0; d < HS; ++d) orow[d] *= alpha;
          }
        }
        gemm_acc(rows, HS, k_valid, s.data(), kKeyTile, 1, vp_bg + j0 * HS, HS, o_acc.data(), HS);
      }

      for (int64_t r = 0; r < rows; ++r) {
        O* oi = o + ((b * Tq + i0 + r) * NH + h) * HS;  // (HS)
        const float l = row_sum[r];
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        for (int64_t d = 0; d < HS; ++d) store_element(oi, d, o_acc[static_cast<size_t>(r * HS + d)] * inv);
        lse[(b * NH + h) * Tq + i0 + r] = l > 0.0f ? row_max[r] + std::log(l) : kNegInf;
      }
    }
  }
}

// Budget for the stored dS tiles of one slab of query tiles (see attention_bwd).
constexpr int64_t kScoreStoreBytes = int64_t{64} << 20;

// Everything the backward passes share.
struct BackwardArgs {
  const float *qh, *doh, *lse, *delta;  // qh, doh (B, NH, Tq, HS) per-head copies of q, dout; delta (B, NH, Tq)
  const int32_t *q_pos, *k_pos, *q_doc, *k_doc;
  int64_t Tq, Tk, NH, KVH, HS, q_tiles, k_tiles;
  float scale;
  int64_t window;  // effective_window
  float softcap;   // 0: none
  const PackedKV* kv;
  const std::vector<TileRange>*q_ranges, *k_ranges;

  TileMask mask(int64_t b, int64_t qt, int64_t kt) const {
    return classify((*q_ranges)[static_cast<size_t>(b * q_tiles + qt)],
                    (*k_ranges)[static_cast<size_t>(b * k_tiles + kt)], (kt + 1) * kKeyTile > Tk, window);
  }
};

// For the tile pair (b, h, query tile qt) x (key tile kt), not fully masked, computes
// p = P and ds = dS, both (kQueryTile, kKeyTile) with rows past the last query left at zero.
// With softcapping, dtanh (kQueryTile, kKeyTile) is the caller's scratch for 1 - t^2.
void tile_p_ds(const BackwardArgs& a, TileMask mask, int64_t b, int64_t h, int64_t qt, int64_t kt, float* p,
               float* ds, float* dtanh) {
  const int64_t i0 = qt * kQueryTile, rows = std::min(kQueryTile, a.Tq - i0);
  const int64_t j0 = kt * kKeyTile, k_valid = std::min(kKeyTile, a.Tk - j0);
  const int64_t g = h / (a.NH / a.KVH);
  const float* q_rows = a.qh + ((b * a.NH + h) * a.Tq + i0) * a.HS;    // (rows, HS)
  const float* do_rows = a.doh + ((b * a.NH + h) * a.Tq + i0) * a.HS;  // (rows, HS)
  std::fill(p, p + kQueryTile * kKeyTile, 0.0f);
  std::fill(ds, ds + kQueryTile * kKeyTile, 0.0f);
  gemm_acc(rows, kKeyTile, a.HS, q_rows, a.HS, 1, a.kv->kt_tile(b, a.KVH, g, kt), kKeyTile, p, kKeyTile);    // q k^T
  gemm_acc(rows, kKeyTile, a.HS, do_rows, a.HS, 1, a.kv->vt_tile(b, a.KVH, g, kt), kKeyTile, ds, kKeyTile);  // do v^T
  const bool capped = a.softcap > 0;
  if (capped) {  // p <- c t (the capped scaled scores, before the mask), dtanh <- 1 - t^2
    const float cap = a.softcap, scale = a.scale;
#pragma omp simd
    for (int64_t i = 0; i < rows * kKeyTile; ++i) {
      const float t = tanh_approx(scale * p[i] / cap);
      dtanh[i] = 1.0f - t * t;
      p[i] = t * cap;
    }
  }
  if (mask == TileMask::kPartial)
    apply_mask(p, rows, k_valid, a.q_pos + b * a.Tq + i0, a.q_doc + b * a.Tq + i0, a.k_pos + b * a.Tk + j0,
               a.k_doc + b * a.Tk + j0, a.window);
  for (int64_t r = 0; r < rows; ++r) {
    float* pr = p + r * kKeyTile;    // (kKeyTile) scores -> P
    float* dsr = ds + r * kKeyTile;  // (kKeyTile) dP -> dS
    const float lse_i = a.lse[(b * a.NH + h) * a.Tq + i0 + r];
    const float delta_i = a.delta[(b * a.NH + h) * a.Tq + i0 + r];
    if (lse_i == kNegInf) {  // no allowed key anywhere: P = 0
      std::fill(pr, pr + kKeyTile, 0.0f);
      std::fill(dsr, dsr + kKeyTile, 0.0f);
      continue;
    }
    if (capped) {
      const float* dtr = dtanh + r * kKeyTile;  // (kKeyTile) 1 - t^2, finite also where masked
#pragma omp simd
      for (int64_t j = 0; j < kKeyTile; ++j) {
        pr[j] = exp_approx(pr[j] - lse_i);  // already scaled and capped; masked scores are -inf -> 0
        dsr[j] = pr[j] * (dsr[j] - delta_i) * dtr[j];
      }
      continue;
    }
#pragma omp simd
    for (int64_t j = 0; j < kKeyTile; ++j) {
      pr[j] = exp_approx(a.scale * pr[j] - lse_i);  // masked scores are -inf -> 0
      dsr[j] = pr[j] * (dsr[j] - delta_i);
    }
  }
}

template <class T>
void attention_bwd_impl(const T* q, const T* k, const T* v, const T* o, const float* lse, const T* dout,
                        const int32_t* q_pos, const int32_t* k_pos, const int32_t* q_doc, const int32_t* k_doc,
                        float* dq, float* dk, float* dv, int64_t B, int64_t Tq, int64_t Tk, int64_t NH, int64_t KVH,
                        int64_t HS, float scale, int64_t window_size, float softcap) {
  check_heads(NH, KVH);
  check_softcap(softcap);
  if (B == 0 || Tq == 0 || Tk == 0 || NH == 0) return;  // no allowed pair: every gradient term is zero
  const int64_t q_tiles = (Tq + kQueryTile - 1) / kQueryTile, k_tiles = (Tk + kKeyTile - 1) / kKeyTile;
  const int64_t group = NH / KVH;
  const std::vector<TileRange> q_ranges = tile_ranges(q_pos, q_doc, B, Tq, kQueryTile);  // (B, q_tiles)
  const std::vector<TileRange> k_ranges = tile_ranges(k_pos, k_doc, B, Tk, kKeyTile);    // (B, k_tiles)
  const PackedKV kv = pack_kv(k, v, B, Tk, KVH, HS, true);
  // Every element below is written before it is read.
  AttentionScratch& scratch = attention_scratch();
  float* const delta = scratch.delta.reserve(B * NH * Tq);  // (B, NH, Tq) = sum_d do * o
  float* const qh = scratch.qh.reserve(B * NH * Tq * HS);   // (B, NH, Tq, HS)
  float* const doh = scratch.doh.reserve(B * NH * Tq * HS); // (B, NH, Tq, HS)
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < Tq; ++i)
      for (int64_t h = 0; h < NH; ++h) {
        const T* qi = q + ((b * Tq + i) * NH + h) * HS;      // (HS)
        const T* oi = o + ((b * Tq + i) * NH + h) * HS;      // (HS)
        const T* doi = dout + ((b * Tq + i) * NH + h) * HS;  // (HS)
        const int64_t row = (b * NH + h) * Tq + i;
        // An explicit fma chain: with `acc += o * do` GCC's SLP vectoriser multiplies a few d at once
        // (rounding each product) and adds them in order where its cost model says so, which it did
        // under 256-bit and not under 512-bit tuning: different bits on different CPUs (lane_sum.hpp).
        float acc = 0.0f;
        for (int64_t d = 0; d < HS; ++d) acc = std::fma(load_element(oi, d), load_element(doi, d), acc);
        delta[row] = acc;
        for (int64_t d = 0; d < HS; ++d) {
          qh[row * HS + d] = load_element(qi, d);
          doh[row * HS + d] = load_element(doi, d);
        }
      }
  // clang-format off
  const BackwardArgs args{.qh = qh, .doh = doh, .lse = lse, .delta = delta,
                          .q_pos = q_pos, .k_pos = k_pos, .q_doc = q_doc, .k_doc = k_doc,
                          .Tq = Tq, .Tk = Tk, .NH = NH, .KVH = KVH, .HS = HS, .q_tiles = q_tiles,
                          .k_tiles = k_tiles, .scale = scale, .window = effective_window(window_size),
                          .softcap = softcap, .kv = &kv, .q_ranges = &q_ranges, .k_ranges = &k_ranges};
  // clang-format on

  // The query tiles are processed in slabs; pass 1 stores each dS tile of the slab, pass 2 reuses it,
  // so dS is computed once. A slab is as many query tiles as the store budget allows (at least one).
  constexpr int64_t kPairFloats = kQueryTile * kKeyTile;
  const int64_t per_query_tile = B * NH * k_tiles * kPairFloats;
  const int64_t slab = std::clamp<int64_t>(kScoreStoreBytes / int64_t{sizeof(float)} / per_query_tile, 1, q_tiles);
  // (B, NH, slab, k_tiles, kQueryTile, kKeyTile); left uninitialised, pass 2 reads only what pass 1 wrote.
  float* const ds_store = scratch.ds.reserve(slab * per_query_tile);
  auto ds_tile = [&](int64_t b, int64_t h, int64_t qt_in_slab, int64_t kt) {
    return ds_store + (((b * NH + h) * slab + qt_in_slab) * k_tiles + kt) * kPairFloats;
  };

  for (int64_t qt0 = 0; qt0 < q_tiles; qt0 += slab) {
    const int64_t qt1 = std::min(q_tiles, qt0 + slab);
    // Pass 1: dk, dv. One task per (b, kv head, key tile) owns those rows; it visits the query heads of
    // its group and the query tiles of the slab in a fixed order.
#pragma omp parallel
    {
      std::vector<float> p(kPairFloats);  // (kQueryTile, kKeyTile)
      std::vector<float> dtanh(softcap > 0 ? kPairFloats : 0);  // (kQueryTile, kKeyTile) 1 - t^2
      std::vector<float> dk_tile(static_cast<size_t>(kKeyTile * HS)), dv_tile(dk_tile.size());  // (kKeyTile, HS)
#pragma omp for schedule(dynamic, 1)
      for (int64_t item = 0; item < B * KVH * k_tiles; ++item) {
        const int64_t b = item / (KVH * k_tiles), g = item / k_tiles % KVH, kt = item % k_tiles;
        const int64_t j0 = kt * kKeyTile, k_valid = std::min(kKeyTile, Tk - j0);
        bool touched = false;
        for (int64_t h = g * group; h < (g + 1) * group; ++h)
          for (int64_t qt = qt0; qt < qt1; ++qt) {
            const TileMask mask = args.mask(b, qt, kt);
            if (mask == TileMask::kSkip) continue;
            if (!touched)
              std::fill(dk_tile.begin(), dk_tile.end(), 0.0f), std::fill(dv_tile.begin(), dv_tile.end(), 0.0f);
            touched = true;
            float* ds = ds_tile(b, h, qt - qt0, kt);
            tile_p_ds(args, mask, b, h, qt, kt, p.data(), ds, dtanh.data());
            const int64_t i0 = qt * kQueryTile, rows = std::min(kQueryTile, Tq - i0);
            const float* q_rows = qh + ((b * NH + h) * Tq + i0) * HS;    // (rows, HS)
            const float* do_rows = doh + ((b * NH + h) * Tq + i0) * HS;  // (rows, HS)
            // dv_tile (k_valid, HS) += P^T do;  dk_tile += dS^T q   (A^T: row stride 1, column stride kKeyTile)
            gemm_acc(k_valid, HS, rows, p.data(), 1, kKeyTile, do_rows, HS, dv_tile.data(), HS);
            gemm_acc(k_valid, HS, rows, ds, 1, kKeyTile, q_rows, HS, dk_tile.data(), HS);
          }
        if (!touched) continue;
        for (int64_t j = 0; j < k_valid; ++j) {
          float* dkj = dk + ((b * Tk + j0 + j) * KVH + g) * HS;  // (HS)
          float* dvj = dv + ((b * Tk + j0 + j) * KVH + g) * HS;  // (HS)
          for (int64_t d = 0; d < HS; ++d) {
            dkj[d] += scale * dk_tile[static_cast<size_t>(j * HS + d)];
            dvj[d] += dv_tile[static_cast<size_t>(j * HS + d)];
          }
        }
      }
    }
    // Pass 2: dq. One task per (b, head, query tile of the slab) owns those rows: dq += scale dS k.
#pragma omp parallel
    {
      std::vector<float> dq_tile(static_cast<size_t>(kQueryTile * HS));  // (kQueryTile, HS)
#pragma omp for schedule(dynamic, 1)
      for (int64_t item = 0; item < B * NH * (qt1 - qt0); ++item) {
        const int64_t b = item / (NH * (qt1 - qt0)), h = item / (qt1 - qt0) % NH, qt = qt0 + item % (qt1 - qt0);
        const int64_t g = h / group, i0 = qt * kQueryTile, rows = std::min(kQueryTile, Tq - i0);
        const float* kp_bg = kv.kp + (b * KVH + g) * kv.Tkp * HS;  // (Tkp, HS)
        std::fill(dq_tile.begin(), dq_tile.end(), 0.0f);
        for (int64_t kt = 0; kt < k_tiles; ++kt) {
          if (args.mask(b, qt, kt) == TileMask::kSkip) continue;
          const int64_t j0 = kt * kKeyTile, k_valid = std::min(kKeyTile, Tk - j0);
          gemm_acc(rows, HS, k_valid, ds_tile(b, h, qt - qt0, kt), kKeyTile, 1, kp_bg + j0 * HS, HS, dq_tile.data(),
                   HS);
        }
        for (int64_t r = 0; r < rows; ++r) {
          float* dqi = dq + ((b * Tq + i0 + r) * NH + h) * HS;  // (HS)
          for (int64_t d = 0; d < HS; ++d) dqi[d] += scale * dq_tile[static_cast<size_t>(r * HS + d)];
        }
      }
    }
  }
}

}  // namespace

void attention_fwd(const float* q, const float* k, const float* v, const int32_t* q_pos, const int32_t* k_pos,
                   const int32_t* q_doc, const int32_t* k_doc, float* o, float* lse, int64_t B, int64_t Tq, int64_t Tk,
                   int64_t NH, int64_t KVH, int64_t HS, float scale, int64_t window, float softcap) {
  attention_fwd_impl(q, k, v, q_pos, k_pos, q_doc, k_doc, o, lse, B, Tq, Tk, NH, KVH, HS, scale, window, softcap);
}
void attention_fwd(const uint16_t* q, const uint16_t* k, const uint16_t* v, const int32_t* q_pos, const int32_t* k_pos,
                   const int32_t* q_doc, const int32_t* k_doc, uint16_t* o, float* lse, int64_t B, int64_t Tq,
                   int64_t Tk, int64_t NH, int64_t KVH, int64_t HS, float scale, int64_t window, float softcap) {
  attention_fwd_impl(q, k, v, q_pos, k_pos, q_doc, k_doc, o, lse, B, Tq, Tk, NH, KVH, HS, scale, window, softcap);
}
void attention_fwd(const uint16_t* q, const uint16_t* k, const uint16_t* v, const int32_t* q_pos, const int32_t* k_pos,
                   const int32_t* q_doc, const int32_t* k_doc, float* o, float* lse, int64_t B, int64_t Tq,
                   int64_t Tk, int64_t NH, int64_t KVH, int64_t HS, float scale, int64_t window, float softcap) {
  attention_fwd_impl(q, k, v, q_pos, k_pos, q_doc, k_doc, o, lse, B, Tq, Tk, NH, KVH, HS, scale, window, softcap);
}
void attention_bwd(const float* q, const float* k, const float* v, const float* o, const float* lse, const float* dout,
                   const int32_t* q_pos, const int32_t* k_pos, const int32_t* q_doc, const int32_t* k_doc, float* dq,
                   float* dk, float* dv, int64_t B, int64_t Tq, int64_t Tk, int64_t NH, int64_t KVH, int64_t HS,
                   float scale, int64_t window, float softcap) {
  attention_bwd_impl(q, k, v, o, lse, dout, q_pos, k_pos, q_doc, k_doc, dq, dk, dv, B, Tq, Tk, NH, KVH, HS, scale,
                     window, softcap);
}
void attention_bwd(const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* o, const float* lse,
                   const uint16_t* dout, const int32_t* q_pos, const int32_t* k_pos, const int32_t* q_doc,
                   const int32_t* k_doc, float* dq, float* dk, float* dv, int64_t B, int64_t Tq, int64_t Tk,
                   int64_t NH, int64_t KVH, int64_t HS, float scale, int64_t window, float softcap) {
  attention_bwd_impl(q, k, v, o, lse, dout, q_pos, k_pos, q_doc, k_doc, dq, dk, dv, B, Tq, Tk, NH, KVH, HS, scale,
                     window, softcap);
}

void attention_merge(float* o_acc, float* lse_acc, const float* o_blk, const float* lse_blk, int64_t B, int64_t T,
                     int64_t NH, int64_t HS) {
  // Per (b, t, h): both sides are softmax-weighted averages over disjoint key sets, so the merged one
  // weights each by its share of the total mass, exp(lse_side - lse_total). A -inf side weighs 0.
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < NH; ++h) {
        float& la = lse_acc[(b * NH + h) * T + t];
        const float lb = lse_blk[(b * NH + h) * T + t];
        float* oa = o_acc + ((b * T + t) * NH + h) * HS;        // (HS)
        const float* ob = o_blk + ((b * T + t) * NH + h) * HS;  // (HS)
        if (lb == kNegInf) continue;                            // the block saw no allowed key: nothing to add
        if (la == kNegInf) {                                    // first block with an allowed key: take it as is
          std::copy(ob, ob + HS, oa);
          la = lb;
          continue;
        }
        const double hi = std::max(la, lb);
        const double total = hi + std::log(std::exp(la - hi) + std::exp(lb - hi));
        const float wa = static_cast<float>(std::exp(la - total)), wb = static_cast<float>(std::exp(lb - total));
#pragma omp simd
        for (int64_t d = 0; d < HS; ++d) oa[d] = oa[d] * wa + ob[d] * wb;
        la = static_cast<float>(total);
      }
}

}  // namespace trlhpc::cpu
