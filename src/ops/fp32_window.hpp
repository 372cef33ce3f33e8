#pragma once
// Fp32Window: an fp32 view of an F32 or BF16 host tensor for a CPU kernel that computes in fp32.
//
// Under --bf16 the activations that feed GEMMs are stored BF16 (half the memory and bandwidth) while
// the CPU kernels of attention, RMSNorm, RoPE, SwiGLU, biases and the loss compute in fp32. A window
// on an F32 tensor is the tensor's own memory (no copy: the fp32 path is untouched). On a BF16
// tensor it is a converted fp32 copy: In widens on construction, Out rounds back to nearest even on
// destruction, InOut does both. The copy is exact on the way in (every bf16 is an fp32), so a kernel
// reading bf16 sees exactly the values it would read from an fp32 tensor holding bf16-rounded numbers,
// and its output is rounded once, where the fp32 kernel would have stored it.
//
// The copies live in a per-thread stack of grow-only buffers (kernels/cpu/scratch.hpp): windows are
// nested within one op and die in reverse order, so window k of any op reuses buffer k, and a training
// step's windows stop allocating (and page-faulting) after the first step.
#include <cstdint>
#include <deque>

#include "kernels/cpu/scratch.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/core/tensor.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace trlhpc {

class Fp32Window {
 public:
  enum Mode { In, Out, InOut };

  Fp32Window(const Tensor& t, Mode mode) : tensor_(t), mode_(mode) {
    TRLHPC_ASSERT(t.dtype() == DType::F32 || t.dtype() == DType::BF16,
                  std::string("an fp32 kernel takes F32 or BF16 tensors, got ") + dtype_name(t.dtype()));
    if (t.dtype() == DType::F32) {
      data_ = t.f32();
      return;
    }
    const int64_t n = t.numel();
    Stack& stack = stack_of_thread();
    if (stack.depth == stack.buffers.size()) stack.buffers.emplace_back();
    data_ = stack.buffers[stack.depth++].reserve(n);
    copied_ = true;
    if (mode != Out) cpu::cast_bf16_to_f32(data_, t.ptr<const uint16_t>(), n);
  }
  ~Fp32Window() {
    if (!copied_) return;
    --stack_of_thread().depth;
    if (mode_ == In) return;
    cpu::cast_f32_to_bf16(tensor_.ptr<uint16_t>(), data_, tensor_.numel());
  }
  Fp32Window(const Fp32Window&) = delete;
  Fp32Window& operator=(const Fp32Window&) = delete;

  float* get() const { return data_; }

 private:
  struct Stack {
    std::deque<cpu::Scratch> buffers;  // deque: growing it never moves a buffer in use
    size_t depth = 0;                  // buffers held by live windows
  };
  static Stack& stack_of_thread() {
    thread_local Stack stack;
    return stack;
  }

  Tensor tensor_;
  Mode mode_;
  bool copied_ = false;
  float* data_ = nullptr;
};

}  // namespace trlhpc
