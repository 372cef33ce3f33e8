// trlhpc's own fp32 GEMM for x86-64 CPUs with AVX-512 (the blocking of Goto & van de Geijn 2008,
// "Anatomy of high-performance matrix multiplication": a packed KC x NC block of op(b) shared by the
// threads, MR x NR register tiles swept over it).
//
// Why not only OpenBLAS: OpenBLAS picks its kernels once, at load, from OPENBLAS_CORETYPE when set, and
// machines that pin an AVX2 core (this VM does, machine-wide) lose half the matmul rate on AVX-512 CPUs;
// the transformer's GEMMs here are also small (hidden 384-896), where per-call packing of a and thread
// imbalance show. matmul.cpp chooses this kernel at run time when the CPU has AVX-512.
//
//   c (M, N) = alpha * op(a) (M, K) @ op(b) (K, N) + beta * c          (row-major, any transposes)
//
// Micro-kernel 12 x 32: 24 zmm accumulators; per k two b-vectors and twelve broadcasts of a.
// b: packed per (KC x 32) panel, (k, 32) contiguous; the transposed case through 16 x 16 register
//    transposes.
// a: read in place, not packed: twelve rows (row-major a) or one 48-byte run per k (transposed a, the
//    weight gradients), except a last partial panel of fewer than 12 rows, packed with zero padding.
// c: prefetched at the start of each tile, written once per K block as alpha * acc + beta * c (beta = 1
//    after the first block; beta = 0 never reads c).
// The loops around the tile (K in equal blocks of <= 512, MC 144, NC 3072), the threads and the
// determinism they give (the same bits for any thread count and M/N slice): gemm_blocked.hpp, shared
// with gemm_avx2.cpp.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/gemm_blocked.hpp"
#include "trlhpc/kernels/cpu.hpp"

// GCC 12's avx512fintrin.h builds unpack/shuffle results on _mm512_undefined_ps(), a self-initialised
// variable that -Wmaybe-uninitialized reports wherever they are inlined (a known false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define TRLHPC_AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma")))
// The micro-kernels and packers stay separate functions: inlined into the OpenMP region, GCC spilled the
// 24 accumulators to the stack (measured: 420 -> 290 GFLOP/s).
#define TRLHPC_AVX512_KERNEL TRLHPC_AVX512 __attribute__((noinline))

namespace trlhpc::cpu {
namespace {

constexpr int64_t kMR = 12, kNR = 32;
using gemm_blocked::kKC;
using gemm_blocked::Operand;

__mmask16 low_mask(int64_t n) { return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u); }

// 64-bit interleaves of two vectors (named functions, not lambdas: a lambda does not inherit the target
// attribute, so without -march=native the intrinsics would not inline into it).
TRLHPC_AVX512 __m512 unpacklo_64(__m512 x, __m512 y) { return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(x), _mm512_castps_pd(y))); }
TRLHPC_AVX512 __m512 unpackhi_64(__m512 x, __m512 y) { return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(x), _mm512_castps_pd(y))); }

// The float at byte address p in all 16 lanes (used by the micro-kernel's broadcasts).
TRLHPC_AVX512 inline __m512 broadcast_at(const char* p) { return _mm512_set1_ps(*reinterpret_cast<const float*>(p)); }

// col[t][r] = src[r * ld + t] for r < rows, t in mask (zeros elsewhere): a 16 x 16 transpose in three
// shuffle stages (32-bit pairs, 64-bit pairs, then a 4 x 4 transpose of 128-bit lanes).
TRLHPC_AVX512 void transpose_16x16(const float* src, int64_t ld, int64_t rows, __mmask16 mask, __m512 (&col)[16]) {
  __m512 r[16], t[16], u[16];
  for (int64_t i = 0; i < 16; ++i) r[i] = i < rows ? _mm512_maskz_loadu_ps(mask, src + i * ld) : _mm512_setzero_ps();
  for (int64_t i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);      // per lane: r0[0] r1[0] r0[1] r1[1]
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);  // per lane: r0[2] r1[2] r0[3] r1[3]
  }
  for (int64_t i = 0; i < 4; ++i) {  // u[4i + c], lane l: element 4l + c of rows 4i .. 4i + 3
    u[4 * i + 0] = unpacklo_64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = unpackhi_64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = unpacklo_64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = unpackhi_64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int64_t c = 0; c < 4; ++c) {  // lanes of u[c], u[4 + c], u[8 + c], u[12 + c] -> columns 4l + c
    const __m512 x0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x44), x1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xEE);
    const __m512 x2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x44), x3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xEE);
    col[0 + c] = _mm512_shuffle_f32x4(x0, x2, 0x88);
    col[4 + c] = _mm512_shuffle_f32x4(x0, x2, 0xDD);
    col[8 + c] = _mm512_shuffle_f32x4(x1, x3, 0x88);
    col[12 + c] = _mm512_shuffle_f32x4(x1, x3, 0xDD);
  }
}

// bp (kc, kNR) = op(b)[k0 : k0 + kc, j0 : j0 + nr], zero-padded to kNR columns.
TRLHPC_AVX512_KERNEL void pack_b_panel(const Operand& b, int64_t k0, int64_t kc, int64_t j0, int64_t nr, float* bp) {
  if (!b.trans) {  // b (K, N): each k is a contiguous row of nr floats
    const __mmask16 m0 = low_mask(nr), m1 = low_mask(nr - 16 > 0 ? nr - 16 : 0);
    for (int64_t k = 0; k < kc; ++k) {
      const float* src = b.p + (k0 + k) * b.ld + j0;
      _mm512_store_ps(bp + k * kNR, _mm512_maskz_loadu_ps(m0, src));
      _mm512_store_ps(bp + k * kNR + 16, _mm512_maskz_loadu_ps(m1, src + 16));
    }
    return;
  }
  // b (N, K): column j of op(b) is row j0 + j of b, contiguous in k. 16 rows x 16 k at a time are
  // transposed in registers (a scalar copy cost ~9% of the forward GEMMs x W^T at hidden 896).
  for (int64_t half = 0; half < 2; ++half) {
    const int64_t rows = std::max<int64_t>(0, std::min<int64_t>(16, nr - half * 16));
    for (int64_t kk = 0; kk < kc; kk += 16) {
      const int64_t width = std::min<int64_t>(16, kc - kk);
      const __mmask16 m = low_mask(width);
      __m512 col[16];
      transpose_16x16(b.p + (j0 + half * 16) * b.ld + k0 + kk, b.ld, rows, m, col);
      for (int64_t t = 0; t < width; ++t) _mm512_store_ps(bp + (kk + t) * kNR + half * 16, col[t]);
    }
  }
}

// ap (kc, kMR) = op(a)[i0 : i0 + mr, k0 : k0 + kc] transposed, zero-padded to kMR rows.
TRLHPC_AVX512_KERNEL void pack_a_panel(const Operand& a, int64_t i0, int64_t mr, int64_t k0, int64_t kc, float* ap) {
  if (a.trans) {  // a (K, M): the mr values of one k are contiguous
    const __mmask16 m = low_mask(mr);
    for (int64_t k = 0; k < kc; ++k) {
      const __m512 v = _mm512_maskz_loadu_ps(m, a.p + (k0 + k) * a.ld + i0);
      _mm512_mask_storeu_ps(ap + k * kMR, static_cast<__mmask16>(0x0FFF), v);
    }
    return;
  }
  // a (M, K): row i0 + i of a is contiguous in k.
  for (int64_t i = 0; i < kMR; ++i) {
    if (i >= mr) {
      for (int64_t k = 0; k < kc; ++k) ap[k * kMR + i] = 0.0f;
      continue;
    }
    const float* src = a.p + (i0 + i) * a.ld + k0;
    for (int64_t k = 0; k < kc; ++k) ap[k * kMR + i] = src[k];
  }
}

// Writes one register tile: c[0:mr, 0:nr] = alpha * acc + beta * c   (beta == 0: c is not read).
TRLHPC_AVX512 inline void store_tile(const __m512 (&acc)[kMR][2], float* c, int64_t ldc, int64_t mr, int64_t nr,
                                     float alpha, float beta) {
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  const __mmask16 m0 = low_mask(nr), m1 = low_mask(nr > 16 ? nr - 16 : 0);
#pragma GCC unroll 12
  for (int64_t i = 0; i < kMR; ++i) {
    if (i >= mr) break;
    float* row = c + i * ldc;
    __m512 r0 = _mm512_mul_ps(va, acc[i][0]), r1 = _mm512_mul_ps(va, acc[i][1]);
    if (beta != 0.0f) {
      r0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, row), r0);
      r1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, row + 16), r1);
    }
    _mm512_mask_storeu_ps(row, m0, r0);
    _mm512_mask_storeu_ps(row + 16, m1, r1);
  }
}

// Brings the c tile (kMR rows of 128 bytes) towards L1 while the k loop runs: c is read (beta != 0) or
// written only after the loop, and a product of a few MB lives in L3, whose latency would otherwise
// stall the tile's 24 loads/stores (measured: 350 -> 400+ GFLOP/s on 2048 x 896 x 896).
TRLHPC_AVX512 inline void prefetch_tile(const float* c, int64_t ldc) {
#pragma GCC unroll 12
  for (int64_t i = 0; i < kMR; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16), _MM_HINT_T0);
  }
}

// c[0:mr, 0:nr] = alpha * a^T bp + beta * c for an a whose mr values of one k are contiguous, k_step
// floats apart: a packed panel (k_step = kMR, any mr) or whole columns of a transposed a read in place
// (a stored (K, M), k_step = lda, mr = kMR). Weight gradients (dW += dy^T x) read dy the second way
// instead of packing it: twelve broadcasts from one 48-byte run per k.
TRLHPC_AVX512_KERNEL void micro_kernel_columns(int64_t kc, const float* __restrict a, int64_t k_step,
                                               const float* __restrict bp, float* c, int64_t ldc, int64_t mr,
                                               int64_t nr, float alpha, float beta) {
  if (mr == kMR) prefetch_tile(c, ldc);  // a partial tile's rows past mr may lie past the end of c
  __m512 acc[kMR][2];
#pragma GCC unroll 12
  for (int64_t i = 0; i < kMR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_load_ps(bp + k * kNR), b1 = _mm512_load_ps(bp + k * kNR + 16);
    const float* ak = a + k * k_step;
#pragma GCC unroll 12
    for (int64_t i = 0; i < kMR; ++i) {
      const __m512 av = _mm512_set1_ps(ak[i]);
      acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
    }
  }
  store_tile(acc, c, ldc, mr, nr, alpha, beta);
}

// The same for kMR whole rows of a row-major a (rows lda floats apart, contiguous in k), read in place:
// packing a (M, K) panel is a scalar transpose that costs as much as the FMAs it feeds when N is small
// (k/v projections: N = 128). Four row pointers and the byte stride address the twelve rows
// (base + stride * {0, 1, 2}), so the loop needs few registers besides the 24 accumulators.
TRLHPC_AVX512_KERNEL void micro_kernel_rows(int64_t kc, const float* a, int64_t lda, const float* __restrict bp, float* c,
                                     int64_t ldc, int64_t nr, float alpha, float beta) {
  prefetch_tile(c, ldc);
  __m512 acc[kMR][2];
#pragma GCC unroll 12
  for (int64_t i = 0; i < kMR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  const int64_t stride = lda * static_cast<int64_t>(sizeof(float));
  const char* r0 = reinterpret_cast<const char*>(a);
  const char* r1 = r0 + 3 * stride;
  const char* r2 = r0 + 6 * stride;
  const char* r3 = r0 + 9 * stride;
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_load_ps(bp + k * kNR), b1 = _mm512_load_ps(bp + k * kNR + 16);
    const char* base[4] = {r0, r1, r2, r3};
#pragma GCC unroll 12
    for (int64_t i = 0; i < kMR; ++i) {
      const __m512 av = broadcast_at(base[i / 3] + (i % 3) * stride);  // one broadcast, used at once: no spills
      acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
    }
    r0 += sizeof(float);
    r1 += sizeof(float);
    r2 += sizeof(float);
    r3 += sizeof(float);
  }
  store_tile(acc, c, ldc, kMR, nr, alpha, beta);
}

// The register tile gemm_blocked.hpp sweeps.
struct Avx512Tile {
  static constexpr int64_t MR = kMR, NR = kNR;
  static constexpr bool kPackA = false;  // a read in place (measured on AVX-512 machines; gemm_blocked.hpp)
  static void pack_b(const Operand& b, int64_t k0, int64_t kc, int64_t j0, int64_t nr, float* bp) {
    pack_b_panel(b, k0, kc, j0, nr, bp);
  }
  static void pack_a(const Operand& a, int64_t i0, int64_t mr, int64_t k0, int64_t kc, float* ap) {
    pack_a_panel(a, i0, mr, k0, kc, ap);
  }
  static void rows(int64_t kc, const float* a, int64_t lda, const float* bp, float* c, int64_t ldc, int64_t nr,
                   float alpha, float beta) {
    micro_kernel_rows(kc, a, lda, bp, c, ldc, nr, alpha, beta);
  }
  static void columns(int64_t kc, const float* a, int64_t k_step, const float* bp, float* c, int64_t ldc, int64_t mr,
                      int64_t nr, float alpha, float beta) {
    micro_kernel_columns(kc, a, k_step, bp, c, ldc, mr, nr, alpha, beta);
  }
};

}  // namespace

bool gemm_avx512_supported() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

void gemm_avx512(const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t M, int64_t N,
                 int64_t K, float alpha, float beta) {
  gemm_blocked::gemm<Avx512Tile>(a, trans_a, b, trans_b, c, M, N, K, alpha, beta);
}

}  // namespace trlhpc::cpu
