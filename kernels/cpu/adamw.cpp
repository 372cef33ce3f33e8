// Decoupled AdamW (Loshchilov & Hutter 2019) with torch.optim.AdamW semantics, CPU backend (fp32).
//
// For step t >= 1 (bias corrections bc1 = 1 - b1^t, bc2 = 1 - b2^t, computed in double):
//   p <- p * (1 - lr * wd)                               (decoupled weight decay)
//   m <- b1 m + (1 - b1) g                               (torch: m.lerp_(g, 1 - b1))
//   v <- b2 v + (1 - b2) g^2
//   p <- p - (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps)
// The operations mirror torch's single-tensor path (_single_tensor_adamw, foreach=False) one for one,
// with its scalars rounded to fp32 as torch does for fp32 tensors, so the two agree to about an ulp.
// Under --bf16 the same pass can write the parameters' bf16 compute copy (one read of p fewer per step).
// torch's lerp for weight w < 0.5 computes m + w (g - m); for w >= 0.5, g - (g - m)(1 - w).
#include <cmath>
#include <cstdint>

#include "trlhpc/kernels/cpu.hpp"
#include "trlhpc/kernels/elementwise_math.hpp"

namespace trlhpc::cpu {

namespace {

// kCopy: also store bf16 of the new parameter (the --bf16 compute copy). A template argument rather
// than a branch in the loop, so both loops vectorise as one.
template <bool kCopy>
void adamw_loop(float* param, const float* grad, float* m, float* v, int64_t n, float beta2, float eps, float decay,
                float w1, float w2, float step_size, float bc2_sqrt, uint16_t* compute) {
  const bool lerp_low = w1 < 0.5f;
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    const float p = param[i] * decay;
    const float mi = lerp_low ? m[i] + w1 * (g - m[i]) : g - (g - m[i]) * (1.0f - w1);
    const float vi = v[i] * beta2 + w2 * g * g;
    const float denom = std::sqrt(vi) / bc2_sqrt + eps;
    const float updated = p - step_size * (mi / denom);
    m[i] = mi;
    v[i] = vi;
    param[i] = updated;
    if constexpr (kCopy) compute[i] = math::bf16_bits_from_float(updated);
  }
}

}  // namespace

void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, float lr, float beta1, float beta2,
                float eps, float weight_decay, int64_t step, uint16_t* compute) {
  const double t = static_cast<double>(step);
  const float decay = static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay);
  const float w1 = static_cast<float>(1.0 - static_cast<double>(beta1));  // lerp weight
  const float w2 = static_cast<float>(1.0 - static_cast<double>(beta2));
  const float step_size = static_cast<float>(lr / (1.0 - std::pow(static_cast<double>(beta1), t)));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(beta2), t)));
  if (compute)
    adamw_loop<true>(param, grad, m, v, n, beta2, eps, decay, w1, w2, step_size, bc2_sqrt, compute);
  else
    adamw_loop<false>(param, grad, m, v, n, beta2, eps, decay, w1, w2, step_size, bc2_sqrt, nullptr);
}

}  // namespace trlhpc::cpu
