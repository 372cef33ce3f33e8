#pragma once
// The tiles both attention passes share (attention.cpp: forward, attention_bwd.cpp: backward): the
// tile sizes, the register-blocked tile product, the tile masks and the repacked K/V.
//
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
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/element_io.hpp"
#include "kernels/cpu/scratch.hpp"
#include "kernels/cpu/softcap.hpp"
#include "trlhpc/core/error.hpp"

// Inline functions in a named namespace, not an anonymous one: the two passes must share one
// thread-local AttentionScratch (the backward reuses the forward's packing buffers).
namespace trlhpc::cpu::attention_detail {

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
inline void gemm_acc(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t ldb,
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
inline int64_t effective_window(int64_t window) {
  if (window < 0) throw UserError("attention: sliding window " + std::to_string(window) + " is negative; use 0 for none");
  return window == 0 ? std::numeric_limits<int64_t>::max() : window;
}

// A softcap is 0 (none) or a positive finite cap.
inline void check_softcap(float softcap) {
  if (!(softcap >= 0) || !std::isfinite(softcap))
    throw UserError("attention: softcap " + std::to_string(softcap) + " is not a positive number; use 0 for none");
}

// Ranges of every tile of pos, doc (B, T): (B, ceil(T / tile)).
inline std::vector<TileRange> tile_ranges(const int32_t* pos, const int32_t* doc, int64_t B, int64_t T, int64_t tile) {
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
inline TileMask classify(const TileRange& q, const TileRange& k, bool keys_padded, int64_t window) {
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
inline void apply_mask(float* s, int64_t rows, int64_t k_valid, const int32_t* q_pos, const int32_t* q_doc,
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
inline void cap_scores(float* s, int64_t rows, float cap) {
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
inline AttentionScratch& attention_scratch() {
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
inline void check_heads(int64_t NH, int64_t KVH) {
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

}  // namespace trlhpc::cpu::attention_detail
