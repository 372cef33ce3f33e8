// Tests of LoRA dropout (kernels/cpu/lora_dropout.cpp, core/philox.hpp's dropout_keeps):
//  - each element is 0 or x / (1 - p), and the kept fraction is 1 - p within 5 standard deviations;
//  - the mask depends only on (key, source row, source column, global feature): the same token at
//    another place in the batch, or a tp slice of the features with its offset, gets the same values;
//    another key, row, column or feature draws independently (masks differ);
//  - in place (x aliasing out) equals out of place, and p = 0 keeps everything;
//  - the Ops wrapper on bf16 tensors applies the same mask (a kept bf16 value, scaled, rounded once).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/core/philox.hpp"
#include "trlhpc/kernels/cpu.hpp"
#include "trlhpc/ops/ops.hpp"

namespace {

using trlhpc::testing::random_floats;

TEST(CpuLoraDropout, KeepsOneMinusPAndScales) {
  const int64_t N = 64, F = 512;
  const float p = 0.3f;
  const std::vector<float> x = random_floats(N * F, 1);
  std::vector<int32_t> rows(N), cols(N);
  for (int64_t n = 0; n < N; ++n) rows[n] = static_cast<int32_t>(n / 8), cols[n] = static_cast<int32_t>(n % 8);
  std::vector<float> out(N * F);
  trlhpc::cpu::lora_dropout(x.data(), out.data(), rows.data(), cols.data(), N, F, 0, p, 1234);
  int64_t kept = 0;
  for (int64_t i = 0; i < N * F; ++i) {
    if (out[i] == 0.0f && x[i] != 0.0f) continue;
    ++kept;
    EXPECT_FLOAT_EQ(out[i], x[i] / (1.0f - p)) << i;
  }
  const double n = static_cast<double>(N * F), expected = n * (1 - p), sd = std::sqrt(n * p * (1 - p));
  EXPECT_NEAR(static_cast<double>(kept), expected, 5 * sd);
}

TEST(CpuLoraDropout, MaskFollowsTheTokenNotItsPlace) {
  const int64_t F = 96;
  const float p = 0.5f;
  const std::vector<float> x = random_floats(2 * F, 2);
  // Batch 1: tokens (row 7, col 3) then (row 2, col 0). Batch 2: the same tokens swapped.
  const int32_t rows1[] = {7, 2}, cols1[] = {3, 0}, rows2[] = {2, 7}, cols2[] = {0, 3};
  std::vector<float> x2(2 * F), out1(2 * F), out2(2 * F);
  std::copy(x.begin() + F, x.end(), x2.begin());
  std::copy(x.begin(), x.begin() + F, x2.begin() + F);
  trlhpc::cpu::lora_dropout(x.data(), out1.data(), rows1, cols1, 2, F, 0, p, 99);
  trlhpc::cpu::lora_dropout(x2.data(), out2.data(), rows2, cols2, 2, F, 0, p, 99);
  for (int64_t f = 0; f < F; ++f) {
    EXPECT_EQ(out1[f], out2[F + f]);
    EXPECT_EQ(out1[F + f], out2[f]);
  }
  // A tp rank holding features [F/2, F) with its offset draws the full run's mask for them.
  std::vector<float> half(F / 2), half_out(F / 2);
  std::copy(x.begin() + F / 2, x.begin() + F, half.begin());
  trlhpc::cpu::lora_dropout(half.data(), half_out.data(), rows1, cols1, 1, F / 2, F / 2, p, 99);
  for (int64_t f = 0; f < F / 2; ++f) EXPECT_EQ(half_out[f], out1[F / 2 + f]);
}

TEST(CpuLoraDropout, IndependentAcrossKeyRowColumnFeature) {
  const float p = 0.5f;
  auto mask = [&](uint64_t key, int32_t row, int32_t col, int64_t offset) {
    std::vector<bool> m;
    for (int64_t f = 0; f < 256; ++f) m.push_back(trlhpc::dropout_keeps(key, row, col, offset + f, p));
    return m;
  };
  const std::vector<bool> base = mask(5, 1, 1, 0);
  EXPECT_NE(base, mask(6, 1, 1, 0));
  EXPECT_NE(base, mask(5, 2, 1, 0));
  EXPECT_NE(base, mask(5, 1, 2, 0));
  EXPECT_NE(base, mask(5, 1, 1, 256));
  EXPECT_EQ(base, mask(5, 1, 1, 0));
}

TEST(CpuLoraDropout, InPlaceAndZeroRate) {
  const int64_t N = 5, F = 33;
  const std::vector<float> x = random_floats(N * F, 3);
  const std::vector<int32_t> rows = {0, 0, 1, 1, -1}, cols = {0, 1, 0, 1, -1};
  std::vector<float> out(N * F), in_place = x;
  trlhpc::cpu::lora_dropout(x.data(), out.data(), rows.data(), cols.data(), N, F, 0, 0.25f, 7);
  trlhpc::cpu::lora_dropout(in_place.data(), in_place.data(), rows.data(), cols.data(), N, F, 0, 0.25f, 7);
  EXPECT_EQ(out, in_place);
  trlhpc::cpu::lora_dropout(x.data(), out.data(), rows.data(), cols.data(), N, F, 0, 0.0f, 7);
  EXPECT_EQ(out, x);
}

TEST(CpuLoraDropout, OpsBf16UsesTheSameMask) {
  auto ops = trlhpc::make_cpu_ops();
  const int64_t N = 4, F = 40;
  const float p = 0.4f;
  const std::vector<float> x = random_floats(N * F, 4);
  const std::vector<int32_t> rows = {3, 3, 9, 9}, cols = {0, 1, 5, 6};
  trlhpc::Tensor xf = ops->allocate({N, F}), xb = ops->allocate({N, F}, trlhpc::DType::BF16);
  ops->copy_from_host(xf, x.data(), x.size() * sizeof(float));
  ops->cast(xb, xf);
  trlhpc::Tensor r = ops->allocate({N}, trlhpc::DType::I32), c = ops->allocate({N}, trlhpc::DType::I32);
  ops->copy_from_host(r, rows.data(), rows.size() * sizeof(int32_t));
  ops->copy_from_host(c, cols.data(), cols.size() * sizeof(int32_t));
  ops->lora_dropout(xb, xb, r, c, 0, p, 11);
  ops->cast(xf, xb);
  std::vector<float> got(N * F), rounded(N * F), want(N * F);
  ops->copy_to_host(got.data(), xf, got.size() * sizeof(float));
  trlhpc::Tensor again = ops->allocate({N, F}, trlhpc::DType::BF16);
  ops->copy_from_host(xf, x.data(), x.size() * sizeof(float));
  ops->cast(again, xf);  // bf16(x)
  ops->cast(xf, again);
  ops->copy_to_host(rounded.data(), xf, rounded.size() * sizeof(float));
  trlhpc::cpu::lora_dropout(rounded.data(), want.data(), rows.data(), cols.data(), N, F, 0, p, 11);
  for (int64_t i = 0; i < N * F; ++i) {
    if (want[i] == 0.0f) {
      EXPECT_EQ(got[i], 0.0f) << i;
    } else {
      EXPECT_NEAR(got[i], want[i], std::fabs(want[i]) * 0x1.0p-8) << i;  // one bf16 rounding
    }
  }
}

}  // namespace
