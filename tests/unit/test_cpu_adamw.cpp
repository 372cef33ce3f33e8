// Tests of kernels/cpu/adamw.cpp against a double-precision transcription of torch.optim.AdamW
// (_single_tensor_adamw, foreach=False, amsgrad=False, maximize=False) over several steps.
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

}  // namespace
