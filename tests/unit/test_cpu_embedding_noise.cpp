// Tests of NEFTune's noise (kernels/cpu/embedding_noise.cpp, core/philox.hpp's neftune_unit_noise,
// model/neftune.hpp):
//  - the unit draw lies in [-1, 1) and is uniform there: mean 0 and variance 1/3 within 5 standard errors,
//    and each of 20 equal bins holds its share within 5 standard deviations;
//  - cpu::embedding_noise adds magnitude * draw: |added| <= magnitude, padding (source row -1) untouched,
//    and the added values depend only on (key, source row, source column, feature): the same token at
//    another place of the batch gets the same noise, another key or token another;
//  - the magnitude is alpha / sqrt(L * d) (transformers' hook);
//  - the CPU Ops wrapper adds exactly the kernel's noise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/core/philox.hpp"
#include "trlhpc/kernels/cpu.hpp"
#include "trlhpc/model/neftune.hpp"
#include "trlhpc/ops/ops.hpp"

namespace {

TEST(CpuEmbeddingNoise, UnitDrawIsUniformOnMinusOneToOne) {
  const int64_t n = 1 << 20, bins = 20;
  std::vector<int64_t> count(bins, 0);
  double sum = 0, sum_sq = 0;
  float lo = 1, hi = -1;
  for (int64_t i = 0; i < n; ++i) {
    const float u = trlhpc::neftune_unit_noise(77, static_cast<int32_t>(i / 64), static_cast<int32_t>(i % 7), i % 64);
    lo = std::min(lo, u), hi = std::max(hi, u);
    sum += u, sum_sq += double{u} * u;
    ++count[std::min<int64_t>(bins - 1, static_cast<int64_t>((u + 1.0f) / 2.0f * bins))];
  }
  EXPECT_GE(lo, -1.0f);
  EXPECT_LT(hi, 1.0f);
  const double mean = sum / n, var = sum_sq / n - mean * mean;
  EXPECT_LT(std::abs(mean), 5 * std::sqrt(1.0 / 3.0 / n)) << mean;
  // Var of u^2 for U(-1, 1) is 1/5 - 1/9 = 4/45.
  EXPECT_LT(std::abs(var - 1.0 / 3.0), 5 * std::sqrt(4.0 / 45.0 / n)) << var;
  const double expect = static_cast<double>(n) / bins, sd = std::sqrt(expect * (1 - 1.0 / bins));
  for (int64_t b = 0; b < bins; ++b) EXPECT_LT(std::abs(count[b] - expect), 5 * sd) << "bin " << b << ": " << count[b];
}

TEST(CpuEmbeddingNoise, BoundedAdditiveAndKeyedBySourceToken) {
  const int64_t N = 12, C = 96;
  const float m = trlhpc::neftune_magnitude(5.0, 40, C);
  std::vector<float> x = trlhpc::testing::random_floats(N * C, 3);
  for (int64_t i = 0; i < 4 * C; ++i) x[6 * C + i] = x[2 * C + i];  // the repeated tokens carry the same embedding
  // Tokens 0..5 are (row 0, columns 0..5); 6..9 the same tokens 2..5 again elsewhere; 10, 11 padding.
  std::vector<int32_t> rows = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, -1}, cols = {0, 1, 2, 3, 4, 5, 2, 3, 4, 5, -1, -1};
  std::vector<float> y = x;
  trlhpc::cpu::embedding_noise(y.data(), rows.data(), cols.data(), N, C, m, 99);
  float worst = 0;
  for (int64_t n = 0; n < 10; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const float added = y[n * C + c] - x[n * C + c];
      worst = std::max(worst, std::abs(added));
      // x + m u in fp32, u's exact value: the added amount is m u up to the one rounding of the sum.
      const float want = x[n * C + c] + m * trlhpc::neftune_unit_noise(99, rows[n], cols[n], c);
      ASSERT_EQ(y[n * C + c], want) << n << "," << c;
    }
  EXPECT_LE(worst, m * (1 + 1e-5f));
  EXPECT_GT(worst, 0.9f * m);  // 960 draws: the largest is near the bound
  for (int64_t k = 0; k < 4; ++k)
    for (int64_t c = 0; c < C; ++c)
      EXPECT_EQ(y[(2 + k) * C + c], y[(6 + k) * C + c]) << "token " << 2 + k << " elsewhere, feature " << c;
  for (int64_t n = 10; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) EXPECT_EQ(y[n * C + c], x[n * C + c]) << "padding changed";
  std::vector<float> other_key = x;
  trlhpc::cpu::embedding_noise(other_key.data(), rows.data(), cols.data(), N, C, m, 100);
  int64_t same = 0;
  for (int64_t i = 0; i < 10 * C; ++i) same += other_key[i] == y[i];
  EXPECT_LT(same, 10) << "another key drew the same noise";
}

TEST(CpuEmbeddingNoise, MagnitudeIsAlphaOverRootLd) {
  EXPECT_FLOAT_EQ(trlhpc::neftune_magnitude(5.0, 10, 64), static_cast<float>(5.0 / std::sqrt(640.0)));
  EXPECT_FLOAT_EQ(trlhpc::neftune_magnitude(15.0, 1000, 4096), static_cast<float>(15.0 / std::sqrt(4096000.0)));
  EXPECT_NE(trlhpc::neftune_key(42, 0), trlhpc::neftune_key(42, 1));
  EXPECT_NE(trlhpc::neftune_key(42, 0), trlhpc::neftune_key(43, 0));
}

TEST(CpuEmbeddingNoise, OpsWrapperAddsTheKernelsNoise) {
  auto ops = trlhpc::make_cpu_ops();
  const int64_t N = 4, C = 16;
  const std::vector<float> x = trlhpc::testing::random_floats(N * C, 5);
  const std::vector<int32_t> rows = {3, 3, 4, -1}, cols = {0, 1, 0, -1};
  trlhpc::Tensor t = ops->allocate({N, C}), r = ops->allocate({N}, trlhpc::DType::I32), c = ops->allocate({N}, trlhpc::DType::I32);
  ops->copy_from_host(t, x.data(), x.size() * sizeof(float));
  ops->copy_from_host(r, rows.data(), rows.size() * sizeof(int32_t));
  ops->copy_from_host(c, cols.data(), cols.size() * sizeof(int32_t));
  ops->embedding_noise(t, r, c, 0.25f, 7);
  std::vector<float> got(N * C), want = x;
  ops->copy_to_host(got.data(), t, got.size() * sizeof(float));
  trlhpc::cpu::embedding_noise(want.data(), rows.data(), cols.data(), N, C, 0.25f, 7);
  EXPECT_EQ(got, want);
}

}  // namespace
