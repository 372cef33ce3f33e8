// The per-element functions of include/trlhpc/kernels/elementwise_math.hpp (which the CUDA kernels run)
// against the CPU kernels of kernels/cpu on the host: silu/swiglu and its gradient, one AdamW element
// over several steps, the RoPE pair rotation, and bf16 rounding (bit-exact against dtype.hpp).
// The CPU kernels use a polynomial exp (about 2 ulp), hence the 1e-6 relative tolerances.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/core/dtype.hpp"
#include "trlhpc/kernels/cpu.hpp"
#include "trlhpc/kernels/elementwise_math.hpp"

namespace trlhpc {
namespace {

using testing::all_close;

std::vector<float> gate_values() {
  std::vector<float> g = testing::random_floats(4096, 11, 12.0f);
  for (float x : {0.0f, -0.0f, 1e-7f, -1e-7f, 20.0f, -20.0f, 80.0f, -80.0f}) g.push_back(x);
  return g;
}

TEST(ElementwiseMath, SwigluMatchesCpuKernel) {
  const std::vector<float> gate = gate_values();
  const size_t n = gate.size();
  const std::vector<float> up = testing::random_floats(n, 12), dout = testing::random_floats(n, 13);
  std::vector<float> out(n), dgate(n), dup(n);
  cpu::swiglu_fwd(gate.data(), up.data(), out.data(), static_cast<int64_t>(n));
  cpu::swiglu_bwd(gate.data(), up.data(), dout.data(), dgate.data(), dup.data(), static_cast<int64_t>(n));
  std::vector<float> want_out(n), want_dgate(n), want_dup(n);
  for (size_t i = 0; i < n; ++i) {
    want_out[i] = math::swiglu(gate[i], up[i]);
    math::swiglu_grad(gate[i], up[i], dout[i], &want_dgate[i], &want_dup[i]);
    EXPECT_NEAR(math::silu(gate[i]) * up[i], want_out[i], 0.0f);
    EXPECT_NEAR(math::silu_grad(gate[i]) * up[i] * dout[i], want_dgate[i], 1e-6f * std::fabs(want_dgate[i]) + 1e-6f);
  }
  EXPECT_TRUE(all_close(out.data(), want_out.data(), n, 1e-6, 1e-30));
  // d silu/dg vanishes near g = -1.28, where 1 + g (1 - s) cancels: an absolute floor there.
  EXPECT_TRUE(all_close(dgate.data(), want_dgate.data(), n, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(dup.data(), want_dup.data(), n, 1e-6, 1e-30));
}

TEST(ElementwiseMath, SiluGradientMatchesFiniteDifferences) {
  for (double g : {-6.0, -1.5, -0.3, 0.0, 0.4, 2.0, 7.0}) {
    const double h = 1e-3;
    auto silu_d = [](double x) { return x / (1.0 + std::exp(-x)); };
    const double fd = (silu_d(g + h) - silu_d(g - h)) / (2 * h);
    EXPECT_NEAR(math::silu_grad(static_cast<float>(g)), fd, 1e-5) << "g = " << g;
  }
}

TEST(ElementwiseMath, AdamWMatchesCpuKernelOverSteps) {
  const size_t n = 2048;
  std::vector<float> p = testing::random_floats(n, 21), m(n, 0.0f), v(n, 0.0f);
  std::vector<float> p_ref = p, m_ref = m, v_ref = v;
  for (float beta1 : {0.9f, 0.3f}) {  // both branches of torch's lerp
    for (int64_t step = 1; step <= 4; ++step) {
      const std::vector<float> g = testing::random_floats(n, 100 + static_cast<uint64_t>(step), 0.5f);
      const float lr = 1e-3f * static_cast<float>(step), wd = 0.01f;
      cpu::adamw_step(p_ref.data(), g.data(), m_ref.data(), v_ref.data(), static_cast<int64_t>(n), lr, beta1, 0.999f,
                      1e-8f, wd, step);
      const math::AdamWScalars s = math::adamw_scalars(lr, beta1, 0.999f, 1e-8f, wd, step);
      for (size_t i = 0; i < n; ++i) math::adamw_update(&p[i], g[i], &m[i], &v[i], s);
      ASSERT_TRUE(all_close(p.data(), p_ref.data(), n, 1e-6, 1e-9)) << "param, step " << step;
      ASSERT_TRUE(all_close(m.data(), m_ref.data(), n, 1e-6, 1e-12)) << "exp_avg, step " << step;
      ASSERT_TRUE(all_close(v.data(), v_ref.data(), n, 1e-6, 1e-15)) << "exp_avg_sq, step " << step;
    }
  }
}

TEST(ElementwiseMath, RopeRotationMatchesCpuKernel) {
  // One head of size 2: the CPU kernel rotates exactly one pair per token.
  const std::vector<int32_t> positions = {0, 1, 7, 100, 4095, 32767, 131071};
  for (float inv_freq : {1.0f, 0.1333521f, 1e-4f}) {
    for (int32_t pos : positions) {
      for (double sign : {1.0, -1.0}) {
        float x[2] = {0.75f, -1.25f};
        if (sign > 0)
          cpu::rope_fwd(x, &pos, &inv_freq, 1, 1, 2);
        else
          cpu::rope_bwd(x, &pos, &inv_freq, 1, 1, 2);
        const double angle = static_cast<double>(math::rope_angle(pos, inv_freq));
        float a = 0.75f, b = -1.25f;
        math::rope_rotate(&a, &b, static_cast<float>(std::cos(angle)), static_cast<float>(sign * std::sin(angle)));
        EXPECT_NEAR(a, x[0], 2e-7) << "pos " << pos << " inv_freq " << inv_freq;
        EXPECT_NEAR(b, x[1], 2e-7) << "pos " << pos << " inv_freq " << inv_freq;
      }
    }
  }
}

TEST(ElementwiseMath, Bf16RoundingIsBitExact) {
  std::vector<float> values = testing::random_floats(100000, 31, 1e4f);
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {0.0f, -0.0f, 1.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max(),
                  1.00390625f /* exactly half an ulp above 1: ties to even (down) */,
                  1.01171875f /* half an ulp above 1 + 2^-7: ties to even (up) */})
    values.push_back(x);
  for (float x : values) {
    const uint16_t got = math::bf16_bits_from_float(x), want = f32_to_bf16(x);
    ASSERT_EQ(got, want) << "x = " << x;
    const float back = math::float_from_bf16_bits(got);
    if (std::isnan(x))
      EXPECT_TRUE(std::isnan(back));
    else
      EXPECT_EQ(back, bf16_to_f32(want));
  }
  EXPECT_EQ(math::round_to_bf16(1.00390625f), 1.0f);
  EXPECT_EQ(math::round_to_bf16(1.01171875f), 1.015625f);
}

}  // namespace
}  // namespace trlhpc
