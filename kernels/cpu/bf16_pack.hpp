#pragma once
// Loading and transposing bf16 GEMM operands in AVX-512 registers, shared by the engines of
// gemm_bf16.cpp (AMX) and gemm_avx512bf16.cpp (AVX512-BF16). Compiled with the AVX512-BF16 target
// attribute, so callers must run only where cpuid reports AVX512-BF16.
//
// An operand is fp32 or bf16 bits (GemmOperand); an fp32 one is rounded to bf16 as it is loaded
// (VCVTNE(2)PS2BF16: round to nearest even).
#include <immintrin.h>

#include <cstdint>

#include "trlhpc/kernels/cpu.hpp"

#define TRLHPC_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))

namespace trlhpc::cpu {

// The lowest n of 16 (or 32) lanes; n <= 0: none.
inline __mmask16 bf16_mask16(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : n <= 0 ? 0 : static_cast<__mmask16>((1u << n) - 1u);
}
inline __mmask32 bf16_mask32(int64_t n) {
  return n >= 32 ? ~__mmask32{0} : n <= 0 ? 0 : static_cast<__mmask32>((uint64_t{1} << n) - 1);
}

// Elements [at, at + n) of x (n <= 16 valid, the rest zero) as 16 bf16.
TRLHPC_BF16_TARGET inline __m256i bf16_load16(const GemmOperand& x, int64_t at, int64_t n) {
  if (x.bf16) return _mm256_maskz_loadu_epi16(bf16_mask16(n), static_cast<const uint16_t*>(x.data) + at);
  return (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(bf16_mask16(n), static_cast<const float*>(x.data) + at));
}

// Elements [at, at + n) of x (n <= 32 valid, the rest zero) as 32 bf16.
TRLHPC_BF16_TARGET inline __m512i bf16_load32(const GemmOperand& x, int64_t at, int64_t n) {
  if (x.bf16) return _mm512_maskz_loadu_epi16(bf16_mask32(n), static_cast<const uint16_t*>(x.data) + at);
  const float* p = static_cast<const float*>(x.data) + at;
  const __m512 lo = _mm512_maskz_loadu_ps(bf16_mask16(n), p);
  const __m512 hi = n > 16 ? _mm512_maskz_loadu_ps(bf16_mask16(n - 16), p + 16) : _mm512_setzero_ps();
  return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

// In-register transpose of a 16 x 16 matrix of 32-bit elements (r[i] = row i): unpack 32-bit, then
// 64-bit pairs (each 128-bit lane then holds a transposed 4 x 4 block), then the 4 x 4 grid of lanes.
TRLHPC_BF16_TARGET inline void bf16_transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xdd);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
    r[i + 4] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0x88);
    r[i + 12] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0xdd);
  }
}

}  // namespace trlhpc::cpu
