// The caching device allocator: size classes (host-only, runs without a GPU), reuse without new
// cudaMalloc calls, peak reporting, and tensors that outlive the backend that made them.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "cuda_raii.cuh"
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

// Stream-ordered release (docs/CUDA-REVIEW-FIXES.md defect 5) with real streams and events: a side stream (the
// NCCL comm stream's stand-in) is held by a host callback until the test lets it go. A block that the
// side stream uses and the host releases meanwhile must not be handed out again; once the side stream
// has finished, the next allocation of its class gets it back.
TEST(CudaAllocator, BlockUsedOnAnotherStreamIsReusedOnlyAfterThatStreamsWork) {
  TRLHPC_REQUIRE_GPU();
  TRLHPC_CHECK_CUDA(cudaSetDevice(0));
  cuda::DeviceAllocator allocator(0);
  cuda::CudaStream side;
  std::atomic<bool> go{false};
  auto hold = [](void* flag) {
    while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  TRLHPC_CHECK_CUDA(cudaLaunchHostFunc(side.get(), hold, &go));  // the side stream's "collective" runs on

  void* a = allocator.allocate(1 << 20);
  TRLHPC_CHECK_CUDA(cudaMemsetAsync(static_cast<char*>(a) + 4096, 0, 4096, side.get()));  // uses a slice of a
  allocator.record_stream(static_cast<char*>(a) + 4096, side.get());
  allocator.release(a);
  EXPECT_EQ(allocator.pending_blocks(), 1u);
  void* b = allocator.allocate(1 << 20);
  EXPECT_NE(b, a) << "a block still in use on the side stream was handed out again";
  allocator.release(b);

  go = true;
  TRLHPC_CHECK_CUDA(cudaStreamSynchronize(side.get()));
  void* c = allocator.allocate(1 << 20);
  void* d = allocator.allocate(1 << 20);
  EXPECT_TRUE(c == a || d == a) << "the block came back once the side stream's event completed";
  EXPECT_EQ(allocator.pending_blocks(), 0u);
  allocator.release(c);
  allocator.release(d);
  EXPECT_EQ(allocator.stats().device_mallocs, 2) << "both blocks reused, no third cudaMalloc";
}

// The backend's hook (what the NCCL communicator calls) reaches the same allocator.
TEST(CudaAllocator, BackendStreamUseRecorderDefersReuse) {
  TRLHPC_REQUIRE_GPU();
  std::unique_ptr<CudaOps> gpu = make_cuda_backend(0);
  cuda::CudaStream side;
  std::atomic<bool> go{false};
  auto hold = [](void* flag) {
    while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  TRLHPC_CHECK_CUDA(cudaLaunchHostFunc(side.get(), hold, &go));
  const void* first = nullptr;
  {
    Tensor t = gpu->allocate({1 << 18});
    first = t.data();
    gpu->stream_use_recorder()(t.data(), side.get());
  }  // dropped while the side stream is held
  {
    Tensor u = gpu->allocate({1 << 18});
    EXPECT_NE(static_cast<const void*>(u.data()), first);
  }
  go = true;
  TRLHPC_CHECK_CUDA(cudaStreamSynchronize(side.get()));
  Tensor v = gpu->allocate({1 << 18});
  Tensor w = gpu->allocate({1 << 18});
  EXPECT_TRUE(v.data() == first || w.data() == first);
}

}  // namespace
}  // namespace trlhpc::cuda_test
