// Fused multi-tensor AdamW (see adamw.cuh).
#include <algorithm>

#include "adamw.cuh"
#include "device_math.cuh"
#include "trlhpc/core/cuda_check.hpp"

namespace trlhpc::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kElementsPerBlock = kThreads * 8;

// Kernel parameters: the tasks and, for each, the first block that works on it (block_start[count] =
// total blocks). About 3 KiB, under the 4 KiB parameter limit of every architecture.
struct AdamWLaunch {
  AdamWTask tasks[kAdamWMaxTasks];
  int64_t block_start[kAdamWMaxTasks + 1];
  int count;
};

__global__ void __launch_bounds__(kThreads) adamw_kernel(const AdamWLaunch launch) {
  int t = 0;
  while (t + 1 < launch.count && launch.block_start[t + 1] <= blockIdx.x) ++t;
  const AdamWTask& task = launch.tasks[t];
  const int64_t begin = (blockIdx.x - launch.block_start[t]) * kElementsPerBlock;
  const int64_t end = begin + kElementsPerBlock < task.n ? begin + kElementsPerBlock : task.n;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    float p = task.param[i], m = task.m[i], v = task.v[i];
    math::adamw_update(&p, task.grad[i], &m, &v, task.scalars);
    task.param[i] = p;
    task.m[i] = m;
    task.v[i] = v;
    if (task.compute) task.compute[i] = __float2bfloat16_rn(p);
  }
}

}  // namespace

void adamw_step(const std::vector<AdamWTask>& tasks, cudaStream_t stream) {
  for (size_t first = 0; first < tasks.size(); first += kAdamWMaxTasks) {
    AdamWLaunch launch{};
    int64_t blocks = 0;
    for (size_t i = first; i < std::min(tasks.size(), first + kAdamWMaxTasks); ++i) {
      if (tasks[i].n <= 0) continue;
      launch.tasks[launch.count] = tasks[i];
      launch.block_start[launch.count] = blocks;
      blocks += (tasks[i].n + kElementsPerBlock - 1) / kElementsPerBlock;
      ++launch.count;
    }
    launch.block_start[launch.count] = blocks;
    if (blocks == 0) continue;
    TRLHPC_CHECK_CUDA(blocks <= 0x7fffffff ? cudaSuccess : cudaErrorInvalidConfiguration);
    adamw_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(launch);
    TRLHPC_CHECK_CUDA_LAUNCH("adamw_kernel");
  }
}

}  // namespace trlhpc::cuda
