// CPU offload's device side on CUDA (src/parallel/data_parallel/host_offload.hpp, Ops::allocate_host and the queued
// host copies): pinned host tensors, copies queued on the backend's stream in order with its kernels,
// and one offloaded AdamW step (gradient device -> host, the CPU kernel on the host master and moments,
// master host -> device, then a kernel on the refreshed parameter) against the same step on the CPU
// backend, bit for bit (the host arithmetic is the same CPU kernel on both).
#include <gtest/gtest.h>

#include "cuda_test_util.hpp"
#include "trlhpc/kernels/cpu.hpp"

namespace trlhpc::cuda_test {
namespace {

using testing::random_floats;

TEST(CudaOffload, PinnedHostTensorsAreZeroedHostMemory) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  const Tensor h = be.gpu->allocate_host({1000});
  EXPECT_EQ(h.device(), Device::CPU);
  for (int64_t i = 0; i < h.numel(); ++i) ASSERT_EQ(h.f32()[i], 0.0f) << i;
  const Tensor empty = be.gpu->allocate_host({0});
  EXPECT_EQ(empty.numel(), 0);
}

TEST(CudaOffload, QueuedCopiesFollowAndPrecedeTheStreamsKernels) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  const int64_t n = 1 << 20;
  const std::vector<float> values = random_floats(static_cast<size_t>(n), 1);
  const Tensor host = be.gpu->allocate_host({n});
  std::copy(values.begin(), values.end(), host.f32());
  const Tensor device = be.gpu->allocate({n});
  // No synchronisation between: the kernel must see the copied values, the copy back the scaled ones.
  be.gpu->copy_from_host_async(device, host);
  be.gpu->scale_inplace(device, 2.0f);
  const Tensor back = be.gpu->allocate_host({n});
  be.gpu->copy_to_host_async(back, device);
  be.gpu->wait_host_copies();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(back.f32()[i], 2.0f * values[static_cast<size_t>(i)]) << i;
  // copy_to_host / copy_from_host take a host tensor as their tensor side (checkpoints of offloaded state).
  std::vector<float> read(static_cast<size_t>(n));
  be.gpu->copy_to_host(read.data(), back, read.size() * sizeof(float));
  EXPECT_EQ(read[5], 2.0f * values[5]);
  be.gpu->copy_from_host(back, values.data(), values.size() * sizeof(float));
  EXPECT_EQ(back.f32()[5], values[5]);
}

// One offloaded step on `ops`; returns the parameter after a kernel on the device read the refreshed copy.
std::vector<float> offloaded_step(Ops& ops, const std::vector<float>& param, const std::vector<float>& grad, int64_t n) {
  const Tensor device_param = upload(ops, param, {n}), device_grad = upload(ops, grad, {n});
  const Tensor master = ops.allocate_host({n}), host_grad = ops.allocate_host({n});
  const Tensor m = ops.allocate_host({n}), v = ops.allocate_host({n});
  ops.copy_to_host_async(master, device_param);
  ops.copy_to_host_async(host_grad, device_grad);
  ops.wait_host_copies();
  for (int64_t step = 1; step <= 3; ++step)
    cpu::adamw_step(master.f32(), host_grad.f32(), m.f32(), v.f32(), n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, step);
  ops.copy_from_host_async(device_param, master);
  ops.scale_inplace(device_param, 0.5f);
  return download(ops, device_param);
}

TEST(CudaOffload, OffloadedStepEqualsTheCpuBackendsBitForBit) {
  TRLHPC_REQUIRE_GPU();
  Backends be;
  const int64_t n = 300001;
  const std::vector<float> param = random_floats(static_cast<size_t>(n), 2), grad = random_floats(static_cast<size_t>(n), 3, 0.1f);
  const std::vector<float> want = offloaded_step(*be.cpu, param, grad, n), got = offloaded_step(*be.gpu, param, grad, n);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << i;
  EXPECT_NE(got[0], 0.5f * param[0]);  // the step moved the parameter
}

}  // namespace
}  // namespace trlhpc::cuda_test
