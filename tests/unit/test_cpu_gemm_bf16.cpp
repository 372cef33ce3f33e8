// Tests of kernels/cpu/gemm_bf16.cpp (the --bf16 GEMM), each engine the CPU can run (AMX, AVX512-BF16,
// and the fp32 GEMM on bf16-rounded inputs, which runs everywhere); an engine the CPU lacks is skipped
// with the reason, never passed.
//
// Reference: the double product of the operands rounded to bf16 (round to nearest even, core/dtype.hpp).
// Products of two bf16 values are exact in fp32, so the engines differ from it only by fp32 summation:
// |err| <= K * 2^-24 * sum_k |a_ik b_kj| (worst case; inputs here are in [-1, 1], so sum|ab| <= K). With
// K <= 300 that is <= 300 * 6e-8 * 300 = 5.4e-3 absolute in the worst case and ~sqrt(K) * 6e-8 * sqrt(K)
// typically: atol 2e-4 + rtol 1e-4 sits between, above what fp32 sums show and far below one bf16 ulp
// of the inputs (2^-8), so a missing or wrong rounding of an operand fails. The one K = 2048 case
// (a blocking edge) has a worst case of 2048 * 6e-8 = 1.2e-4 of sum|ab|, about the rtol, and typical
// errors ~sqrt(K) times smaller. A bf16 result adds one
// rounding of the output: rtol 2^-8.
// Against the fp32 GEMM on the unrounded operands (the "fp32 kernel" bound of the standards): each
// input moves by at most 2^-9 relative, so |err| <= 2 * 2^-9 * sum|a||b| + the fp32 terms above.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <string>
#include <vector>

#include "trlhpc/core/dtype.hpp"
#include "trlhpc/kernels/cpu.hpp"
#include "trlhpc/ops/ops.hpp"
#include "test_support.hpp"

namespace {

using trlhpc::bf16_to_f32;
using trlhpc::f32_to_bf16;
using trlhpc::cpu::Bf16GemmEngine;
using trlhpc::cpu::GemmOperand;
using trlhpc::cpu::GemmResult;
using trlhpc::testing::random_floats;

float rounded(float x) { return bf16_to_f32(f32_to_bf16(x)); }

std::vector<uint16_t> to_bf16(const std::vector<float>& x) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = f32_to_bf16(x[i]);
  return out;
}

// alpha * bf16(op(a)) bf16(op(b)) + beta * c in double; also sum |a||b| per element for the bound.
void reference(const std::vector<float>& a, bool ta, const std::vector<float>& b, bool tb, const std::vector<float>& c,
               int64_t M, int64_t N, int64_t K, double alpha, double beta, std::vector<double>& out,
               std::vector<double>& magnitude) {
  out.assign(static_cast<size_t>(M * N), 0.0);
  magnitude.assign(static_cast<size_t>(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double x = rounded(ta ? a[k * M + i] : a[i * K + k]), y = rounded(tb ? b[j * K + k] : b[k * N + j]);
        acc += x * y;
        mag += std::fabs(x * y);
      }
      out[i * N + j] = alpha * acc + (beta == 0.0 ? 0.0 : beta * c[i * N + j]);
      magnitude[i * N + j] = std::fabs(alpha) * mag + std::fabs(beta * c[i * N + j]);
    }
}

std::string engine_name(Bf16GemmEngine e) {
  return e == Bf16GemmEngine::AMX ? "amx" : e == Bf16GemmEngine::AVX512BF16 ? "avx512bf16" : "f32";
}

class GemmBf16 : public ::testing::TestWithParam<Bf16GemmEngine> {
 protected:
  void SetUp() override {
    if (!trlhpc::cpu::bf16_gemm_available(GetParam()))
      GTEST_SKIP() << "this CPU (or kernel) cannot run the " << engine_name(GetParam()) << " engine";
  }
};

struct Case {
  int64_t M, N, K;
};

TEST_P(GemmBf16, MatchesReferenceForEveryLayoutAndStorage) {
  // Edges of every engine's blocking: 32-blocks (AMX), 8 x 48 register tiles and 16-wide packing groups
  // (AVX512-BF16), K = 1 and 2 (one pair, odd and even), odd K, K = 2048 (converted rows 4 KiB long get
  // padded), more than one 64 x 480 task in both directions.
  const Case cases[] = {{1, 1, 1},  {32, 32, 32}, {33, 65, 31}, {70, 47, 300},  {5, 129, 64},
                        {96, 17, 97}, {9, 50, 2},   {13, 49, 2048}, {137, 530, 67}};
  int variant = 0;
  for (const Case& s : cases)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (int storage = 0; storage < 8; ++storage, ++variant) {
          const bool a16 = storage & 1, b16 = storage & 2, c16 = storage & 4;
          const float alpha = variant % 3 == 0 ? 0.5f : 1.0f, beta = variant % 2 == 0 ? 0.0f : 1.0f;
          std::vector<float> a = random_floats(static_cast<size_t>(s.M * s.K), 11 + variant);
          std::vector<float> b = random_floats(static_cast<size_t>(s.K * s.N), 29 + variant);
          std::vector<float> c = random_floats(static_cast<size_t>(s.M * s.N), 41 + variant);
          if (c16)
            for (float& x : c) x = rounded(x);  // the bf16 c holds exactly these values
          const std::vector<uint16_t> a_h = to_bf16(a), b_h = to_bf16(b);
          std::vector<uint16_t> c_h = to_bf16(c);
          std::vector<float> c_f = c;
          if (beta == 0.0f) {  // beta 0 must ignore c, NaN included
            std::fill(c_f.begin(), c_f.end(), std::nanf(""));
            std::fill(c_h.begin(), c_h.end(), uint16_t{0x7fc0});
          }
          const GemmOperand ao{a16 ? static_cast<const void*>(a_h.data()) : a.data(), a16};
          const GemmOperand bo{b16 ? static_cast<const void*>(b_h.data()) : b.data(), b16};
          const GemmResult co{c16 ? static_cast<void*>(c_h.data()) : c_f.data(), c16};
          trlhpc::cpu::matmul_bf16(ao, ta, bo, tb, co, s.M, s.N, s.K, alpha, beta, GetParam());
          std::vector<double> want, mag;
          reference(a, ta, b, tb, c, s.M, s.N, s.K, alpha, beta, want, mag);
          for (int64_t i = 0; i < s.M * s.N; ++i) {
            const double got = c16 ? bf16_to_f32(c_h[i]) : c_f[i];
            const double tol = 2e-4 + 1e-4 * mag[i] + (c16 ? std::ldexp(std::fabs(want[i]), -8) : 0.0);
            ASSERT_NEAR(got, want[i], tol) << "M " << s.M << " N " << s.N << " K " << s.K << " ta " << ta << " tb "
                                           << tb << " storage " << storage << " element " << i;
          }
        }
}

TEST_P(GemmBf16, WithinTheStatedBoundOfTheFp32Gemm) {
  const int64_t M = 64, N = 96, K = 256;
  const std::vector<float> a = random_floats(M * K, 3), b = random_floats(K * N, 4);
  std::vector<float> got(M * N), fp32(M * N);
  trlhpc::cpu::matmul_bf16({a.data(), false}, false, {b.data(), false}, true, {got.data(), false}, M, N, K, 1, 0,
                           GetParam());
  trlhpc::cpu::matmul(a.data(), false, b.data(), true, fp32.data(), M, N, K, 1, 0);
  double worst = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double mag = 0;
      for (int64_t k = 0; k < K; ++k) mag += std::fabs(double(a[i * K + k]) * b[j * K + k]);
      const double err = std::fabs(double(got[i * N + j]) - fp32[i * N + j]);
      ASSERT_LE(err, 2 * std::ldexp(mag, -9) + 2e-4 + 1e-4 * mag) << i << "," << j;
      worst = std::max(worst, err);
    }
  EXPECT_GT(worst, 0.0) << "bf16 rounding should be visible against fp32 on random inputs";
}

// Each c element is summed by one task over the whole K in a fixed order: 1, 2 or 3 threads and any
// column slice (a tensor-parallel rank's columns of b, stored contiguously as that rank holds them) give
// the same bits, for every layout and storage, on shapes of one and of many tasks.
TEST_P(GemmBf16, SameBitsForAnyThreadCountAndColumnSlice) {
  // The f32 engine runs matmul's fp32 GEMM. trlhpc's AVX-512 and AVX2 GEMMs keep this contract; OpenBLAS
  // (forced with --cpu_gemm openblas, or on CPUs older than AVX2) does not promise it: its edge kernels
  // sum k differently for different column slices. Its weaker contract, agreement within the fp32 bound,
  // is MatchesReferenceForEveryLayoutAndStorage on that engine.
  if (GetParam() == Bf16GemmEngine::F32 && trlhpc::cpu::cpu_gemm_name() == "OpenBLAS")
    GTEST_SKIP() << "the fp32 GEMM is OpenBLAS, which does not promise the same bits for every thread count and "
                    "column slice (docs/CONTRACT.md); its accuracy is checked by the reference test";
  const Case cases[] = {{77, 150, 130}, {137, 530, 67}, {40, 100, 1}};
  int variant = 0;
  for (const Case& s : cases)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (int storage = 0; storage < 4; ++storage, ++variant) {
          const bool a16 = storage & 1, b16 = storage & 2;
          const int64_t M = s.M, N = s.N, K = s.K;
          const std::vector<float> a = random_floats(M * K, 5 + variant), b = random_floats(N * K, 6 + variant);
          const std::vector<uint16_t> a_h = to_bf16(a), b_h = to_bf16(b);
          const GemmOperand ao{a16 ? static_cast<const void*>(a_h.data()) : a.data(), a16};
          auto run = [&](const GemmOperand& bo, int64_t n, int threads) {
            std::vector<float> out(M * n, 0.0f);
            const int before = omp_get_max_threads();
            omp_set_num_threads(threads);
            trlhpc::cpu::matmul_bf16(ao, ta, bo, tb, {out.data(), false}, M, n, K, 1, 0, GetParam());
            omp_set_num_threads(before);
            return out;
          };
          const GemmOperand bo{b16 ? static_cast<const void*>(b_h.data()) : b.data(), b16};
          const std::vector<float> whole = run(bo, N, 2);
          ASSERT_EQ(whole, run(bo, N, 1)) << "M " << M << " N " << N << " K " << K << " variant " << variant;
          ASSERT_EQ(whole, run(bo, N, 3)) << "M " << M << " N " << N << " K " << K << " variant " << variant;
          // Columns [n0, N) of op(b), copied out as (K, n) or (n, K).
          const int64_t n0 = 40, n = N - n0;
          std::vector<float> slice_f(K * n);
          std::vector<uint16_t> slice_h(K * n);
          for (int64_t k = 0; k < K; ++k)
            for (int64_t j = 0; j < n; ++j) {
              const int64_t from = tb ? (n0 + j) * K + k : k * N + n0 + j, to = tb ? j * K + k : k * n + j;
              slice_f[to] = b[from];
              slice_h[to] = b_h[from];
            }
          const GemmOperand so{b16 ? static_cast<const void*>(slice_h.data()) : slice_f.data(), b16};
          const std::vector<float> part = run(so, n, 2);
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < n; ++j)
              ASSERT_EQ(part[i * n + j], whole[i * N + n0 + j]) << i << "," << j << " variant " << variant;
        }
}

// CpuOps::matmul: all-fp32 tensors take the fp32 GEMM bit for bit; a bf16 tensor anywhere takes the
// bf16 GEMM (the engine bf16_gemm_engine() names), bit for bit.
TEST(CpuOpsMatmul, DispatchesOnTheTensorsDtypes) {
  auto ops = trlhpc::make_cpu_ops();
  const int64_t M = 40, N = 36, K = 70;
  const std::vector<float> a = random_floats(M * K, 7), b = random_floats(N * K, 8);
  trlhpc::Tensor ta = trlhpc::Tensor::host({M, K}), tb = trlhpc::Tensor::host({N, K});
  std::copy(a.begin(), a.end(), ta.f32());
  std::copy(b.begin(), b.end(), tb.f32());
  trlhpc::Tensor ta16 = trlhpc::Tensor::host({M, K}, trlhpc::DType::BF16);
  const std::vector<uint16_t> a_h = to_bf16(a);
  std::copy(a_h.begin(), a_h.end(), ta16.ptr<uint16_t>());
  trlhpc::Tensor c = trlhpc::Tensor::host({M, N}), c16 = trlhpc::Tensor::host({M, N}, trlhpc::DType::BF16);
  std::vector<float> want(M * N), want_mixed(M * N);
  std::vector<uint16_t> want16(M * N);
  ops->matmul(ta, false, tb, true, c, 1.0f, 0.0f);
  trlhpc::cpu::matmul(a.data(), false, b.data(), true, want.data(), M, N, K, 1.0f, 0.0f);
  EXPECT_EQ(0, std::memcmp(c.data(), want.data(), want.size() * 4));
  ops->matmul(ta16, false, tb, true, c, 1.0f, 0.0f);
  trlhpc::cpu::matmul_bf16({a_h.data(), true}, false, {b.data(), false}, true, {want_mixed.data(), false}, M, N, K,
                           1.0f, 0.0f);
  EXPECT_EQ(0, std::memcmp(c.data(), want_mixed.data(), want_mixed.size() * 4));
  ops->matmul(ta, false, tb, true, c16, 1.0f, 0.0f);
  trlhpc::cpu::matmul_bf16({a.data(), false}, false, {b.data(), false}, true, {want16.data(), true}, M, N, K, 1.0f,
                           0.0f);
  EXPECT_EQ(0, std::memcmp(c16.data(), want16.data(), want16.size() * 2));
  EXPECT_NE(0, std::memcmp(want.data(), want_mixed.data(), want.size() * 4)) << "bf16 rounding must show";
}

INSTANTIATE_TEST_SUITE_P(Engines, GemmBf16,
                         ::testing::Values(Bf16GemmEngine::AMX, Bf16GemmEngine::AVX512BF16, Bf16GemmEngine::F32),
                         [](const ::testing::TestParamInfo<Bf16GemmEngine>& p) { return engine_name(p.param); });

}  // namespace
