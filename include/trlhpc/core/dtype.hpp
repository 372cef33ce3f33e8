#pragma once
// Element types and devices a Tensor can hold.
#include <cstddef>
#include <cstdint>
#include <string>

namespace trlhpc {

enum class DType : uint8_t { F32, BF16, F16, I32, I64 };
enum class Device : uint8_t { CPU, CUDA };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::BF16: return 2;
    case DType::F16: return 2;
    case DType::I32: return 4;
    case DType::I64: return 8;
  }
  return 0;
}

const char* dtype_name(DType t);    // "F32", "BF16", ... (safetensors spelling)
const char* device_name(Device d);  // "cpu", "cuda"

// bf16 <-> f32 with round-to-nearest-even, shared by host code and tests.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  __builtin_memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}
inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

}  // namespace trlhpc
