// Tests of kernels/cpu/rope.cpp: forward against a double reference of the rotate-half convention
// (pos, inv_freq as Qwen2/Llama build them), backward against central finite differences, and
// backward(forward(x)) == x (the rotation is orthogonal).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace {

using trlhpc::testing::all_close;
using trlhpc::testing::random_floats;

// inv_freq[i] = theta^(-2i/HS), as in transformers' default rope init.
std::vector<float> inv_freq(int64_t HS, double theta) {
  std::vector<float> f(HS / 2);
  for (int64_t i = 0; i < HS / 2; ++i) f[i] = static_cast<float>(std::pow(theta, -2.0 * i / HS));
  return f;
}

std::vector<double> reference(const std::vector<double>& x, const std::vector<int32_t>& pos,
                              const std::vector<float>& freq, int64_t N, int64_t H, int64_t HS) {
  std::vector<double> y(x.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < HS / 2; ++i) {
        // The angle is the fp32 product, as transformers forms it (the kernel's documented semantics).
        const double a = static_cast<double>(static_cast<float>(pos[n]) * static_cast<float>(freq[i]));
        const int64_t base = (n * H + h) * HS;
        const double x1 = x[base + i], x2 = x[base + i + HS / 2];
        y[base + i] = x1 * std::cos(a) - x2 * std::sin(a);
        y[base + i + HS / 2] = x2 * std::cos(a) + x1 * std::sin(a);
      }
  return y;
}

struct Case {
  int64_t N, H, HS;
};

TEST(CpuRope, ForwardMatchesDoubleReference) {
  omp_set_num_threads(2);
  for (Case cs : {Case{1, 1, 2}, Case{7, 4, 8}, Case{33, 2, 16}, Case{9, 3, 128}}) {
    SCOPED_TRACE(::testing::Message() << "N=" << cs.N << " H=" << cs.H << " HS=" << cs.HS);
    std::vector<float> x = random_floats(cs.N * cs.H * cs.HS, 1);
    std::vector<int32_t> pos(cs.N);
    for (int64_t n = 0; n < cs.N; ++n) pos[n] = static_cast<int32_t>((n * 977) % 5000);  // large angles too
    const std::vector<float> freq = inv_freq(cs.HS, 1e6);
    const std::vector<double> want = reference({x.begin(), x.end()}, pos, freq, cs.N, cs.H, cs.HS);
    trlhpc::cpu::rope_fwd(x.data(), pos.data(), freq.data(), cs.N, cs.H, cs.HS);
    // cos/sin rounded to fp32 once, then two products and a sum: < 3 ulp of |x| <= 1.
    EXPECT_TRUE(all_close(x, want, 1e-6, 1e-6));
  }
}

// A batch of rows with the same positions (0..T-1 each, as packed/padded SFT batches) takes cos/sin from
// a per-position table: the result must match the reference and equal, bit for bit, each row rotated on
// its own (few tokens per position: the per-token path).
TEST(CpuRope, RepeatedPositionsUseTheSameValuesAsPerToken) {
  omp_set_num_threads(2);
  const int64_t B = 4, T = 37, H = 3, HS = 64, N = B * T;
  std::vector<int32_t> pos(N);
  for (int64_t n = 0; n < N; ++n) pos[n] = static_cast<int32_t>(n % T);
  const std::vector<float> freq = inv_freq(HS, 1e4);
  for (float sign : {1.0f, -1.0f}) {
    std::vector<float> x = random_floats(N * H * HS, 5), rows = x;
    const std::vector<double> want = reference({x.begin(), x.end()}, pos, freq, N, H, HS);
    if (sign > 0) {
      trlhpc::cpu::rope_fwd(x.data(), pos.data(), freq.data(), N, H, HS);
      EXPECT_TRUE(all_close(x, want, 1e-6, 1e-6));
    } else {
      trlhpc::cpu::rope_bwd(x.data(), pos.data(), freq.data(), N, H, HS);
    }
    for (int64_t b = 0; b < B; ++b) {
      float* row = rows.data() + b * T * H * HS;
      if (sign > 0) trlhpc::cpu::rope_fwd(row, pos.data() + b * T, freq.data(), T, H, HS);
      else trlhpc::cpu::rope_bwd(row, pos.data() + b * T, freq.data(), T, H, HS);
    }
    EXPECT_EQ(x, rows) << (sign > 0 ? "forward" : "backward");
  }
}

// L = sum(w * rope(x)) is linear in x, so central differences (step 1e-3, in double) are exact up to
// double rounding; 1e-6 covers the kernel's fp32 rotation of w.
TEST(CpuRope, BackwardMatchesFiniteDifferences) {
  const int64_t N = 7, H = 2, HS = 8;
  const std::vector<float> w = random_floats(N * H * HS, 2), xf = random_floats(N * H * HS, 3);
  std::vector<int32_t> pos = {0, 1, 2, 0, 1, 300, 4};  // packed: positions restart
  const std::vector<float> freq = inv_freq(HS, 10000.0);
  std::vector<double> x(xf.begin(), xf.end()), fd(x.size());
  auto loss = [&]() {
    const std::vector<double> y = reference(x, pos, freq, N, H, HS);
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += w[i] * y[i];
    return l;
  };
  for (size_t i = 0; i < x.size(); ++i) {
    const double h = 1e-3, x0 = x[i];
    x[i] = x0 + h;
    const double up = loss();
    x[i] = x0 - h;
    fd[i] = (up - loss()) / (2 * h);
    x[i] = x0;
  }
  std::vector<float> dx = w;
  trlhpc::cpu::rope_bwd(dx.data(), pos.data(), freq.data(), N, H, HS);
  EXPECT_TRUE(all_close(dx, fd, 1e-6, 1e-6));
}

TEST(CpuRope, BackwardInvertsForward) {
  const int64_t N = 33, H = 4, HS = 64;
  const std::vector<float> x0 = random_floats(N * H * HS, 4);
  std::vector<int32_t> pos(N);
  for (int64_t n = 0; n < N; ++n) pos[n] = static_cast<int32_t>(n * 31);
  const std::vector<float> freq = inv_freq(HS, 1e6);
  std::vector<float> x = x0;
  trlhpc::cpu::rope_fwd(x.data(), pos.data(), freq.data(), N, H, HS);
  trlhpc::cpu::rope_bwd(x.data(), pos.data(), freq.data(), N, H, HS);
  EXPECT_TRUE(all_close(x, std::vector<double>(x0.begin(), x0.end()), 1e-6, 1e-6));
}

}  // namespace
