// The AVX512-BF16 engine of the --bf16 GEMM (matmul_bf16, gemm_bf16.cpp chooses it by cpuid):
//   c (M, N) = alpha * bf16(op(a)) @ bf16(op(b)) + beta * c, products and sums in fp32.
//
// VDPBF16PS multiplies the bf16 pair (k, k+1) of one 32-bit lane of each source and adds both products
// to the fp32 lane of the accumulator: 32 multiply-adds per zmm instruction, twice the FMAs of fp32.
// Blocking (Goto & van de Geijn 2008, as the fp32 GEMM in gemm_avx512.cpp):
//   * register tile kMR x kNR = 8 rows x 48 columns: 24 zmm accumulators (VDPBF16PS needs about 12 in
//     flight to issue two a cycle on Zen 5: measured 6.9 vs 7.6 G instructions/s with 12 vs 24), per
//     k-pair three b vectors and eight broadcasts of an a pair (11 loads per 24 VDPBF16PS);
//   * b is packed once per call, shared by the threads, into panels of kNR columns of 32-bit k-pairs,
//     [pair][column] ("VNNI" layout). a (M, K) is read as rows of k-pairs: in place when it is bf16
//     with an even K, else after one streaming conversion to bf16 rows (a 16 x 16 transpose into
//     panels, as for b, cost 13% of dy W at hidden 896); a stored (K, M) (weight gradients, dy^T x) is
//     packed into panels of kMR rows, [pair][row].
//     Packing converts fp32 to bf16 (VCVTNE2PS2BF16, round to nearest even) and either interleaves two
//     k rows (an operand stored with k as its row index) or transposes 16 x 16 pairs in registers (an
//     operand stored with k contiguous). Odd K, and rows/columns past M/N, are zero padded.
//   * tasks: a block of up to 8 x 10 tiles (64 rows x 480 columns), every tile over the whole K;
//     K is not blocked: the b panel (467 KB at K = 4864) streams from L2, and the whole GEMM still runs
//     at 80-90% of the measured VDPBF16PS peak on the hidden-896 shapes (bench/RESULTS.md, issue 23).
// Determinism: each c element is summed by one tile over all k-pairs in order, whatever the thread
// count and whichever column slice (tensor parallel) holds it; the lanes of a tile do not interact.
// GCC 12 reports its own masked-load/shuffle intrinsics as "may be used uninitialized" (a header
// false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "kernels/cpu/gemm_avx512bf16.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/bf16_pack.hpp"
#include "kernels/cpu/scratch.hpp"

// The tile kernel stays a separate function so its 24 accumulators are allocated on their own (inlined
// into the OpenMP region, GCC spills them: measured in gemm_avx512.cpp).
#define TRLHPC_BF16_KERNEL TRLHPC_BF16_TARGET __attribute__((noinline))

namespace trlhpc::cpu {
namespace {

constexpr int64_t kMR = 8;         // rows of a register tile
constexpr int64_t kNV = 3;         // zmm (16 columns each) per row of a register tile
constexpr int64_t kNR = 16 * kNV;  // columns of a register tile
constexpr int64_t kGroup = 16;     // rows/columns and pairs one packing step handles
constexpr int64_t kTaskRowPanels = 8, kTaskColPanels = 10;  // a task: up to 64 rows x 480 columns
constexpr int64_t kTasksPerThread = 4;  // enough tasks that the last one ends the others' wait

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Where an operand's values are: element (o, k) of op(x) (o = row of a or column of b) lies at
// o * ld + k when k_contiguous (a (M, K), b stored (N, K)), else at k * ld + o.
struct Source {
  GemmOperand x;
  bool k_contiguous;
  int64_t ld, outer, K;
};

// The packers walk 16 or 32 rows of the source side by side, more streams than the hardware
// prefetcher follows: each row's lines a few groups ahead are asked for explicitly (may lie past the
// row: a prefetch never faults). Measured on Zen 5, one thread: packing the k-row dy^T of dy^T x went
// from 13% to 6% of the GEMM; the transposed fp32 W of x W^T from 2.6-3.1 ms to 1.1-1.7 ms once both
// lines of each row's 32 fp32 were prefetched (128 elements ahead: 64 and 256-512 were slower).
constexpr int64_t kPrefetchElements = 128;
inline void prefetch_ahead(const GemmOperand& x, int64_t at) {
  const char* p = static_cast<const char*>(x.data) + at * (x.bf16 ? 2 : 4);
  _mm_prefetch(p, _MM_HINT_T0);
}

// v[q] = the 16 pairs (k 2(p0+q), 2(p0+q)+1) of o0 .. o0+15, one 32-bit lane per o, zeros past the edges.
TRLHPC_BF16_TARGET void pack_group(const Source& s, int64_t o0, int64_t p0, __m512i v[16]) {
  const int64_t valid = std::min(kGroup, s.outer - o0), k0 = 2 * p0;
  if (s.k_contiguous) {  // pairs contiguous per o: a 16 x 16 transpose of 32-bit lanes
    const int64_t ks = std::min<int64_t>(32, s.K - k0);
    for (int64_t j = 0; j < 16; ++j) {
      if (j >= valid) {
        v[j] = _mm512_setzero_si512();
        continue;
      }
      v[j] = bf16_load32(s.x, (o0 + j) * s.ld + k0, ks);
      prefetch_ahead(s.x, (o0 + j) * s.ld + k0 + kPrefetchElements);  // 32 fp32 are two lines
      if (!s.x.bf16) prefetch_ahead(s.x, (o0 + j) * s.ld + k0 + kPrefetchElements + 16);
    }
    bf16_transpose16(v);
    return;
  }
  // k rows: word 2n of the result = row k (element o0 + n), word 2n + 1 = row k + 1.
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                              6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int64_t q = 0; q < 16; ++q) {
    const int64_t ke = k0 + 2 * q;
    if (ke >= s.K) {
      v[q] = _mm512_setzero_si512();
      continue;
    }
    const __m256i even = bf16_load16(s.x, ke * s.ld + o0, valid);
    const __m256i odd = ke + 1 < s.K ? bf16_load16(s.x, (ke + 1) * s.ld + o0, valid) : _mm256_setzero_si256();
    prefetch_ahead(s.x, ke * s.ld + o0 + kPrefetchElements);
    if (ke + 1 < s.K) prefetch_ahead(s.x, (ke + 1) * s.ld + o0 + kPrefetchElements);
    v[q] = _mm512_permutexvar_epi16(interleave, _mm512_inserti64x4(_mm512_castsi256_si512(even), odd, 1));
  }
}

// Stores v (from pack_group) into panels of W rows/columns: panel o / W, [pair][o % W].
template <int64_t W>
TRLHPC_BF16_TARGET void store_group(uint32_t* packed, int64_t pairs, int64_t o0, int64_t p0, const __m512i v[16]) {
  static_assert(W % 16 == 0 || W == 8, "a packing group of 16 fills whole panels or two of 8");
  const int64_t n = std::min<int64_t>(16, pairs - p0);
  for (int64_t q = 0; q < n; ++q) {
    const int64_t p = p0 + q;
    if constexpr (W % 16 == 0) {
      _mm512_store_si512(packed + (o0 / W) * pairs * W + p * W + o0 % W, v[q]);
    } else {
      uint32_t* panel = packed + (o0 / W) * pairs * W + p * W;
      _mm256_store_si256(reinterpret_cast<__m256i*>(panel), _mm512_castsi512_si256(v[q]));
      _mm256_store_si256(reinterpret_cast<__m256i*>(panel + pairs * W), _mm512_extracti64x4_epi64(v[q], 1));
    }
  }
}

// Packs group g (16 rows/columns x 16 pairs) of an operand into panels of W. Consecutive groups read
// consecutive memory of the source: along k for a k-contiguous source, else along o, so every cache line
// of the source is read once and whole (walking down k rows of a k-row source crossed a 4 KiB page per
// row).
template <int64_t W>
TRLHPC_BF16_KERNEL void pack_operand_group(const Source& s, uint32_t* packed, int64_t pairs, int64_t g) {
  const int64_t pair_groups = (pairs + kGroup - 1) / kGroup;
  const int64_t outer_groups = round_up(s.outer, std::max(kGroup, W)) / kGroup;
  const int64_t o0 = (s.k_contiguous ? g / pair_groups : g % outer_groups) * kGroup;
  const int64_t p0 = (s.k_contiguous ? g % pair_groups : g / outer_groups) * kGroup;
  __m512i v[16];
  pack_group(s, o0, p0, v);
  store_group<W>(packed, pairs, o0, p0, v);
}

// dst = row `row` of a (M, K) as K/2 rounded up k-pairs of bf16, the odd K's last pair completed with 0.
TRLHPC_BF16_KERNEL void convert_row(const GemmOperand& a, int64_t K, int64_t row, uint32_t* dst) {
  for (int64_t k0 = 0; k0 < K; k0 += 32) _mm512_store_si512(dst + k0 / 2, bf16_load32(a, row * K + k0, K - k0));
}

// tile (kMR x kNR fp32) = kMR rows of a x a b panel over `pairs` k-pairs. Row r's pair p is at
// a_row[r][p * kAStep]: a panel (kAStep = kMR, a_row[r] = panel + r) or rows of pairs read in place
// (kAStep = 1, a_row[r] = row r). The c tile (c_first: a whole tile's first byte, or null) is prefetched
// first: it is written (or read, beta != 0) only after the k loop, and a product of tens of MB misses
// every cache.
template <int64_t kAStep>
TRLHPC_BF16_KERNEL void tile_kernel(const uint32_t* const (&a_row)[kMR], const uint32_t* __restrict b, int64_t pairs,
                                    float* __restrict tile, const char* c_first, int64_t c_row_bytes,
                                    int64_t c_tile_row_bytes) {
  if (c_first)
#pragma GCC unroll 8
    for (int64_t r = 0; r < kMR; ++r)
#pragma GCC unroll 3
      for (int64_t v = 0; v < kNV; ++v)  // the tile's row: 3 lines of fp32, 1.5 of bf16
        if (64 * v < c_tile_row_bytes) _mm_prefetch(c_first + r * c_row_bytes + 64 * v, _MM_HINT_T0);
  const uint32_t* a0 = a_row[0];
  const uint32_t* a1 = a_row[1];
  const uint32_t* a2 = a_row[2];
  const uint32_t* a3 = a_row[3];
  const uint32_t* a4 = a_row[4];
  const uint32_t* a5 = a_row[5];
  const uint32_t* a6 = a_row[6];
  const uint32_t* a7 = a_row[7];
  __m512 acc[kMR][kNV];
#pragma GCC unroll 8
  for (int64_t r = 0; r < kMR; ++r)
#pragma GCC unroll 3
    for (int64_t v = 0; v < kNV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    __m512bh bv[kNV];
#pragma GCC unroll 3
    for (int64_t v = 0; v < kNV; ++v) bv[v] = (__m512bh)_mm512_load_si512(b + p * kNR + 16 * v);
    const uint32_t* rows[kMR] = {a0, a1, a2, a3, a4, a5, a6, a7};
#pragma GCC unroll 8
    for (int64_t r = 0; r < kMR; ++r) {
      // An unaligned-safe 32-bit load (in-place bf16 rows are only 2-byte aligned), folded into the broadcast.
      const __m512bh av = (__m512bh)_mm512_broadcastd_epi32(_mm_loadu_si32(rows[r] + p * kAStep));
#pragma GCC unroll 3
      for (int64_t v = 0; v < kNV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
    }
  }
#pragma GCC unroll 8
  for (int64_t r = 0; r < kMR; ++r)
#pragma GCC unroll 3
    for (int64_t v = 0; v < kNV; ++v) _mm512_store_ps(tile + r * kNR + 16 * v, acc[r][v]);
}

// c rows [i0, i0 + rows), columns [j0, j0 + cols) = alpha * tile + beta * c (beta 0: c not read).
TRLHPC_BF16_TARGET void store_tile(const float* tile, const GemmResult& c, int64_t ldc, int64_t i0, int64_t j0,
                                   int64_t rows, int64_t cols, float alpha, float beta) {
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t v = 0; v < kNV && 16 * v < cols; ++v) {
      const __mmask16 m = bf16_mask16(cols - 16 * v);
      __m512 out = _mm512_mul_ps(va, _mm512_load_ps(tile + r * kNR + 16 * v));
      const int64_t at = (i0 + r) * ldc + j0 + 16 * v;
      if (c.bf16) {
        uint16_t* p = static_cast<uint16_t*>(c.data) + at;
        if (beta != 0.0f) {
          const __m512i old = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
          out = _mm512_fmadd_ps(vb, _mm512_castsi512_ps(_mm512_slli_epi32(old, 16)), out);
        }
        _mm256_mask_storeu_epi16(p, m, (__m256i)_mm512_cvtneps_pbh(out));
      } else {
        float* p = static_cast<float*>(c.data) + at;
        if (beta != 0.0f) out = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m, p), out);
        _mm512_mask_storeu_ps(p, m, out);
      }
    }
}

}  // namespace

void gemm_avx512bf16(const GemmOperand& a, bool trans_a, const GemmOperand& b, bool trans_b, const GemmResult& c,
                     int64_t M, int64_t N, int64_t K, float alpha, float beta) {
  const int64_t pairs = (K + 1) / 2;
  const Source sa{a, !trans_a, trans_a ? M : K, M, K}, sb{b, trans_b, trans_b ? K : N, N, K};
  const int64_t pair_groups = (pairs + kGroup - 1) / kGroup;
  // Packed operands, kept by the calling thread across calls (scratch.hpp), as 32-bit pairs.
  thread_local Scratch a_buffer, b_buffer;
  // a: rows of k-pairs when a is (M, K) (read in place when it is bf16 with an even K: no packing at
  // all), else panels. Converted rows are padded to whole lines and kept off multiples of 4 KiB apart,
  // so the tile's eight rows never share an L1 set.
  const bool a_rows = !trans_a, a_in_place = a_rows && a.bf16 && K % 2 == 0;
  int64_t a_ld = a_in_place ? K / 2 : round_up(pairs, kGroup);
  if (a_rows && !a_in_place && a_ld * 4 % 4096 == 0) a_ld += kGroup;
  const int64_t m_pad = round_up(M, std::max(kGroup, kMR)), n_pad = round_up(N, std::max(kGroup, kNR));
  uint32_t* ap =
      a_in_place ? nullptr : reinterpret_cast<uint32_t*>(a_buffer.reserve(a_rows ? M * a_ld : m_pad * pairs));
  const uint32_t* a_base = a_in_place ? static_cast<const uint32_t*>(a.data) : ap;
  uint32_t* bp = reinterpret_cast<uint32_t*>(b_buffer.reserve(n_pad * pairs));
  const int64_t a_groups = m_pad / kGroup * pair_groups, b_groups = n_pad / kGroup * pair_groups;
  const int64_t row_panels = (M + kMR - 1) / kMR, col_panels = (N + kNR - 1) / kNR;
  const int threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), (M * N + 4095) / 4096 + 1));
  // Tasks of kTaskRowPanels x kTaskColPanels tiles, halved (the larger side first) until every thread
  // has a few: a weight gradient of a small layer is only one or two such blocks.
  int64_t task_rows = kTaskRowPanels, task_cols = kTaskColPanels;
  auto blocks = [](int64_t panels, int64_t per_task) { return (panels + per_task - 1) / per_task; };
  while (blocks(row_panels, task_rows) * blocks(col_panels, task_cols) < kTasksPerThread * threads &&
         (task_rows > 1 || task_cols > 1)) {
    if (task_cols >= task_rows) task_cols = (task_cols + 1) / 2;
    else task_rows = (task_rows + 1) / 2;
  }
  const int64_t row_blocks = blocks(row_panels, task_rows), col_blocks = blocks(col_panels, task_cols);
  const int64_t c_elem = c.bf16 ? 2 : 4;
#pragma omp parallel num_threads(threads)
  {
    if (a_rows && !a_in_place) {
#pragma omp for schedule(static) nowait
      for (int64_t i = 0; i < M; ++i) convert_row(a, K, i, ap + i * a_ld);
    } else if (!a_rows) {
#pragma omp for schedule(static) nowait
      for (int64_t g = 0; g < a_groups; ++g) pack_operand_group<kMR>(sa, ap, pairs, g);
    }
#pragma omp for schedule(static)
    for (int64_t g = 0; g < b_groups; ++g) pack_operand_group<kNR>(sb, bp, pairs, g);
    alignas(64) float tile[kMR * kNR];
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < row_blocks * col_blocks; ++task) {
      const int64_t ib = task / col_blocks, jb = task % col_blocks;
      const int64_t ip_end = std::min(row_panels, (ib + 1) * task_rows);
      const int64_t jp_end = std::min(col_panels, (jb + 1) * task_cols);
      for (int64_t jp = jb * task_cols; jp < jp_end; ++jp)
        for (int64_t ip = ib * task_rows; ip < ip_end; ++ip) {
          const int64_t i0 = ip * kMR, j0 = jp * kNR, rows = std::min(kMR, M - i0), cols = std::min(kNR, N - j0);
          const uint32_t* a_row[kMR];
          for (int64_t r = 0; r < kMR; ++r)  // rows past M repeat the last one; they are not stored
            a_row[r] = a_rows ? a_base + (i0 + std::min(r, rows - 1)) * a_ld : ap + ip * pairs * kMR + r;
          const char* c_first = rows == kMR && cols == kNR ? static_cast<const char*>(c.data) + (i0 * N + j0) * c_elem
                                                           : nullptr;
          if (a_rows)
            tile_kernel<1>(a_row, bp + jp * pairs * kNR, pairs, tile, c_first, N * c_elem, kNR * c_elem);
          else
            tile_kernel<kMR>(a_row, bp + jp * pairs * kNR, pairs, tile, c_first, N * c_elem, kNR * c_elem);
          store_tile(tile, c, N, i0, j0, rows, cols, alpha, beta);
        }
    }
  }
}

}  // namespace trlhpc::cpu
