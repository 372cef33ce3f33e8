// Rotary position embedding (Su et al. 2021, "RoFormer"), Hugging Face rotate-half layout, CPU backend.
//
// For each token n, head h and i < HS/2, with angle = pos[n] * inv_freq[i], x1 = x[n,h,i] and
// x2 = x[n,h,i+HS/2]:
//   x1' = x1 cos(angle) - x2 sin(angle),   x2' = x2 cos(angle) + x1 sin(angle)
// i.e. a rotation of the pair (x1, x2) by +angle. The map is orthogonal, so its gradient (the
// transpose) is the rotation by -angle: the backward is the same code with sin negated.
// The angle is the fp32 product pos * inv_freq, exactly as transformers forms it (inv_freq @ position_ids
// in fp32); at positions in the thousands a double-precision angle would differ from it by ~1e-4 rad.
// cos/sin of that fp32 angle are then taken in double and cast to fp32, once per token, for all heads.
#include <cmath>
#include <cstdint>
#include <vector>

#include "trlhpc/kernels/cpu.hpp"

namespace trlhpc::cpu {

namespace {

// Rotates every head of every token of x (N, H, HS) by sign * angle.
void rotate(float* x, const int32_t* pos, const float* inv_freq, int64_t N, int64_t H, int64_t HS, double sign) {
  const int64_t half = HS / 2;
#pragma omp parallel
  {
    std::vector<float> cos_t(static_cast<size_t>(half)), sin_t(static_cast<size_t>(half));  // (HS/2) each
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t i = 0; i < half; ++i) {
        const float angle32 = static_cast<float>(pos[n]) * inv_freq[i];
        const double angle = static_cast<double>(angle32);
        cos_t[static_cast<size_t>(i)] = static_cast<float>(std::cos(angle));
        sin_t[static_cast<size_t>(i)] = static_cast<float>(sign * std::sin(angle));
      }
      const float* cs = cos_t.data();
      const float* sn = sin_t.data();
      for (int64_t h = 0; h < H; ++h) {
        float* x1 = x + (n * H + h) * HS;  // (HS/2) first half
        float* x2 = x1 + half;             // (HS/2) second half
#pragma omp simd
        for (int64_t i = 0; i < half; ++i) {
          const float a = x1[i], b = x2[i];
          x1[i] = a * cs[i] - b * sn[i];
          x2[i] = b * cs[i] + a * sn[i];
        }
      }
    }
  }
}

}  // namespace

void rope_fwd(float* x, const int32_t* pos, const float* inv_freq, int64_t N, int64_t H, int64_t HS) {
  rotate(x, pos, inv_freq, N, H, HS, +1.0);
}

void rope_bwd(float* dx, const int32_t* pos, const float* inv_freq, int64_t N, int64_t H, int64_t HS) {
  rotate(dx, pos, inv_freq, N, H, HS, -1.0);
}

}  // namespace trlhpc::cpu
