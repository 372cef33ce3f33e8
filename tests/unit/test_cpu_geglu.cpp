// Tests of kernels/cpu/geglu.cpp (Gemma's MLP core, gelu_pytorch_tanh): the forward against the tanh
// GELU formula in double (torch's gelu(approximate="tanh")), the backward (dgate, dup, overwrite)
// against central finite differences in double, and the host math the CUDA kernel runs against the CPU
// kernel bit for bit.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/kernels/cpu.hpp"
#include "trlhpc/kernels/elementwise_math.hpp"

namespace {

using trlhpc::testing::all_close;
using trlhpc::testing::random_floats;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

double gelu_tanh(double g) { return 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))); }
double geglu(double g, double u) { return gelu_tanh(g) * u; }

// Gates: uniform in (-6, 6) plus the tails, where tanh saturates (gelu -> 0 or g).
std::vector<float> gates(int64_t n, uint64_t seed) {
  std::vector<float> g = random_floats(n, seed, 6.0f);
  const float tails[] = {-40.f, -9.f, -3.f, 0.f, 3.f, 9.f, 40.f};
  for (int64_t i = 0; i < n && i < 7; ++i) g[i] = tails[i];
  return g;
}

TEST(CpuGeglu, ForwardMatchesDoubleReference) {
  omp_set_num_threads(2);
  for (int64_t n : {1, 7, 33, 10001}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<float> g = gates(n, 1), u = random_floats(n, 2);
    std::vector<float> out(n, kNaN);
    std::vector<double> want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = geglu(g[i], u[i]);
    trlhpc::cpu::geglu_tanh_fwd(g.data(), u.data(), out.data(), n);
    // 1 + tanh cancels for negative gates in fp32 (as in torch's kernel): an absolute error of about
    // |g| 2^-24 there, at most 40 * 6e-8 = 2.4e-6 for these gates (|up| < 1).
    EXPECT_TRUE(all_close(out, want, 2e-6, 3e-6));
  }
}

TEST(CpuGeglu, BackwardMatchesFiniteDifferences) {
  omp_set_num_threads(2);
  for (int64_t n : {1, 7, 33, 1001}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<float> g = gates(n, 3), u = random_floats(n, 4), dout = random_floats(n, 5);
    std::vector<float> dg(n, kNaN), du(n, kNaN);
    std::vector<double> dg_want(n), du_want(n);
    const double h = 1e-4;
    for (int64_t i = 0; i < n; ++i) {
      dg_want[i] = dout[i] * (geglu(g[i] + h, u[i]) - geglu(g[i] - h, u[i])) / (2 * h);
      du_want[i] = dout[i] * (geglu(g[i], u[i] + h) - geglu(g[i], u[i] - h)) / (2 * h);
    }
    trlhpc::cpu::geglu_tanh_bwd(g.data(), u.data(), dout.data(), dg.data(), du.data(), n);
    EXPECT_TRUE(all_close(dg, dg_want, 1e-5, 1e-6)) << "dgate";
    EXPECT_TRUE(all_close(du, du_want, 1e-5, 1e-6)) << "dup";
  }
}

// The GELU is not silu: a kernel that ran the SwiGLU math would fail here (gelu(1) = 0.8412, silu(1) = 0.7311).
TEST(CpuGeglu, IsTheTanhGeluNotSilu) {
  const float g = 1.0f, u = 1.0f;
  float out = kNaN;
  trlhpc::cpu::geglu_tanh_fwd(&g, &u, &out, 1);
  EXPECT_NEAR(out, 0.841192f, 1e-5f);
}

TEST(CpuGeglu, HostMathEqualsTheCpuKernel) {
  const int64_t n = 4099;
  const std::vector<float> g = gates(n, 7), u = random_floats(n, 8), dout = random_floats(n, 9);
  std::vector<float> out(n), dg(n), du(n);
  trlhpc::cpu::geglu_tanh_fwd(g.data(), u.data(), out.data(), n);
  trlhpc::cpu::geglu_tanh_bwd(g.data(), u.data(), dout.data(), dg.data(), du.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    float want_dg, want_du;
    trlhpc::math::geglu_tanh_grad(g[i], u[i], dout[i], &want_dg, &want_du);
    ASSERT_EQ(out[i], trlhpc::math::geglu_tanh(g[i], u[i])) << i;
    ASSERT_EQ(dg[i], want_dg) << i;
    ASSERT_EQ(du[i], want_du) << i;
  }
}

}  // namespace
