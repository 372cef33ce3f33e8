#pragma once
// span_of: a Tensor's elements as a typed std::span, the form Communicator calls take (collectives
// are typed: the element type gives the datatype and the count, never a byte count). Host C++20 code
// only: the CUDA sources compile as C++17, which has no std::span.
#include <cstdint>
#include <span>
#include <type_traits>

#include "trlhpc/core/tensor.hpp"

namespace trlhpc {

// The DType that stores elements of type T (uint16_t: bf16 bits).
template <class T>
constexpr DType dtype_of() {
  using U = std::remove_const_t<T>;
  static_assert(std::is_same_v<U, float> || std::is_same_v<U, int32_t> || std::is_same_v<U, int64_t> ||
                    std::is_same_v<U, uint16_t>,
                "span_of: no DType for this element type");
  if constexpr (std::is_same_v<U, float>) return DType::F32;
  else if constexpr (std::is_same_v<U, uint16_t>) return DType::BF16;  // bf16 bit patterns, as Communicator takes them
  else if constexpr (std::is_same_v<U, int32_t>) return DType::I32;
  else return DType::I64;
}

// Throws the RuntimeFailure span_of reports (out of line: keeps error.hpp out of this header).
[[noreturn]] void tensor_span_mismatch(const Tensor& t, DType wanted, int64_t count);

// The first `count` elements of `t` (all of them when count < 0) as a span of T. T must be the
// tensor's element type and count at most its size (checked).
template <class T>
std::span<T> span_of(const Tensor& t, int64_t count = -1) {
  const int64_t n = count < 0 ? t.numel() : count;
  if (t.dtype() != dtype_of<T>() || n > t.numel()) tensor_span_mismatch(t, dtype_of<T>(), n);
  return std::span<T>(t.ptr<T>(), static_cast<size_t>(n));
}

}  // namespace trlhpc
