// The caching device allocator: size classes (host-only, runs without a GPU), reuse without new
// cudaMalloc calls, peak reporting, and tensors that outlive the backend that made them.
#include <gtest/gtest.h>

#include "cuda_test_util.hpp"
#include "device_allocator.cuh"

namespace trlhpc::cuda_test {
namespace {

TEST(CudaAllocator, SizeClassesWasteAtMostAQuarter) {
  using cuda::DeviceAllocator;
  EXPECT_EQ(DeviceAllocator::size_class(1), 512u);
  EXPECT_EQ(DeviceAllocator::size_class(512), 512u);
  EXPECT_EQ(DeviceAllocator::size_class(1000), 1024u);
  EXPECT_EQ(DeviceAllocator::size_class(5000), 5120u);
  EXPECT_EQ(DeviceAllocator::size_class(size_t{600} << 20), size_t{640} << 20);
  size_t previous = 0;
  for (size_t bytes = 1; bytes < (size_t{1} << 34); bytes = bytes * 3 / 2 + 1) {
    const size_t c = DeviceAllocator::size_class(bytes);
    EXPECT_GE(c, bytes);
    EXPECT_GE(c, previous) << "classes must grow with the request";
    if (bytes > 512) EXPECT_LE(c, bytes + bytes / 4 + 1) << bytes;
    previous = c;
  }
}

TEST(CudaAllocator, ReusesFreedBlocksAndReportsPeak) {
  TRLHPC_REQUIRE_GPU();
  std::unique_ptr<CudaOps> gpu = make_cuda_backend(0);
  const DeviceMemoryStats start = gpu->memory_stats();
  {
    Tensor a = gpu->allocate({int64_t{25} << 20});  // 100 MiB
    Tensor b = gpu->allocate({1000}, DType::BF16);
    const DeviceMemoryStats held = gpu->memory_stats();
    EXPECT_GE(held.in_use_bytes - start.in_use_bytes, int64_t{100} << 20);
    EXPECT_EQ(held.device_mallocs - start.device_mallocs, 2);
  }
  const DeviceMemoryStats after_free = gpu->memory_stats();
  EXPECT_EQ(after_free.in_use_bytes, start.in_use_bytes);
  EXPECT_GE(after_free.peak_in_use_bytes - start.in_use_bytes, int64_t{100} << 20);
  for (int i = 0; i < 10; ++i) {  // the same shapes again: served from the cache
    Tensor a = gpu->allocate({int64_t{25} << 20});
    Tensor b = gpu->allocate({1000}, DType::BF16);
  }
  EXPECT_EQ(gpu->memory_stats().device_mallocs, after_free.device_mallocs);
  gpu->reset_peak_memory();
  EXPECT_EQ(gpu->memory_stats().peak_in_use_bytes, gpu->memory_stats().in_use_bytes);
}

TEST(CudaAllocator, HostDeviceRoundTripsAcrossBackends) {
  TRLHPC_REQUIRE_GPU();
  Backends be;  // a CPU tensor's bytes through the device and back are unchanged
  const std::vector<float> values = testing::random_floats(12345, 3);
  const Pair p = both(be, values, {12345});
  Tensor copy = be.gpu->allocate({12345});
  be.gpu->copy(copy, p.gpu);
  EXPECT_TRUE(close_normalized(download(*be.gpu, copy), download(*be.cpu, p.cpu), 0.0));
}

TEST(CudaAllocator, TensorsOutliveTheirBackend) {
  TRLHPC_REQUIRE_GPU();
  Tensor kept;
  {
    std::unique_ptr<CudaOps> gpu = make_cuda_backend(0);
    kept = upload(*gpu, {1.0f, 2.0f, 3.0f}, {3});
    gpu->synchronize();
  }
  kept = Tensor();  // returns the block to an allocator the tensor kept alive: must not crash
  SUCCEED();
}

}  // namespace
}  // namespace trlhpc::cuda_test
