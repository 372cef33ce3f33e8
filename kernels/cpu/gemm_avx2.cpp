// trlhpc's own fp32 GEMM for x86-64 CPUs with AVX2 + FMA but no AVX-512 (older EPYC and Xeon, many
// clusters): the blocking of gemm_avx512.cpp with 256-bit vectors.
//
// Why not OpenBLAS there: its sgemm does not give the same bits for every thread count and every column
// slice of the product (its edge kernels and small-matrix paths sum k differently), so data-parallel and
// tensor-parallel layouts stop being bit-identical to the 1-process run on those CPUs (issue 47). This
// kernel keeps the determinism contract of the AVX-512 one, and more: it computes every c element with
// the same operations in the same order as gemm_avx512 (K in the same equal blocks of at most 512, one
// fused multiply-add per k in order from a zero accumulator, then alpha * acc + beta * c), so the fp32
// results are the same bits on AVX2 and AVX-512 CPUs (tests/unit/test_cpu_gemm_avx2.cpp checks it).
//
//   c (M, N) = alpha * op(a) (M, K) @ op(b) (K, N) + beta * c          (row-major, any transposes)
//
// Micro-kernel 6 x 16: 12 ymm accumulators, two b-vectors and one broadcast of a (15 of 16 registers).
// b: packed per (KC x 16) panel, (k, 16) contiguous; the transposed case through 8 x 8 register transposes.
// a: packed per (row block, K block) into (KC x 6) panels, zero-padded, reused across the task's b panels
//    (read in place, the wgrad GEMM's transposed a ran at 57 GFLOP/s, packed 70-75, under load, on a Zen 3).
// The loops around the tile, the threads and the K blocks: gemm_blocked.hpp, shared with gemm_avx512.cpp.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/gemm_blocked.hpp"
#include "trlhpc/kernels/cpu.hpp"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define TRLHPC_AVX2 __attribute__((target("avx2,fma")))
// Separate (not inlined) micro-kernels and packers, as in gemm_avx512.cpp: inlined into the OpenMP region
// the accumulators spill.
#define TRLHPC_AVX2_KERNEL TRLHPC_AVX2 __attribute__((noinline))

namespace trlhpc::cpu {
namespace {

// kKC is gemm_blocked.hpp's, as for the AVX-512 kernel: it fixes where c is rounded between K blocks,
// and so the bits.
constexpr int64_t kMR = 6, kNR = 16;
using gemm_blocked::kKC;
using gemm_blocked::Operand;

// Lanes [0, n) set (n clamped to [0, 8]): the mask of _mm256_maskload_ps / _mm256_maskstore_ps, which
// neither read nor write the lanes left out (no fault past the end of a row).
TRLHPC_AVX2 inline __m256i low_mask(int64_t n) {
  const int count = static_cast<int>(std::clamp<int64_t>(n, 0, 8));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// col[t][r] = src[r * ld + t] for r < rows, t in mask (zeros elsewhere): 32-bit interleaves, 64-bit
// shuffles, then the exchange of 128-bit halves.
TRLHPC_AVX2 void transpose_8x8(const float* src, int64_t ld, int64_t rows, __m256i mask, __m256 (&col)[8]) {
  __m256 r[8], t[8], s[8];
  for (int64_t i = 0; i < 8; ++i) r[i] = i < rows ? _mm256_maskload_ps(src + i * ld, mask) : _mm256_setzero_ps();
  for (int64_t i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);      // per half: r0[0] r1[0] r0[1] r1[1]
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);  // per half: r0[2] r1[2] r0[3] r1[3]
  }
  for (int64_t g = 0; g < 2; ++g) {  // rows 4g .. 4g + 3: s[4g + c], per half, element c (+4) of the four rows
    s[4 * g + 0] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
    s[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
    s[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    s[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
  }
  for (int64_t c = 0; c < 4; ++c) {
    col[c] = _mm256_permute2f128_ps(s[c], s[4 + c], 0x20);
    col[4 + c] = _mm256_permute2f128_ps(s[c], s[4 + c], 0x31);
  }
}

// bp (kc, kNR) = op(b)[k0 : k0 + kc, j0 : j0 + nr], zero-padded to kNR columns.
TRLHPC_AVX2_KERNEL void pack_b_panel(const Operand& b, int64_t k0, int64_t kc, int64_t j0, int64_t nr, float* bp) {
  if (!b.trans) {  // b (K, N): each k is a contiguous row of nr floats
    const __m256i m0 = low_mask(nr), m1 = low_mask(nr - 8);
    for (int64_t k = 0; k < kc; ++k) {
      const float* src = b.p + (k0 + k) * b.ld + j0;
      _mm256_store_ps(bp + k * kNR, _mm256_maskload_ps(src, m0));
      _mm256_store_ps(bp + k * kNR + 8, _mm256_maskload_ps(src + 8, m1));
    }
    return;
  }
  // b (N, K): column j of op(b) is row j0 + j of b, contiguous in k; 8 rows x 8 k per register transpose.
  for (int64_t half = 0; half < 2; ++half) {
    const int64_t rows = std::clamp<int64_t>(nr - half * 8, 0, 8);
    for (int64_t kk = 0; kk < kc; kk += 8) {
      const int64_t width = std::min<int64_t>(8, kc - kk);
      __m256 col[8];
      transpose_8x8(b.p + (j0 + half * 8) * b.ld + k0 + kk, b.ld, rows, low_mask(width), col);
      for (int64_t t = 0; t < width; ++t) _mm256_store_ps(bp + (kk + t) * kNR + half * 8, col[t]);
    }
  }
}

// ap (kc, kMR) = op(a)[i0 : i0 + mr, k0 : k0 + kc] transposed, zero-padded to kMR rows. Every panel of a
// is packed here (kPackA below): read in place, six rows of a row-major a are six streams a page or more
// apart, and a transposed a gives 24 bytes per cache line per k; packed, the tile reads 24 contiguous
// bytes per k. The values, and so the bits, are those the tile read in place.
TRLHPC_AVX2_KERNEL void pack_a_panel(const Operand& a, int64_t i0, int64_t mr, int64_t k0, int64_t kc, float* ap) {
  const __m256i tile_rows = low_mask(kMR);
  if (a.trans) {  // a (K, M): the mr values of one k are contiguous
    const __m256i m = low_mask(mr);
    for (int64_t k = 0; k < kc; ++k)
      _mm256_maskstore_ps(ap + k * kMR, tile_rows, _mm256_maskload_ps(a.p + (k0 + k) * a.ld + i0, m));
    return;
  }
  // a (M, K): mr rows x 8 k per register transpose; column t holds the mr values of k (zeros above mr).
  for (int64_t kk = 0; kk < kc; kk += 8) {
    const int64_t width = std::min<int64_t>(8, kc - kk);
    __m256 col[8];
    transpose_8x8(a.p + i0 * a.ld + k0 + kk, a.ld, mr, low_mask(width), col);
    for (int64_t t = 0; t < width; ++t) _mm256_maskstore_ps(ap + (kk + t) * kMR, tile_rows, col[t]);
  }
}

// c[0:mr, 0:nr] = alpha * acc + beta * c (beta == 0: c is not read); the operations of gemm_avx512's
// store_tile, lane for lane.
TRLHPC_AVX2 __attribute__((always_inline)) inline void store_tile(const __m256 (&acc)[kMR][2], float* c, int64_t ldc, int64_t mr, int64_t nr,
                                   float alpha, float beta) {
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  const __m256i m0 = low_mask(nr), m1 = low_mask(nr - 8);
  // Fully unrolled, so acc is indexed by constants and stays in registers (a loop indexing it at run
  // time kept it in memory: every k stored all 12 accumulators, half the rate).
#pragma GCC unroll 6
  for (int64_t i = 0; i < kMR; ++i) {
    if (i >= mr) break;
    float* row = c + i * ldc;
    __m256 r0 = _mm256_mul_ps(va, acc[i][0]), r1 = _mm256_mul_ps(va, acc[i][1]);
    if (beta != 0.0f) {
      r0 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(row, m0), r0);
      r1 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(row + 8, m1), r1);
    }
    _mm256_maskstore_ps(row, m0, r0);
    _mm256_maskstore_ps(row + 8, m1, r1);
  }
}

// c tile = alpha * a^T bp + beta * c for an a whose mr values of one k are contiguous, k_step floats
// apart (a packed panel: k_step = kMR, any mr).
TRLHPC_AVX2_KERNEL void micro_kernel_columns(int64_t kc, const float* __restrict a, int64_t k_step,
                                             const float* __restrict bp, float* c, int64_t ldc, int64_t mr,
                                             int64_t nr, float alpha, float beta) {
  __m256 acc[kMR][2];
#pragma GCC unroll 6
  for (int64_t i = 0; i < kMR; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_load_ps(bp + k * kNR), b1 = _mm256_load_ps(bp + k * kNR + 8);
    const float* ak = a + k * k_step;
#pragma GCC unroll 6
    for (int64_t i = 0; i < kMR; ++i) {
      const __m256 av = _mm256_broadcast_ss(ak + i);
      acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
    }
  }
  store_tile(acc, c, ldc, mr, nr, alpha, beta);
}

// The register tile gemm_blocked.hpp sweeps.
struct Avx2Tile {
  static constexpr int64_t MR = kMR, NR = kNR;
  static constexpr bool kPackA = true;
  static void pack_b(const Operand& b, int64_t k0, int64_t kc, int64_t j0, int64_t nr, float* bp) {
    pack_b_panel(b, k0, kc, j0, nr, bp);
  }
  static void pack_a(const Operand& a, int64_t i0, int64_t mr, int64_t k0, int64_t kc, float* ap) {
    pack_a_panel(a, i0, mr, k0, kc, ap);
  }
  static void columns(int64_t kc, const float* a, int64_t k_step, const float* bp, float* c, int64_t ldc, int64_t mr,
                      int64_t nr, float alpha, float beta) {
    micro_kernel_columns(kc, a, k_step, bp, c, ldc, mr, nr, alpha, beta);
  }
};

}  // namespace

bool gemm_avx2_supported() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

void gemm_avx2(const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t M, int64_t N,
                           int64_t K, float alpha, float beta) {
  gemm_blocked::gemm<Avx2Tile>(a, trans_a, b, trans_b, c, M, N, K, alpha, beta);
}

}  // namespace trlhpc::cpu
