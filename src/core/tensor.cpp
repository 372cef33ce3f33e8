#include "trlhpc/core/tensor.hpp"

#include <cstdlib>
#include <cstring>
#include <sstream>

#include "trlhpc/core/error.hpp"
#include "trlhpc/core/tensor_span.hpp"

namespace trlhpc {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_string(const Shape& shape) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ")";
  return os.str();
}

Tensor Tensor::host(Shape shape, DType dtype) {
  for (int64_t d : shape) TRLHPC_ASSERT(d >= 0, "negative dimension in " + shape_string(shape));
  size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  size_t rounded = (bytes + 63) / 64 * 64;
  void* memory = rounded ? std::aligned_alloc(64, rounded) : nullptr;
  if (rounded && !memory) throw RuntimeFailure(rank_prefix() + "out of host memory allocating " + std::to_string(bytes) + " bytes");
  if (rounded) std::memset(memory, 0, rounded);
  std::shared_ptr<void> storage(memory, [](void* p) { std::free(p); });
  return Tensor(std::move(storage), memory, dtype, Device::CPU, std::move(shape));
}

float* Tensor::f32() const {
  TRLHPC_ASSERT(dtype_ == DType::F32, std::string("tensor is ") + dtype_name(dtype_) + ", expected F32");
  return static_cast<float*>(data_);
}

int32_t* Tensor::i32() const {
  TRLHPC_ASSERT(dtype_ == DType::I32, std::string("tensor is ") + dtype_name(dtype_) + ", expected I32");
  return static_cast<int32_t*>(data_);
}

void tensor_span_mismatch(const Tensor& t, DType wanted, int64_t count) {
  TRLHPC_ASSERT(false, std::string("span_of: tensor ") + shape_string(t.shape()) + " of " + dtype_name(t.dtype()) +
                           " viewed as " + std::to_string(count) + " elements of " + dtype_name(wanted));
  std::abort();  // unreachable: the assertion throws
}

Tensor Tensor::view(Shape shape, int64_t offset_elements) const {
  TRLHPC_ASSERT(offset_elements >= 0 && offset_elements + shape_numel(shape) <= numel(),
                "view " + shape_string(shape) + " at offset " + std::to_string(offset_elements) +
                    " does not fit in " + shape_string(shape_));
  char* base = static_cast<char*>(data_) + static_cast<size_t>(offset_elements) * dtype_size(dtype_);
  return Tensor(storage_, base, dtype_, device_, std::move(shape));
}

Tensor Tensor::reshape(Shape shape) const {
  TRLHPC_ASSERT(shape_numel(shape) == numel(), "reshape " + shape_string(shape_) + " -> " + shape_string(shape));
  return Tensor(storage_, data_, dtype_, device_, std::move(shape));
}

}  // namespace trlhpc
