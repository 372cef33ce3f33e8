#pragma once
// exp(x) in fp32 to about 2 ulp for x in [-87, 88], exactly 0 below -87 (so exp(-inf) = 0), branch-free
// so loops over it vectorise. Cephes expf: Cody-Waite reduction x = n ln2 + r with |r| <= ln2/2, a
// degree-7 polynomial for exp(r), and 2^n assembled in the exponent bits; round-to-nearest of x/ln2 uses
// the 1.5 * 2^23 trick, which the compiler keeps without -ffast-math. Shared by the attention, loss and
// SwiGLU kernels.
#include <algorithm>
#include <bit>
#include <cstdint>

namespace trlhpc::cpu {

inline float exp_approx(float x) {
  const float xc = std::min(std::max(x, -87.0f), 88.0f);
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const float two_n = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return x < -87.0f ? 0.0f : p * two_n;
}

}  // namespace trlhpc::cpu
