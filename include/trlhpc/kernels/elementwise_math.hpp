#pragma once
// Per-element math shared by the CPU and CUDA backends: plain inline functions that nvcc compiles for
// both host and device (__host__ __device__) and any C++ compiler compiles for the host, so the unit
// test tests/unit/test_elementwise_math.cpp checks on the host exactly what the GPU kernels run.
//
//   silu(g) = g s(g), s = 1/(1+exp(-g));  d silu/dg = s (1 + g (1 - s))        (swiglu, Shazeer 2020)
//   gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))                (geglu, Gemma)
//   AdamW, torch.optim.AdamW semantics (Loshchilov & Hutter 2019), see adamw_update below
//   RoPE rotate-half pair: (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin), angle = fp32(pos * inv_freq)
//   bf16: round to nearest even from fp32 (NaN stays a quiet NaN), and back by a 16-bit shift
//   softcap(x) = cap tanh(x / cap) (Gemma 2's scores and logits; d/dx = 1 - tanh(x / cap)^2), the CUDA
//   kernels' (the CPU kernels use kernels/cpu/softcap.hpp's vectorisable tanh)
#include <math.h>  // expf, sqrtf in the global namespace on host and device

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TRLHPC_HOST_DEVICE __host__ __device__
#else
#define TRLHPC_HOST_DEVICE
#endif

namespace trlhpc::math {

// ---- SwiGLU ------------------------------------------------------------------------------------------
TRLHPC_HOST_DEVICE inline float sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }
TRLHPC_HOST_DEVICE inline float silu(float g) { return g * sigmoid(g); }
// d silu / dg = s + g s (1 - s) = s (1 + g (1 - s))
TRLHPC_HOST_DEVICE inline float silu_grad(float g) {
  const float s = sigmoid(g);
  return s * (1.0f + g * (1.0f - s));
}
// out = silu(gate) * up
TRLHPC_HOST_DEVICE inline float swiglu(float gate, float up) { return silu(gate) * up; }
// dgate = dout * up * silu'(gate),  dup = dout * silu(gate)
TRLHPC_HOST_DEVICE inline void swiglu_grad(float gate, float up, float dout, float* dgate, float* dup) {
  const float s = sigmoid(gate);
  *dup = dout * gate * s;
  *dgate = dout * up * s * (1.0f + gate * (1.0f - s));
}

// ---- Tanh softcapping ---------------------------------------------------------------------------------
// In transformers' operation order: divide, tanh, multiply.
TRLHPC_HOST_DEVICE inline float softcap(float x, float cap) { return tanhf(x / cap) * cap; }

// ---- GeGLU with tanh GELU (Gemma's gelu_pytorch_tanh MLP) --------------------------------------------
// gelu(g) = 0.5 g (1 + tanh(b (g + k g^3))), b = sqrt(2/pi), k = 0.044715, in torch's operation order;
// d gelu/dg = 0.5 (1 + t) + 0.5 g (1 - t^2) b (1 + 3 k g^2), t = tanh(b (g + k g^3)).
constexpr float kGeluTanhBeta = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluTanhKappa = 0.044715f;
TRLHPC_HOST_DEVICE inline float gelu_tanh(float g) {
  const float inner = kGeluTanhBeta * (g + kGeluTanhKappa * (g * g * g));
  return 0.5f * g * (1.0f + tanhf(inner));
}
TRLHPC_HOST_DEVICE inline float gelu_tanh_grad(float g) {
  const float g2 = g * g;
  const float t = tanhf(kGeluTanhBeta * (g + kGeluTanhKappa * (g2 * g)));
  const float left_derivative = 0.5f * (1.0f + t);
  const float inner_derivative = kGeluTanhBeta * (1.0f + 3.0f * kGeluTanhKappa * g2);
  const float right_derivative = 0.5f * g * (1.0f - t * t) * inner_derivative;
  return left_derivative + right_derivative;
}
// out = gelu_tanh(gate) * up
TRLHPC_HOST_DEVICE inline float geglu_tanh(float gate, float up) { return gelu_tanh(gate) * up; }
// dgate = dout * up * gelu_tanh'(gate),  dup = dout * gelu_tanh(gate)
TRLHPC_HOST_DEVICE inline void geglu_tanh_grad(float gate, float up, float dout, float* dgate, float* dup) {
  *dup = dout * gelu_tanh(gate);
  *dgate = dout * up * gelu_tanh_grad(gate);
}

// ---- AdamW -------------------------------------------------------------------------------------------
// The per-step scalars, rounded to fp32 as torch does for fp32 tensors (bias corrections in double).
struct AdamWScalars {
  float decay;      // 1 - lr * weight_decay
  float w1, w2;     // 1 - beta1 (the lerp weight), 1 - beta2
  float beta2;
  float step_size;  // lr / (1 - beta1^step)
  float bc2_sqrt;   // sqrt(1 - beta2^step)
  float eps;
  bool lerp_low;    // torch's lerp: m + w (g - m) for w < 0.5, else g - (g - m)(1 - w)
};

inline AdamWScalars adamw_scalars(float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step) {
  const double t = static_cast<double>(step);
  AdamWScalars s;
  s.decay = static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay);
  s.w1 = static_cast<float>(1.0 - static_cast<double>(beta1));
  s.w2 = static_cast<float>(1.0 - static_cast<double>(beta2));
  s.beta2 = beta2;
  s.step_size = static_cast<float>(lr / (1.0 - std::pow(static_cast<double>(beta1), t)));
  s.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(beta2), t)));
  s.eps = eps;
  s.lerp_low = s.w1 < 0.5f;
  return s;
}

// One element, in torch's operation order:
//   p <- p (1 - lr wd);  m <- lerp(m, g, 1 - b1);  v <- b2 v + (1 - b2) g^2;
//   p <- p - step_size * m / (sqrt(v) / bc2_sqrt + eps)
TRLHPC_HOST_DEVICE inline void adamw_update(float* p, float g, float* m, float* v, const AdamWScalars& s) {
  const float decayed = *p * s.decay;
  const float mi = s.lerp_low ? *m + s.w1 * (g - *m) : g - (g - *m) * (1.0f - s.w1);
  const float vi = *v * s.beta2 + s.w2 * g * g;
  const float denom = sqrtf(vi) / s.bc2_sqrt + s.eps;
  *m = mi;
  *v = vi;
  *p = decayed - s.step_size * (mi / denom);
}

// ---- RoPE --------------------------------------------------------------------------------------------
// The angle as transformers forms it: the fp32 product of the position and the inverse frequency.
TRLHPC_HOST_DEVICE inline float rope_angle(int32_t pos, float inv_freq) { return static_cast<float>(pos) * inv_freq; }
// Rotation of the pair (x1, x2) = (x[i], x[i + HS/2]) by the angle whose cos/sin are c, s
// (backward: pass -s).
TRLHPC_HOST_DEVICE inline void rope_rotate(float* x1, float* x2, float c, float s) {
  const float a = *x1, b = *x2;
  *x1 = a * c - b * s;
  *x2 = b * c + a * s;
}

// ---- bf16 --------------------------------------------------------------------------------------------
TRLHPC_HOST_DEVICE inline uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}
TRLHPC_HOST_DEVICE inline float float_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}
// fp32 -> bf16 bits, round to nearest even; NaN -> quiet NaN (as __float2bfloat16_rn and torch).
TRLHPC_HOST_DEVICE inline uint16_t bf16_bits_from_float(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}
TRLHPC_HOST_DEVICE inline float float_from_bf16_bits(uint16_t h) { return float_from_bits(static_cast<uint32_t>(h) << 16); }
// The fp32 value a bf16 store of f reads back as.
TRLHPC_HOST_DEVICE inline float round_to_bf16(float f) { return float_from_bf16_bits(bf16_bits_from_float(f)); }

}  // namespace trlhpc::math
