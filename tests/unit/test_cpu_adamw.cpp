// Tests of kernels/cpu/adamw.cpp against a double-precision transcription of torch.optim.AdamW
// (_single_tensor_adamw, foreach=False, amsgrad=False, maximize=False) over several steps, and of the
// --bf16 compute copy the same pass writes (against the step without it followed by a cast).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "test_support.hpp"
#include "trlhpc/kernels/cpu.hpp"
#include "trlhpc/kernels/elementwise_math.hpp"

namespace {

using trlhpc::testing::all_close;
using trlhpc::testing::random_floats;

struct State {
  std::vector<double> p, m, v;
};

// torch: param.mul_(1 - lr*wd); exp_avg.lerp_(grad, 1-b1); exp_avg_sq.mul_(b2).addcmul_(grad, grad, 1-b2);
// denom = (exp_avg_sq.sqrt() / sqrt(1 - b2^t)).add_(eps); param.addcdiv_(exp_avg, denom, -lr / (1 - b1^t)).
void torch_adamw_step(State& s, const std::vector<float>& g, double lr, double b1, double b2, double eps, double wd,
                      int64_t t) {
  for (size_t i = 0; i < s.p.size(); ++i) {
    s.p[i] *= 1 - lr * wd;
    s.m[i] += (1 - b1) * (g[i] - s.m[i]);
    s.v[i] = s.v[i] * b2 + (1 - b2) * g[i] * g[i];
    const double denom = std::sqrt(s.v[i]) / std::sqrt(1 - std::pow(b2, t)) + eps;
    s.p[i] -= lr / (1 - std::pow(b1, t)) * s.m[i] / denom;
  }
}

TEST(CpuAdamw, MatchesTorchSemanticsOverSeveralSteps) {
  omp_set_num_threads(2);
  struct Hyper {
    float lr, b1, b2, eps, wd;
  };
  for (Hyper hp : {Hyper{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f}, Hyper{3e-2f, 0.8f, 0.95f, 1e-6f, 0.0f},
                   Hyper{1e-4f, 0.3f, 0.99f, 1e-8f, 0.1f}}) {  // b1 = 0.3: torch's other lerp branch
    for (int64_t n : {1, 7, 33, 4099}) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " lr=" << hp.lr << " b1=" << hp.b1 << " wd=" << hp.wd);
      std::vector<float> p = random_floats(n, 1), m(n, 0.0f), v(n, 0.0f);
      State want{{p.begin(), p.end()}, std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
      for (int64_t step = 1; step <= 6; ++step) {
        // Gradients of varied magnitude, some tiny compared to eps.
        std::vector<float> g = random_floats(n, 10 + step, step % 2 ? 1.0f : 1e-3f);
        trlhpc::cpu::adamw_step(p.data(), g.data(), m.data(), v.data(), n, hp.lr, hp.b1, hp.b2, hp.eps, hp.wd, step);
        // The reference uses the fp32 hyper-parameters widened to double, like torch with fp32 inputs.
        torch_adamw_step(want, g, hp.lr, hp.b1, hp.b2, hp.eps, hp.wd, step);
        // m = m + (1-b1)(g - m) cancels when m ~ g: its error is a few ulp of max(|m|, |g|) <= 1, not of
        // m itself, hence atol 1e-7 (about 2 ulp of 1). v adds two positive terms: relative 1e-6 holds.
        // p moves by <= ~lr per step; its error is a few ulp of |p| <= 1 plus lr times the relative
        // error of m / denom, covered by 1e-6 relative + 1e-7 absolute.
        EXPECT_TRUE(all_close(p, want.p, 1e-6, 1e-7)) << "param, step " << step;
        EXPECT_TRUE(all_close(m, want.m, 1e-6, 1e-7)) << "exp_avg, step " << step;
        EXPECT_TRUE(all_close(v, want.v, 1e-6, 1e-15)) << "exp_avg_sq, step " << step;
      }
    }
  }
}

// The copy is what a separate cast of the updated parameters writes, bit for bit, and writing it
// changes no bit of the parameters or moments. Step 1 runs with lr 0, so the planted values reach the
// rounding unchanged: infinity, NaN, the largest float (rounds up to bf16 infinity) and two ties.
TEST(CpuAdamw, ComputeCopyEqualsACastOfTheUpdatedParameters) {
  omp_set_num_threads(2);
  for (int64_t n : {1, 17, 100003}) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    std::vector<float> p = random_floats(n, 3, 2.0f);
    if (n > 8) {
      p[0] = std::numeric_limits<float>::infinity();
      p[1] = std::numeric_limits<float>::quiet_NaN();
      p[2] = std::numeric_limits<float>::max();
      p[3] = 1.00390625f;   // 1 + 2^-8: a tie, rounds to even (down, to 1)
      p[4] = -1.01171875f;  // -(1 + 3 * 2^-8): a tie, rounds to even (up in magnitude)
    }
    std::vector<float> m(n, 0.0f), v(n, 0.0f), p2 = p, m2 = m, v2 = v;
    std::vector<uint16_t> copy(n, 0xdead), cast(n);
    for (int64_t step = 1; step <= 3; ++step) {
      const std::vector<float> g = random_floats(n, 20 + step, 0.1f);
      const float lr = step == 1 ? 0.0f : 1e-3f;
      trlhpc::cpu::adamw_step(p.data(), g.data(), m.data(), v.data(), n, lr, 0.9f, 0.999f, 1e-8f, 0.01f, step,
                              copy.data());
      trlhpc::cpu::adamw_step(p2.data(), g.data(), m2.data(), v2.data(), n, lr, 0.9f, 0.999f, 1e-8f, 0.01f, step);
      if (step == 1 && n > 8) {  // the planted values reached the rounding as they were
        EXPECT_EQ(copy[0], 0x7f80);
        EXPECT_EQ(copy[2], 0x7f80) << "FLT_MAX rounds up to bf16 infinity";
        EXPECT_EQ(copy[3], 0x3f80) << "the tie 1 + 2^-8 rounds to even";
        EXPECT_EQ(copy[4], 0xbf82) << "the tie -(1 + 3 * 2^-8) rounds to even";
      }
      trlhpc::cpu::cast_f32_to_bf16(cast.data(), p2.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(std::memcmp(&p[i], &p2[i], 4), 0) << "param " << i << ", step " << step;
        ASSERT_EQ(std::memcmp(&m[i], &m2[i], 4), 0) << "exp_avg " << i << ", step " << step;
        ASSERT_EQ(std::memcmp(&v[i], &v2[i], 4), 0) << "exp_avg_sq " << i << ", step " << step;
        ASSERT_EQ(copy[i], cast[i]) << "compute copy " << i << " (param " << p[i] << "), step " << step;
        ASSERT_EQ(cast[i], trlhpc::math::bf16_bits_from_float(p2[i])) << "cast " << i << ", step " << step;
      }
    }
  }
}

// cast_bf16_to_f32 is exact: the widened value rounds back to the same bits.
TEST(CpuCast, Bf16RoundTripIsExact) {
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> wide(all.size());
  std::vector<uint16_t> back(all.size());
  trlhpc::cpu::cast_bf16_to_f32(wide.data(), all.data(), static_cast<int64_t>(all.size()));
  trlhpc::cpu::cast_f32_to_bf16(back.data(), wide.data(), static_cast<int64_t>(all.size()));
  for (size_t i = 0; i < all.size(); ++i) {
    const bool nan = (all[i] & 0x7fff) > 0x7f80;
    if (nan) {  // quieted, sign and payload's top bits kept
      ASSERT_EQ(back[i], all[i] | 0x40) << i;
    } else {
      ASSERT_EQ(back[i], all[i]) << i;
      ASSERT_EQ(wide[i], trlhpc::math::float_from_bf16_bits(all[i])) << i;
    }
  }
}

}  // namespace
