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
// Backward: attention_bwd.cpp. The tiles, the tile product and the repacking: attention_tiles.hpp.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/attention_tiles.hpp"
#include "kernels/cpu/element_io.hpp"
#include "kernels/cpu/fast_exp.hpp"
#include "kernels/cpu/lane_sum.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace trlhpc::cpu {

namespace {

using namespace attention_detail;

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
          // Two loops: with exp inside the summing lambda GCC vectorised neither (scalar exp was 40 %
          // of the 8k-token attention); the sum's order is the same either way.
#pragma omp simd
          for (int64_t j = 0; j < kKeyTile; ++j) sr[j] = exp_approx(sr[j] - m_new);
          const float sum =
              static_cast<float>(lane_sum<double>(kKeyTile, [sr](int64_t j) { return static_cast<double>(sr[j]); }));
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