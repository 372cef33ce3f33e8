// Tests of kernels/cpu/swiglu.cpp: forward against double silu(gate) * up, backward (dgate, dup,
// overwrite) against central finite differences in double, including gates far in both tails where
// the kernel's polynomial exp clamps.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace {

using trlhpc::testing::all_close;
using trlhpc::testing::random_floats;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

double swiglu(double g, double u) { return g / (1.0 + std::exp(-g)) * u; }

// Gates: uniform in (-8, 8) plus the tails (+-30, +-90, +-200) where exp over- or underflows in fp32.
std::vector<float> gates(int64_t n, uint64_t seed) {
  std::vector<float> g = random_floats(n, seed, 8.0f);
  const float tails[] = {-200.f, -90.f, -30.f, 0.f, 30.f, 90.f, 200.f};
  for (int64_t i = 0; i < n && i < 7; ++i) g[i] = tails[i];
  return g;
}

TEST(CpuSwiglu, ForwardMatchesDoubleReference) {
  omp_set_num_threads(2);
  for (int64_t n : {1, 7, 33, 10001}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<float> g = gates(n, 1), u = random_floats(n, 2);
    std::vector<float> out(n, kNaN);
    std::vector<double> want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = swiglu(g[i], u[i]);
    trlhpc::cpu::swiglu_fwd(g.data(), u.data(), out.data(), n);
    // A 2-ulp exp and three roundings: ~5e-7 relative; atol covers results that underflow to ~1e-37.
    EXPECT_TRUE(all_close(out, want, 2e-6, 1e-30));
  }
}

// Each output depends only on its own (gate, up), so the finite differences are per element:
// step 1e-4 in double gives truncation ~h^2 |f'''| <= 1e-8 and rounding ~1e-12; the 1e-5 tolerance
// covers the fp32 kernel.
TEST(CpuSwiglu, BackwardMatchesFiniteDifferences) {
  omp_set_num_threads(2);
  for (int64_t n : {1, 7, 33, 1001}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<float> g = gates(n, 3), u = random_floats(n, 4), dout = random_floats(n, 5);
    std::vector<float> dg(n, kNaN), du(n, kNaN);
    std::vector<double> dg_want(n), du_want(n);
    const double h = 1e-4;
    for (int64_t i = 0; i < n; ++i) {
      dg_want[i] = dout[i] * (swiglu(g[i] + h, u[i]) - swiglu(g[i] - h, u[i])) / (2 * h);
      du_want[i] = dout[i] * (swiglu(g[i], u[i] + h) - swiglu(g[i], u[i] - h)) / (2 * h);
    }
    trlhpc::cpu::swiglu_bwd(g.data(), u.data(), dout.data(), dg.data(), du.data(), n);
    EXPECT_TRUE(all_close(dg, dg_want, 1e-5, 1e-6)) << "dgate";
    EXPECT_TRUE(all_close(du, du_want, 1e-5, 1e-6)) << "dup";
  }
}

}  // namespace
