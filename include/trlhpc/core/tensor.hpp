#pragma once
// Tensor: a typed, shaped view of memory on one device, optionally owning it.
//
// Storage is shared (std::shared_ptr) so views of a flat parameter buffer keep the buffer alive.
// Memory is allocated by a backend (ops/Ops::allocate) so device tensors come from the device's
// allocator; host tensors can also be made directly with Tensor::host().
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "trlhpc/core/dtype.hpp"

namespace trlhpc {

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& shape);
std::string shape_string(const Shape& shape);  // "(2, 3, 4)"

class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<void> storage, void* data, DType dtype, Device device, Shape shape)
      : storage_(std::move(storage)), data_(data), dtype_(dtype), device_(device), shape_(std::move(shape)) {}

  // Zero-filled, 64-byte aligned host tensor.
  static Tensor host(Shape shape, DType dtype = DType::F32);

  bool defined() const { return data_ != nullptr || numel() == 0; }
  void* data() const { return data_; }
  template <class T>
  T* ptr() const { return static_cast<T*>(data_); }
  float* f32() const;      // asserts dtype F32
  int32_t* i32() const;    // asserts dtype I32
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_.at(static_cast<size_t>(i < 0 ? static_cast<int>(shape_.size()) + i : i)); }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }

  // A view of `shape` starting `offset_elements` into this tensor's memory (must fit).
  Tensor view(Shape shape, int64_t offset_elements = 0) const;
  // Same memory, new shape of equal numel.
  Tensor reshape(Shape shape) const;

 private:
  std::shared_ptr<void> storage_;
  void* data_ = nullptr;
  DType dtype_ = DType::F32;
  Device device_ = Device::CPU;
  Shape shape_;
};

}  // namespace trlhpc
