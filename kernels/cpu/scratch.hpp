#pragma once
// A grow-only, 64-byte aligned float buffer that a CPU kernel keeps between its calls.
//
// Why: buffers of a few MB allocated per call (attention's repacked q/k/v and dS store, the GEMM's packed
// b) come from fresh mmap'ed pages each time, and the page faults cost ~6% of a training step at hidden
// 512 (37K faults per step measured with perf). A kernel holds one Scratch per buffer in a thread_local
// owned by the calling thread, so concurrent callers never share one; the memory lives as long as that
// thread and is as large as the largest call so far (the same size every step in training).
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

namespace trlhpc::cpu {

class Scratch {
 public:
  // At least `floats` floats, contents unspecified (the previous call's, or fresh).
  float* reserve(int64_t floats) {
    if (floats > capacity_) {
      data_.reset();  // free first: never hold the old and the new buffer at once
      const size_t bytes = static_cast<size_t>((floats + 15) / 16 * 64);
      data_.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
      if (!data_) throw std::bad_alloc();
      capacity_ = floats;
    }
    return data_.get();
  }
  int64_t capacity_bytes() const { return data_ ? (capacity_ + 15) / 16 * 64 : 0; }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data_;
  int64_t capacity_ = 0;
};

}  // namespace trlhpc::cpu
