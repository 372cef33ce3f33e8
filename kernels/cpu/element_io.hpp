#pragma once
// Reading and writing one activation element that is stored as fp32 or as bf16 bits (uint16_t), in
// fp32 registers: the kernels that take either (RMSNorm, RoPE, attention under --bf16) are templates
// over the stored type, so a bf16 tensor is read and written in place instead of through a widened
// fp32 copy. Widening is exact and the store rounds to nearest even once, so a kernel instantiated for
// bf16 computes bit for bit what its fp32 instantiation computes on the widened values.
#include <cstdint>

#include "trlhpc/kernels/elementwise_math.hpp"

namespace trlhpc::cpu {

inline float load_element(const float* p, int64_t i) { return p[i]; }
inline float load_element(const uint16_t* p, int64_t i) { return math::float_from_bf16_bits(p[i]); }
inline void store_element(float* p, int64_t i, float v) { p[i] = v; }
inline void store_element(uint16_t* p, int64_t i, float v) { p[i] = math::bf16_bits_from_float(v); }

}  // namespace trlhpc::cpu
