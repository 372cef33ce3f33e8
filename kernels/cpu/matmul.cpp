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
// with AVX2 + FMA only (the two give the same bits), OpenBLAS on older CPUs. TRLHPC_CPU_GEMM=
// openblas|avx512|avx2|auto overrides the choice, read once per process (a bad value is reported by
// cpu_gemm_check(), which `trlhpc sft` and `trlhpc env` call at start-up). OpenBLAS keeps a weaker
// contract: its bits may change with the thread count and the column slice (docs/CONTRACT.md).
#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "trlhpc/kernels/cpu.hpp"

namespace trlhpc::cpu {
namespace {

enum class Gemm { OpenBlas, Avx2, Avx512 };

struct GemmChoice {
  Gemm engine = Gemm::OpenBlas;
  std::string error;  // non-empty: TRLHPC_CPU_GEMM is unusable (the best supported engine runs meanwhile)
};

GemmChoice choose_gemm() {
  const char* env = std::getenv("TRLHPC_CPU_GEMM");
  const std::string want = env ? env : "auto";
  const bool has512 = gemm_avx512_supported(), has2 = gemm_avx2_supported();
  GemmChoice choice;
  choice.engine = has512 ? Gemm::Avx512 : has2 ? Gemm::Avx2 : Gemm::OpenBlas;
  if (want == "auto") return choice;
  if (want == "openblas") {
    choice.engine = Gemm::OpenBlas;
  } else if (want == "avx512") {
    if (!has512) choice.error = "TRLHPC_CPU_GEMM=avx512 but this CPU lacks AVX-512 F/VL/DQ/BW; unset it or set avx2 or openblas";
  } else if (want == "avx2") {
    if (has2)
      choice.engine = Gemm::Avx2;
    else
      choice.error = "TRLHPC_CPU_GEMM=avx2 but this CPU lacks AVX2/FMA; unset it or set openblas";
  } else {
    choice.error = "TRLHPC_CPU_GEMM=" + want + " is not one of openblas, avx512, avx2, auto";
  }
  return choice;
}

const GemmChoice& gemm_choice() {
  static const GemmChoice choice = choose_gemm();
  return choice;
}

}  // namespace

std::string cpu_gemm_name() {
  switch (gemm_choice().engine) {
    case Gemm::Avx512: return "trlhpc AVX-512";
    case Gemm::Avx2: return "trlhpc AVX2";
    case Gemm::OpenBlas: break;
  }
  return "OpenBLAS";
}
std::string cpu_gemm_check() { return gemm_choice().error; }

GemmIsa fp32_gemm_isa() {
  switch (gemm_choice().engine) {
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
  if (gemm_choice().engine == Gemm::Avx512) {
    gemm_avx512(a, trans_a, b, trans_b, c, M, N, K, alpha, beta);
    return;
  }
  if (gemm_choice().engine == Gemm::Avx2) {
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
