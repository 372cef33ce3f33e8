#pragma once
// The AVX512-BF16 engine of matmul_bf16 (kernels/cpu/gemm_avx512bf16.cpp), split from gemm_bf16.cpp,
// which chooses the engine. Same contract as matmul_bf16; the caller has checked the CPU (cpuid) and
// M, N, K >= 1, alpha != 0.
#include <cstdint>

#include "trlhpc/kernels/cpu.hpp"

namespace trlhpc::cpu {

void gemm_avx512bf16(const GemmOperand& a, bool trans_a, const GemmOperand& b, bool trans_b, const GemmResult& c,
                     int64_t M, int64_t N, int64_t K, float alpha, float beta);

}  // namespace trlhpc::cpu
