#pragma once
// Tanh softcapping (Gemma 2: attention scores and final logits), x -> cap * tanh(x / cap), in the
// operation order of transformers (divide, tanh, multiply), for the CPU kernels. Its derivative is
// 1 - t^2 with t = tanh(x / cap).
//
// tanh_approx is branch-free so that the loops over a score tile or a logit row vectorise (libm's tanhf
// is a call per element, several times the cost of the tile's products at small head sizes): Cephes'
// tanhf, an odd polynomial x + x^3 P(x^2) for |x| < 0.625, else sign(x) (1 - 2 / (exp(2|x|) + 1)) with
// exp_approx; both are computed and one is selected. Within 1.2 ulp of tanh over [-60, 60] (measured on a
// 1e-4 grid; unit.test_cpu_softcap holds it to 2 ulp); +-1 beyond |x| ~ 9, and exactly 0 at 0.
#include <cmath>

#include "kernels/cpu/fast_exp.hpp"

namespace trlhpc::cpu {

inline float tanh_approx(float x) {
  const float a = std::fabs(x);
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  const float e = exp_approx(std::min(a + a, 88.0f));  // exp(2|x|), finite
  const float large = std::copysign(1.0f - 2.0f / (e + 1.0f), x);
  return a < 0.625f ? small : large;
}

inline float softcap(float x, float cap) { return tanh_approx(x / cap) * cap; }

}  // namespace trlhpc::cpu
