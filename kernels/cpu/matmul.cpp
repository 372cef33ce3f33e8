// Dense matmul and bias for the CPU backend (fp32; trlhpc's AVX-512 or AVX2 GEMM, or OpenBLAS sgemm; OpenMP).
//
// matmul:   c (M, N) = alpha * op(a) @ op(b) + beta * c,   op(x) = x or x^T.
//           Every linear layer uses it three times: y = x W^T (forward), dx = dy W, dW += dy^T x
//           (backward, beta = 1 so parameter gradients accumulate). Row-major throughout, so the
//           leading dimension of an operand is its number of stored columns.
// bias_add: y (N, C) += bias (C) on every row.         Gradient: dbias = sum over rows of dy.
// bias_bwd: dbias (C) += sum_n dy (N, C).              Parallel over column blocks and summing rows in
//           order, so the result does not depend on the thread count.
// The GEMM, chosen by CPUID: trlhpc's own gemm_avx512.cpp on CPUs with AVX-512, gemm_avx2.cpp on CPUs
// with AVX2 + FMA only (the two give the same bits), OpenBLAS on older CPUs.
// `--cpu_gemm openblas|avx512|avx2|auto` overrides the choice for the whole process (choose_cpu_gemm,
// which make_ops calls before the first GEMM). OpenBLAS keeps a weaker contract: its bits may change
// with the thread count and the column slice (docs/CONTRACT.md).
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "trlhpc/kernels/cpu.hpp"

namespace trlhpc::cpu {
namespace {

enum class Gemm { OpenBlas, Avx2, Avx512 };

Gemm fastest_gemm() {
  return gemm_avx512_supported() ? Gemm::Avx512 : gemm_avx2_supported() ? Gemm::Avx2 : Gemm::OpenBlas;
}

// The process's engine: one per process, not per Ops, because kernels multiply inside other kernels
// (cross entropy, attention) without an Ops at hand. Atomic: OpenMP threads read it in every matmul.
std::atomic<Gemm>& engine_slot() {
  static std::atomic<Gemm> engine{fastest_gemm()};
  return engine;
}

Gemm gemm_engine() { return engine_slot().load(std::memory_order_relaxed); }

}  // namespace

std::string cpu_gemm_name() {
  switch (gemm_engine()) {
    case Gemm::Avx512: return "trlhpc AVX-512";
    case Gemm::Avx2: return "trlhpc AVX2";
    case Gemm::OpenBlas: break;
  }
  return "OpenBLAS";
}

std::string choose_cpu_gemm(const std::string& engine) {
  Gemm chosen = fastest_gemm();
  if (engine == "openblas") {
    chosen = Gemm::OpenBlas;
  } else if (engine == "avx512") {
    if (!gemm_avx512_supported()) return "--cpu_gemm avx512: this CPU lacks AVX-512 F/VL/DQ/BW; use --cpu_gemm auto, avx2 or openblas";
    chosen = Gemm::Avx512;
  } else if (engine == "avx2") {
    if (!gemm_avx2_supported()) return "--cpu_gemm avx2: this CPU lacks AVX2/FMA; use --cpu_gemm auto or openblas";
    chosen = Gemm::Avx2;
  } else if (engine != "auto") {
    return "--cpu_gemm " + engine + ": expected auto, avx512, avx2 or openblas";
  }
  engine_slot().store(chosen, std::memory_order_relaxed);
  return "";
}

GemmIsa fp32_gemm_isa() {
  switch (gemm_engine()) {
    case Gemm::Avx512: return GemmIsa::Avx512Fma;
    case Gemm::Avx2: return GemmIsa::Avx2Fma;
    case Gemm::OpenBlas: break;
  }
  // OpenBLAS picks its kernel for the CPU it runs on (DYNAMIC_ARCH), so the CPU's widest FMA is the
  // ISA it computes with.
  if (gemm_avx512_supported()) return GemmIsa::Avx512Fma;
  return gemm_avx2_supported() ? GemmIsa::Avx2Fma : GemmIsa::NoFma;
}

void matmul(const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t M, int64_t N, int64_t K,
            float alpha, float beta) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == 0.0f) {
    // Nothing to multiply: c = beta * c, with beta = 0 meaning "overwrite" even when c holds NaN.
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < M; ++i) {
      float* row = c + i * N;  // (N)
      if (beta == 0.0f)
        std::fill(row, row + N, 0.0f);
      else
        for (int64_t j = 0; j < N; ++j) row[j] *= beta;
    }
    return;
  }
  if (gemm_engine() == Gemm::Avx512) {
    gemm_avx512(a, trans_a, b, trans_b, c, M, N, K, alpha, beta);
    return;
  }
  if (gemm_engine() == Gemm::Avx2) {
    gemm_avx2(a, trans_a, b, trans_b, c, M, N, K, alpha, beta);
    return;
  }
  const int64_t lda = trans_a ? M : K;  // a is (K, M) when transposed, else (M, K)
  const int64_t ldb = trans_b ? K : N;  // b is (N, K) when transposed, else (K, N)
  // OpenBLAS treats beta == 0 as "do not read c" (its beta kernel writes zeros), so NaN in c is safe.
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(M), static_cast<blasint>(N), static_cast<blasint>(K), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(N));
}

void bias_add(float* y, const float* bias, int64_t N, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    float* row = y + n * C;  // (C)
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) row[c] += bias[c];
  }
}

void bias_bwd(const float* dy, float* dbias, int64_t N, int64_t C) {
  // Column blocks of 64 floats (four cache lines) per task; each block sums its rows in order in
  // double, so the answer is the same for every thread count.
  constexpr int64_t kCols = 64;
  const int64_t blocks = (C + kCols - 1) / kCols;
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t c0 = blk * kCols, c1 = std::min(C, c0 + kCols);
    double acc[kCols] = {};
    for (int64_t n = 0; n < N; ++n) {
      const float* row = dy + n * C;  // (C)
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) acc[c - c0] += row[c];
    }
    for (int64_t c = c0; c < c1; ++c) dbias[c] += static_cast<float>(acc[c - c0]);
  }
}

}  // namespace trlhpc::cpu
