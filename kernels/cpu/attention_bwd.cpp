// Masked multi-head attention (GQA) for the CPU backend, backward; the forward and its notation are in
// attention.cpp.
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

// Budget for the stored dS tiles of one slab of query tiles (see attention_bwd).
constexpr int64_t kScoreStoreBytes = int64_t{64} << 20;

// Query tiles per slab: as many as the dS store budget allows, at least one.
int64_t score_store_slab(int64_t B, int64_t NH, int64_t q_tiles, int64_t k_tiles) {
  const int64_t per_query_tile = B * NH * k_tiles * kQueryTile * kKeyTile;
  return std::clamp<int64_t>(kScoreStoreBytes / int64_t{sizeof(float)} / per_query_tile, 1, q_tiles);
}

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

// delta (B, NH, Tq) = rowsum(dout * o), and qh, doh (B, NH, Tq, HS): q and dout per head, in fp32.
template <class T>
void prepare_query_side(const T* q, const T* o, const T* dout, int64_t B, int64_t Tq, int64_t NH, int64_t HS,
                        float* delta, float* qh, float* doh) {
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
}

constexpr int64_t kPairFloats = kQueryTile * kKeyTile;

// The dS tiles of one slab of query tiles, (B, NH, slab, k_tiles, kQueryTile, kKeyTile): pass 1 writes
// each tile it computes, pass 2 reads only those (the store is left uninitialised).
struct ScoreStore {
  float* base;
  int64_t NH, slab, k_tiles;
  float* tile(int64_t b, int64_t h, int64_t qt_in_slab, int64_t kt) const {
    return base + (((b * NH + h) * slab + qt_in_slab) * k_tiles + kt) * kPairFloats;
  }
};

// Pass 1 over the query tiles [qt0, qt1): dk, dv. One task per (b, kv head, key tile) owns those rows;
// it visits the query heads of its group and the query tiles of the slab in a fixed order, and stores dS.
void dkdv_pass(const BackwardArgs& a, const ScoreStore& store, int64_t B, int64_t qt0, int64_t qt1, float* dk,
               float* dv) {
  const int64_t Tq = a.Tq, Tk = a.Tk, NH = a.NH, KVH = a.KVH, HS = a.HS, k_tiles = a.k_tiles;
  const int64_t group = NH / KVH;
#pragma omp parallel
  {
    std::vector<float> p(kPairFloats);  // (kQueryTile, kKeyTile)
    std::vector<float> dtanh(a.softcap > 0 ? kPairFloats : 0);  // (kQueryTile, kKeyTile) 1 - t^2
    std::vector<float> dk_tile(static_cast<size_t>(kKeyTile * HS)), dv_tile(dk_tile.size());  // (kKeyTile, HS)
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < B * KVH * k_tiles; ++item) {
      const int64_t b = item / (KVH * k_tiles), g = item / k_tiles % KVH, kt = item % k_tiles;
      const int64_t j0 = kt * kKeyTile, k_valid = std::min(kKeyTile, Tk - j0);
      bool touched = false;
      for (int64_t h = g * group; h < (g + 1) * group; ++h)
        for (int64_t qt = qt0; qt < qt1; ++qt) {
          const TileMask mask = a.mask(b, qt, kt);
          if (mask == TileMask::kSkip) continue;
          if (!touched)
            std::fill(dk_tile.begin(), dk_tile.end(), 0.0f), std::fill(dv_tile.begin(), dv_tile.end(), 0.0f);
          touched = true;
          float* ds = store.tile(b, h, qt - qt0, kt);
          tile_p_ds(a, mask, b, h, qt, kt, p.data(), ds, dtanh.data());
          const int64_t i0 = qt * kQueryTile, rows = std::min(kQueryTile, Tq - i0);
          const float* q_rows = a.qh + ((b * NH + h) * Tq + i0) * HS;    // (rows, HS)
          const float* do_rows = a.doh + ((b * NH + h) * Tq + i0) * HS;  // (rows, HS)
          // dv_tile (k_valid, HS) += P^T do;  dk_tile += dS^T q   (A^T: row stride 1, column stride kKeyTile)
          gemm_acc(k_valid, HS, rows, p.data(), 1, kKeyTile, do_rows, HS, dv_tile.data(), HS);
          gemm_acc(k_valid, HS, rows, ds, 1, kKeyTile, q_rows, HS, dk_tile.data(), HS);
        }
      if (!touched) continue;
      for (int64_t j = 0; j < k_valid; ++j) {
        float* dkj = dk + ((b * Tk + j0 + j) * KVH + g) * HS;  // (HS)
        float* dvj = dv + ((b * Tk + j0 + j) * KVH + g) * HS;  // (HS)
        for (int64_t d = 0; d < HS; ++d) {
          dkj[d] += a.scale * dk_tile[static_cast<size_t>(j * HS + d)];
          dvj[d] += dv_tile[static_cast<size_t>(j * HS + d)];
        }
      }
    }
  }
}

// Pass 2 over the query tiles [qt0, qt1): dq. One task per (b, head, query tile of the slab) owns those
// rows: dq += scale dS k, from the dS that pass 1 stored.
void dq_pass(const BackwardArgs& a, const ScoreStore& store, int64_t B, int64_t qt0, int64_t qt1, float* dq) {
  const int64_t Tq = a.Tq, Tk = a.Tk, NH = a.NH, KVH = a.KVH, HS = a.HS, k_tiles = a.k_tiles;
  const int64_t group = NH / KVH;
#pragma omp parallel
  {
    std::vector<float> dq_tile(static_cast<size_t>(kQueryTile * HS));  // (kQueryTile, HS)
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < B * NH * (qt1 - qt0); ++item) {
      const int64_t b = item / (NH * (qt1 - qt0)), h = item / (qt1 - qt0) % NH, qt = qt0 + item % (qt1 - qt0);
      const int64_t g = h / group, i0 = qt * kQueryTile, rows = std::min(kQueryTile, Tq - i0);
      const float* kp_bg = a.kv->kp + (b * KVH + g) * a.kv->Tkp * HS;  // (Tkp, HS)
      std::fill(dq_tile.begin(), dq_tile.end(), 0.0f);
      for (int64_t kt = 0; kt < k_tiles; ++kt) {
        if (a.mask(b, qt, kt) == TileMask::kSkip) continue;
        const int64_t j0 = kt * kKeyTile, k_valid = std::min(kKeyTile, Tk - j0);
        gemm_acc(rows, HS, k_valid, store.tile(b, h, qt - qt0, kt), kKeyTile, 1, kp_bg + j0 * HS, HS, dq_tile.data(),
                 HS);
      }
      for (int64_t r = 0; r < rows; ++r) {
        float* dqi = dq + ((b * Tq + i0 + r) * NH + h) * HS;  // (HS)
        for (int64_t d = 0; d < HS; ++d) dqi[d] += a.scale * dq_tile[static_cast<size_t>(r * HS + d)];
      }
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
  const std::vector<TileRange> q_ranges = tile_ranges(q_pos, q_doc, B, Tq, kQueryTile);  // (B, q_tiles)
  const std::vector<TileRange> k_ranges = tile_ranges(k_pos, k_doc, B, Tk, kKeyTile);    // (B, k_tiles)
  const PackedKV kv = pack_kv(k, v, B, Tk, KVH, HS, true);
  // Every element below is written before it is read.
  AttentionScratch& scratch = attention_scratch();
  float* const delta = scratch.delta.reserve(B * NH * Tq);  // (B, NH, Tq) = sum_d do * o
  float* const qh = scratch.qh.reserve(B * NH * Tq * HS);   // (B, NH, Tq, HS)
  float* const doh = scratch.doh.reserve(B * NH * Tq * HS); // (B, NH, Tq, HS)
  prepare_query_side(q, o, dout, B, Tq, NH, HS, delta, qh, doh);
  // clang-format off
  const BackwardArgs args{.qh = qh, .doh = doh, .lse = lse, .delta = delta,
                          .q_pos = q_pos, .k_pos = k_pos, .q_doc = q_doc, .k_doc = k_doc,
                          .Tq = Tq, .Tk = Tk, .NH = NH, .KVH = KVH, .HS = HS, .q_tiles = q_tiles,
                          .k_tiles = k_tiles, .scale = scale, .window = effective_window(window_size),
                          .softcap = softcap, .kv = &kv, .q_ranges = &q_ranges, .k_ranges = &k_ranges};
  // clang-format on

  // The query tiles are processed in slabs; pass 1 stores each dS tile of the slab, pass 2 reuses it,
  // so dS is computed once. A slab is as many query tiles as the store budget allows (at least one).
  const int64_t slab = score_store_slab(B, NH, q_tiles, k_tiles);
  const ScoreStore store{scratch.ds.reserve(slab * B * NH * k_tiles * kPairFloats), NH, slab, k_tiles};
  for (int64_t qt0 = 0; qt0 < q_tiles; qt0 += slab) {
    const int64_t qt1 = std::min(q_tiles, qt0 + slab);
    dkdv_pass(args, store, B, qt0, qt1, dk, dv);
    dq_pass(args, store, B, qt0, qt1, dq);
  }
}

}  // namespace

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

int64_t attention_scratch_bytes(int64_t B, int64_t Tq, int64_t Tk, int64_t NH, int64_t KVH, int64_t HS, bool backward) {
  // Each term as its Scratch::reserve asks (rounded as capacity_bytes rounds); see pack_kv and attention_bwd_impl.
  auto held = [](int64_t floats) { return (floats + 15) / 16 * 64; };
  if (B == 0 || Tq == 0 || Tk == 0 || NH == 0) return 0;
  const int64_t q_tiles = (Tq + kQueryTile - 1) / kQueryTile, k_tiles = (Tk + kKeyTile - 1) / kKeyTile;
  const int64_t kv = held(B * KVH * k_tiles * kKeyTile * HS);
  if (!backward) return 2 * kv;
  const int64_t slab = score_store_slab(B, NH, q_tiles, k_tiles);
  return 4 * kv + held(B * NH * Tq) + 2 * held(B * NH * Tq * HS) + held(slab * B * NH * k_tiles * kQueryTile * kKeyTile);
}

int64_t attention_scratch_held_bytes() {
  const AttentionScratch& s = attention_scratch();
  int64_t n = 0;
  for (const Scratch* b : {&s.kt, &s.vp, &s.vt, &s.kp, &s.delta, &s.qh, &s.doh, &s.ds}) n += b->capacity_bytes();
  return n;
}

}  // namespace trlhpc::cpu
