// The mixed-precision GEMM of `--bf16` (include/trlhpc/kernels/cpu.hpp, matmul_bf16):
//   c (M, N) = alpha * bf16(op(a)) @ bf16(op(b)) + beta * c, products and sums in fp32.
//
// Three engines, chosen once per process by CPUID (never by the build flags, so a binary built on an AMX
// machine runs everywhere; `--cpu_bf16_gemm amx|avx512bf16|f32|auto` overrides for the process):
//   * AMX (Intel Sapphire Rapids and later): TDPBF16PS on 16x16 fp32 tiles. Linux hands out the tile
//     state only after arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA); a refusal (old kernel) falls
//     back to the next engine instead of dying with SIGILL.
//   * AVX512-BF16 (AMD Zen 4/5, Intel Cooper Lake): VDPBF16PS on zmm accumulators, its own blocking in
//     gemm_avx512bf16.cpp.
//   * f32: the operands rounded to bf16 (round to nearest even) into fp32 buffers, then the fp32 GEMM.
//     Products of two bf16 values are exact in fp32, so only the summation order differs from the others.
//
// Layout of the AMX engine (TDPBF16PS consumes pairs of k in one 32-bit lane):
//   packed a: [M/32][Kp/32] blocks of 32 rows x 32 k, row-major (one AMX A tile = 16 of those rows);
//   packed b: [N/32][Kp/32] blocks of 16 k-pairs x 32 columns x 2 ("VNNI": b[2p][n], b[2p+1][n] adjacent;
//   one AMX B tile = 16 of those columns). Kp = K rounded up to 32, zero padded, as are M and N edges.
// Packing converts fp32 to bf16 (VCVTNE2PS2BF16, round to nearest even) and transposes with 16x16 32-bit
// register transposes where the operand is stored the other way round.
// Each c element is computed by one task over the whole K in a fixed order, so the result does not
// depend on the thread count or on which column slice (tensor parallel) a rank holds.
// GCC 12 reports its own masked-load intrinsics as "may be used uninitialized" (a header false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/cpu/bf16_pack.hpp"
#include "kernels/cpu/cpuid.hpp"
#include "kernels/cpu/gemm_avx512bf16.hpp"
#include "kernels/cpu/scratch.hpp"
#include "trlhpc/kernels/cpu.hpp"
#include "trlhpc/kernels/elementwise_math.hpp"

#define TRLHPC_AMX_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,amx-tile,amx-bf16")))

namespace trlhpc::cpu {
namespace {

using math::bf16_bits_from_float;
using math::float_from_bf16_bits;

constexpr int64_t kBlock = 32;       // rows, columns and k of one packed block
constexpr int64_t kBlockElems = kBlock * kBlock;
constexpr int64_t kChunkBlocks = 8;  // column blocks whose packed b stays in L2 while rows stream by

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// ---- engine choice -----------------------------------------------------------------------------------

bool cpu_has_avx512bf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512bf16");
}

bool cpu_has_amx_bf16() {
  // CPUID.(EAX=7,ECX=0):EDX bit 22 AMX-BF16, bit 24 AMX-TILE.
  const unsigned d = cpuid(7, 0).edx;
  return ((d >> 22) & 1u) && ((d >> 24) & 1u);
}

// Asks Linux for the AMX tile data state (process-wide; threads started later inherit it).
bool request_amx_permission() {
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

Bf16GemmEngine fastest_bf16_gemm() {
  if (bf16_gemm_available(Bf16GemmEngine::AMX)) return Bf16GemmEngine::AMX;
  return cpu_has_avx512bf16() ? Bf16GemmEngine::AVX512BF16 : Bf16GemmEngine::F32;
}

// The process's engine (one per process, like matmul's: see choose_bf16_gemm in cpu.hpp). Atomic:
// OpenMP threads read it in every matmul_bf16.
std::atomic<Bf16GemmEngine>& engine_slot() {
  static std::atomic<Bf16GemmEngine> engine{fastest_bf16_gemm()};
  return engine;
}

// ---- operand access ----------------------------------------------------------------------------------

// Element (i, j) of a row-major operand with `ld` columns, as the bf16 the GEMM multiplies.
inline uint16_t bf16_at(const GemmOperand& x, int64_t i, int64_t j, int64_t ld) {
  const int64_t at = i * ld + j;
  return x.bf16 ? static_cast<const uint16_t*>(x.data)[at] : bf16_bits_from_float(static_cast<const float*>(x.data)[at]);
}

// ---- packing -----------------------------------------------------------------------------------------

// One 32 x 32 block of packed a: rows [i0, i0+32) of op(a), k [k0, k0+32). dst: 32 rows of 32 bf16.
TRLHPC_BF16_TARGET void pack_a_block(const GemmOperand& a, bool trans_a, int64_t M, int64_t K, int64_t i0, int64_t k0,
                                     uint16_t* dst) {
  const int64_t rows = std::min<int64_t>(kBlock, M - i0), ks = std::min<int64_t>(kBlock, K - k0);
  if (!trans_a) {  // a (M, K): rows are contiguous in k
    for (int64_t r = 0; r < kBlock; ++r)
      _mm512_store_si512(dst + r * kBlock, r < rows ? bf16_load32(a, (i0 + r) * K + k0, ks) : _mm512_setzero_si512());
    return;
  }
  // a stored (K, M): element (i, k) at k * M + i. Pair rows k0+2p, k0+2p+1 (32 i each) into 32-bit
  // (k even, k odd) lanes, giving a [p][i] matrix of pairs, then transpose it into [i][p].
  const __m512i lo_idx = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                                          37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  const __m512i hi_idx = _mm512_set_epi16(63, 31, 62, 30, 61, 29, 60, 28, 59, 27, 58, 26, 57, 25, 56, 24, 55, 23, 54,
                                          22, 53, 21, 52, 20, 51, 19, 50, 18, 49, 17, 48, 16);
  __m512i pairs_lo[16], pairs_hi[16];  // pairs_lo[p] = (i 0..15) x (k 2p, 2p+1); pairs_hi: i 16..31
  for (int p = 0; p < 16; ++p) {
    const int64_t ke = 2 * p, ko = 2 * p + 1;
    const __m512i even = ke < ks ? bf16_load32(a, (k0 + ke) * M + i0, rows) : _mm512_setzero_si512();
    const __m512i odd = ko < ks ? bf16_load32(a, (k0 + ko) * M + i0, rows) : _mm512_setzero_si512();
    pairs_lo[p] = _mm512_permutex2var_epi16(even, lo_idx, odd);
    pairs_hi[p] = _mm512_permutex2var_epi16(even, hi_idx, odd);
  }
  bf16_transpose16(pairs_lo);  // now pairs_lo[i] = row i's 16 k-pairs = 32 bf16 along k
  bf16_transpose16(pairs_hi);
  for (int r = 0; r < 16; ++r) {
    _mm512_store_si512(dst + r * kBlock, pairs_lo[r]);
    _mm512_store_si512(dst + (r + 16) * kBlock, pairs_hi[r]);
  }
}

// One block of packed b: columns [j0, j0+32) of op(b), k [k0, k0+32). dst: 16 k-pairs x 32 columns x 2.
TRLHPC_BF16_TARGET void pack_b_block(const GemmOperand& b, bool trans_b, int64_t N, int64_t K, int64_t j0, int64_t k0,
                                     uint16_t* dst) {
  const int64_t cols = std::min<int64_t>(kBlock, N - j0), ks = std::min<int64_t>(kBlock, K - k0);
  if (!trans_b) {  // b (K, N): rows k contiguous in n; interleave rows 2p and 2p+1
    const __m512i lo_idx = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                                            37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i hi_idx = _mm512_set_epi16(63, 31, 62, 30, 61, 29, 60, 28, 59, 27, 58, 26, 57, 25, 56, 24, 55, 23, 54,
                                            22, 53, 21, 52, 20, 51, 19, 50, 18, 49, 17, 48, 16);
    for (int p = 0; p < 16; ++p) {
      const int64_t ke = 2 * p, ko = 2 * p + 1;
      const __m512i even = ke < ks ? bf16_load32(b, (k0 + ke) * N + j0, cols) : _mm512_setzero_si512();
      const __m512i odd = ko < ks ? bf16_load32(b, (k0 + ko) * N + j0, cols) : _mm512_setzero_si512();
      _mm512_store_si512(dst + p * 64, _mm512_permutex2var_epi16(even, lo_idx, odd));
      _mm512_store_si512(dst + p * 64 + 32, _mm512_permutex2var_epi16(even, hi_idx, odd));
    }
    return;
  }
  // b stored (N, K): row n holds its k-pairs contiguously: [n][p] of 32-bit pairs; transpose to [p][n].
  for (int half = 0; half < 2; ++half) {
    __m512i r[16];
    for (int n = 0; n < 16; ++n) {
      const int64_t col = half * 16 + n;
      r[n] = col < cols ? bf16_load32(b, (j0 + col) * K + k0, ks) : _mm512_setzero_si512();
    }
    bf16_transpose16(r);
    for (int p = 0; p < 16; ++p) _mm512_store_si512(dst + p * 64 + half * 32, r[p]);
  }
}

// ---- epilogue ----------------------------------------------------------------------------------------

// c block rows [i0, i0+rows), columns [j0, j0+cols) = alpha * acc + beta * c. acc: 32 x 32 fp32.
TRLHPC_BF16_TARGET void store_block(const float* acc, const GemmResult& c, int64_t N, int64_t i0, int64_t j0,
                                    int64_t rows, int64_t cols, float alpha, float beta) {
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < 2; ++h) {
      const int64_t n = std::min<int64_t>(16, cols - h * 16);
      if (n <= 0) break;
      const __mmask16 m = static_cast<__mmask16>((uint32_t{1} << n) - 1);
      __m512 v = _mm512_mul_ps(va, _mm512_load_ps(acc + r * kBlock + h * 16));
      const int64_t at = (i0 + r) * N + j0 + h * 16;
      if (c.bf16) {
        uint16_t* p = static_cast<uint16_t*>(c.data) + at;
        if (beta != 0.0f) {
          const __m512i old = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
          v = _mm512_fmadd_ps(vb, _mm512_castsi512_ps(_mm512_slli_epi32(old, 16)), v);
        }
        _mm256_mask_storeu_epi16(p, m, (__m256i)_mm512_cvtneps_pbh(v));
      } else {
        float* p = static_cast<float*>(c.data) + at;
        if (beta != 0.0f) v = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m, p), v);
        _mm512_mask_storeu_ps(p, m, v);
      }
    }
  }
}

// ---- AMX: one 32 x 32 block of c over all Kp --------------------------------------------------------

struct TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

TRLHPC_AMX_TARGET void amx_configure() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;  // c: 16 fp32; a: 32 bf16; b: 16 pairs x 2 bf16
  }
  _tile_loadconfig(&cfg);
}

// Out of line with the AMX target: the intrinsic may not be inlined into code compiled without it.
TRLHPC_AMX_TARGET void amx_release() { _tile_release(); }

TRLHPC_AMX_TARGET void amx_block(const uint16_t* pa, const uint16_t* pb, int64_t kblocks, float* acc) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t kb = 0; kb < kblocks; ++kb) {
    const uint16_t* a = pa + kb * kBlockElems;
    const uint16_t* b = pb + kb * kBlockElems;
    _tile_loadd(4, a, 64);
    _tile_loadd(5, a + 16 * kBlock, 64);
    _tile_loadd(6, b, 128);
    _tile_loadd(7, b + 32, 128);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, acc, 128);
  _tile_stored(1, acc + 16, 128);
  _tile_stored(2, acc + 16 * kBlock, 128);
  _tile_stored(3, acc + 16 * kBlock + 16, 128);
}

// The AMX engine: every 32 x 32 block of c over all of Kp, threads over row blocks.
void gemm_amx(const GemmOperand& a, bool trans_a, const GemmOperand& b, bool trans_b, const GemmResult& c, int64_t M,
              int64_t N, int64_t K, float alpha, float beta) {
  const int64_t mb = round_up(M, kBlock) / kBlock, nb = round_up(N, kBlock) / kBlock,
                kb = round_up(K, kBlock) / kBlock;
  // Scratch of the calling thread (see scratch.hpp): packed a and b, as bf16 in float-sized storage.
  thread_local Scratch packed_a, packed_b;
  uint16_t* pa = reinterpret_cast<uint16_t*>(packed_a.reserve((mb * kb * kBlockElems + 1) / 2));
  uint16_t* pb = reinterpret_cast<uint16_t*>(packed_b.reserve((nb * kb * kBlockElems + 1) / 2));
#pragma omp parallel
  {
#pragma omp for schedule(static) nowait
    for (int64_t t = 0; t < mb * kb; ++t)
      pack_a_block(a, trans_a, M, K, (t / kb) * kBlock, (t % kb) * kBlock, pa + t * kBlockElems);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < nb * kb; ++t)
      pack_b_block(b, trans_b, N, K, (t / kb) * kBlock, (t % kb) * kBlock, pb + t * kBlockElems);
    amx_configure();  // tile configuration is per thread
    alignas(64) float acc[kBlockElems];
    for (int64_t chunk = 0; chunk < nb; chunk += kChunkBlocks) {
      const int64_t chunk_end = std::min(nb, chunk + kChunkBlocks);
#pragma omp for schedule(static) nowait
      for (int64_t i = 0; i < mb; ++i) {
        for (int64_t j = chunk; j < chunk_end; ++j) {
          amx_block(pa + i * kb * kBlockElems, pb + j * kb * kBlockElems, kb, acc);
          store_block(acc, c, N, i * kBlock, j * kBlock, std::min(kBlock, M - i * kBlock),
                      std::min(kBlock, N - j * kBlock), alpha, beta);
        }
      }
    }
    amx_release();
  }
}

// Engine f32: round both operands to bf16 values held in fp32, multiply with the fp32 GEMM.
// The widened copies live in buffers the calling thread keeps (scratch.hpp): a fresh std::vector per call
// zero-filled and page-faulted a few MB three times per linear layer, which made --bf16 on AVX2-only CPUs
// 11 % slower than fp32 (issue 43). The loops are branch-free so that they vectorise; same values as before.
void widen_to_bf16_values(const GemmOperand& x, int64_t n, float* out) {
  if (x.bf16) {
    const uint16_t* in = static_cast<const uint16_t*>(x.data);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = float_from_bf16_bits(in[i]);
  } else {
    const float* in = static_cast<const float*>(x.data);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = math::round_to_bf16(in[i]);
  }
}

void gemm_emulated(const GemmOperand& a, bool trans_a, const GemmOperand& b, bool trans_b, const GemmResult& c,
                   int64_t M, int64_t N, int64_t K, float alpha, float beta) {
  thread_local Scratch a_values, b_values, c_values;
  float* af = a_values.reserve(M * K);
  float* bf = b_values.reserve(K * N);
  widen_to_bf16_values(a, M * K, af);
  widen_to_bf16_values(b, K * N, bf);
  if (!c.bf16) {
    matmul(af, trans_a, bf, trans_b, static_cast<float*>(c.data), M, N, K, alpha, beta);
    return;
  }
  uint16_t* cb = static_cast<uint16_t*>(c.data);
  float* cf = c_values.reserve(M * N);
  if (beta != 0.0f) widen_to_bf16_values(GemmOperand{cb, true}, M * N, cf);
  matmul(af, trans_a, bf, trans_b, cf, M, N, K, alpha, beta);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M * N; ++i) cb[i] = bf16_bits_from_float(cf[i]);
}

}  // namespace

Bf16GemmEngine bf16_gemm_engine() { return engine_slot().load(std::memory_order_relaxed); }

bool bf16_gemm_available(Bf16GemmEngine engine) {
  switch (engine) {
    case Bf16GemmEngine::AMX: {
      static const bool usable = cpu_has_avx512bf16() && cpu_has_amx_bf16() && request_amx_permission();
      return usable;
    }
    case Bf16GemmEngine::AVX512BF16: return cpu_has_avx512bf16();
    case Bf16GemmEngine::F32: return true;
  }
  return false;
}

std::string bf16_gemm_name() {
  switch (engine_slot().load(std::memory_order_relaxed)) {
    case Bf16GemmEngine::AMX: return "trlhpc AMX-BF16";
    case Bf16GemmEngine::AVX512BF16: return "trlhpc AVX512-BF16";
    case Bf16GemmEngine::F32: break;
  }
  return "fp32 GEMM on bf16-rounded inputs (no bf16 instructions)";
}


std::string choose_bf16_gemm(const std::string& engine) {
  Bf16GemmEngine chosen = Bf16GemmEngine::F32;
  if (engine == "auto") {
    chosen = fastest_bf16_gemm();
  } else if (engine == "amx") {
    if (!bf16_gemm_available(Bf16GemmEngine::AMX))
      return "--cpu_bf16_gemm amx: this CPU or Linux kernel has no usable AMX-BF16; use --cpu_bf16_gemm auto";
    chosen = Bf16GemmEngine::AMX;
  } else if (engine == "avx512bf16") {
    if (!cpu_has_avx512bf16()) return "--cpu_bf16_gemm avx512bf16: this CPU lacks AVX512-BF16; use --cpu_bf16_gemm auto or f32";
    chosen = Bf16GemmEngine::AVX512BF16;
  } else if (engine != "f32") {
    return "--cpu_bf16_gemm " + engine + ": expected auto, amx, avx512bf16 or f32";
  }
  engine_slot().store(chosen, std::memory_order_relaxed);
  return "";
}

GemmIsa bf16_gemm_isa() {
  switch (engine_slot().load(std::memory_order_relaxed)) {
    case Bf16GemmEngine::AMX: return GemmIsa::AmxBf16;
    case Bf16GemmEngine::AVX512BF16: return GemmIsa::Avx512Bf16;
    case Bf16GemmEngine::F32: break;
  }
  return fp32_gemm_isa();  // bf16-rounded operands through the fp32 GEMM
}

void matmul_bf16(const GemmOperand& a, bool trans_a, const GemmOperand& b, bool trans_b, const GemmResult& c,
                 int64_t M, int64_t N, int64_t K, float alpha, float beta, Bf16GemmEngine engine) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == 0.0f || engine == Bf16GemmEngine::F32) {
    gemm_emulated(a, trans_a, b, trans_b, c, M, N, std::max<int64_t>(K, 0), alpha, beta);
    return;
  }
  if (engine == Bf16GemmEngine::AMX)
    gemm_amx(a, trans_a, b, trans_b, c, M, N, K, alpha, beta);
  else
    gemm_avx512bf16(a, trans_a, b, trans_b, c, M, N, K, alpha, beta);
}

void matmul_bf16(const GemmOperand& a, bool trans_a, const GemmOperand& b, bool trans_b, const GemmResult& c,
                 int64_t M, int64_t N, int64_t K, float alpha, float beta) {
  matmul_bf16(a, trans_a, b, trans_b, c, M, N, K, alpha, beta, bf16_gemm_engine());
}

}  // namespace trlhpc::cpu
