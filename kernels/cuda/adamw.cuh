#pragma once
// Fused multi-tensor AdamW (Loshchilov & Hutter 2019) with torch.optim.AdamW semantics, CUDA backend
// (CPU: kernels/cpu/adamw.cpp). Per element, math::adamw_update (elementwise_math.hpp):
//   p <- p (1 - lr wd);  m <- lerp(m, g, 1 - b1);  v <- b2 v + (1 - b2) g^2;
//   p <- p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// One launch updates up to kAdamWMaxTasks tensors (their descriptors travel in the kernel parameters;
// each block finds its tensor from a prefix of block counts). Optionally the same pass writes bf16(p)
// into the parameters' --bf16 compute copy (ParameterUnit::compute; Ops::adamw_step).
// Gradients are read, never written: the optimizer has no gradient of its own.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "trlhpc/kernels/elementwise_math.hpp"

namespace trlhpc::cuda {

inline constexpr int kAdamWMaxTasks = 32;

struct AdamWTask {
  float* param;             // (n) updated in place
  const float* grad;        // (n)
  float* m;                 // (n) exp_avg
  float* v;                 // (n) exp_avg_sq
  __nv_bfloat16* compute;   // (n) bf16 copy of the new param, or nullptr
  int64_t n;
  math::AdamWScalars scalars;
};

// Queues the updates on `stream` (several launches when there are more than kAdamWMaxTasks tasks).
void adamw_step(const std::vector<AdamWTask>& tasks, cudaStream_t stream);

}  // namespace trlhpc::cuda
