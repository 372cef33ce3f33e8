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
// x is fp32 or bf16 bits (--bf16 q and k, rotated in place); the rotation is fp32 either way.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/element_io.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace trlhpc::cpu {

namespace {

// cos/sin (half) of pos * inv_freq as transformers rounds them: the fp32 angle, then double cos/sin.
void angles(int32_t pos, const float* inv_freq, int64_t half, double sign, float* cos_out, float* sin_out) {
  for (int64_t i = 0; i < half; ++i) {
    const double angle = static_cast<double>(static_cast<float>(pos) * inv_freq[i]);
    cos_out[i] = static_cast<float>(std::cos(angle));
    sin_out[i] = static_cast<float>(sign * std::sin(angle));
  }
}

template <class T>
void rotate_token(T* x, int64_t H, int64_t HS, const float* cs, const float* sn) {
  const int64_t half = HS / 2;
  for (int64_t h = 0; h < H; ++h) {
    T* x1 = x + h * HS;  // (HS/2) first half
    T* x2 = x1 + half;   // (HS/2) second half
#pragma omp simd
    for (int64_t i = 0; i < half; ++i) {
      const float a = load_element(x1, i), b = load_element(x2, i);
      store_element(x1, i, a * cs[i] - b * sn[i]);
      store_element(x2, i, b * cs[i] + a * sn[i]);
    }
  }
}

// Rotates every head of every token of x (N, H, HS) by sign * angle.
// Rows of a batch repeat the same positions (0..T-1 in every row), so when the positions are few next
// to the tokens, cos/sin are taken once per position (a (P, HS/2) table) rather than once per token:
// the same values, 1/B of the cos/sin calls (they were ~1.4% of a step at hidden 384).
template <class T>
void rotate(T* x, const int32_t* pos, const float* inv_freq, int64_t N, int64_t H, int64_t HS, double sign) {
  const int64_t half = HS / 2;
  int32_t max_pos = -1;
  bool non_negative = true;
  for (int64_t n = 0; n < N; ++n) {
    max_pos = std::max(max_pos, pos[n]);
    non_negative = non_negative && pos[n] >= 0;
  }
  const int64_t positions = static_cast<int64_t>(max_pos) + 1;
  if (non_negative && positions * 2 <= N) {
    std::vector<float> cos_t(static_cast<size_t>(positions * half)), sin_t(cos_t.size());  // (P, HS/2) each
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < positions; ++p)
      angles(static_cast<int32_t>(p), inv_freq, half, sign, cos_t.data() + p * half, sin_t.data() + p * half);
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; ++n)
      rotate_token(x + n * H * HS, H, HS, cos_t.data() + pos[n] * half, sin_t.data() + pos[n] * half);
    return;
  }
#pragma omp parallel
  {
    std::vector<float> cos_t(static_cast<size_t>(half)), sin_t(static_cast<size_t>(half));  // (HS/2) each
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      angles(pos[n], inv_freq, half, sign, cos_t.data(), sin_t.data());
      rotate_token(x + n * H * HS, H, HS, cos_t.data(), sin_t.data());
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

void rope_fwd(uint16_t* x, const int32_t* pos, const float* inv_freq, int64_t N, int64_t H, int64_t HS) {
  rotate(x, pos, inv_freq, N, H, HS, +1.0);
}

void rope_bwd(uint16_t* dx, const int32_t* pos, const float* inv_freq, int64_t N, int64_t H, int64_t HS) {
  rotate(dx, pos, inv_freq, N, H, HS, -1.0);
}

}  // namespace trlhpc::cpu
