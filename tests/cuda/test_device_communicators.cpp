// The CUDA device communicators at world size 1 in one process (MPI started as a singleton):
// NcclCommunicator and StagedMpiCommunicator on the CUDA backend's tensors, ordered against its
// compute stream, compared with MpiCommunicator on the same values in host memory. bf16 sums through
// the staged backend use MpiBf16Ops, so they must equal the MPI result bit for bit.
// Without a GPU every case skips and the binary exits 77 (cuda_gtest_main.cpp). Only compiled on the
// development machine (no GPU): these cases have not yet run.
#include <mpi.h>

#include <memory>
#include <random>

#include "cuda_test_util.hpp"
#include "trlhpc/core/tensor_span.hpp"
#include "trlhpc/comm/device_communicator.hpp"
#include "trlhpc/comm/nccl_communicator.hpp"
#include "trlhpc/comm/staged_mpi_communicator.hpp"
#include "trlhpc/runtime/mpi_comm.hpp"

namespace trlhpc::cuda_test {
namespace {

// MPI for the whole binary: a singleton world of one rank (no mpirun needed).
class MpiSingleton : public ::testing::Environment {
 public:
  void SetUp() override {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) MPI_Init(nullptr, nullptr), started_ = true;
  }
  void TearDown() override {
    if (started_) MPI_Finalize();
  }

 private:
  bool started_ = false;
};
const auto* const kMpi = ::testing::AddGlobalTestEnvironment(new MpiSingleton);

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

template <class T>
std::vector<T> download(Ops& ops, const Tensor& t) {
  std::vector<T> host(static_cast<size_t>(t.numel()));
  ops.copy_to_host(host.data(), t, host.size() * sizeof(T));
  return host;
}

class DeviceCommunicators : public ::testing::TestWithParam<DeviceCommKind> {
 protected:
  void SetUp() override {
    TRLHPC_REQUIRE_GPU();
    gpu_ = make_cuda_backend(0);
    host_handle_ = MpiComm::duplicate(MPI_COMM_WORLD);
    device_handle_ = MpiComm::duplicate(MPI_COMM_WORLD);
    host_ = std::make_unique<MpiCommunicator>(host_handle_.get());
    auto stream = static_cast<CUstream_st*>(gpu_->stream_handle());
    device_ = make_device_communicator_factory(GetParam(), 0, stream)(DeviceCommArgs{device_handle_.get(), {}, {}});
  }

  std::unique_ptr<CudaOps> gpu_;
  MpiComm host_handle_, device_handle_;
  std::unique_ptr<MpiCommunicator> host_;
  std::unique_ptr<Communicator> device_;
};

TEST_P(DeviceCommunicators, ReportTheirBackendAndDevice) {
  EXPECT_EQ(device_->device(), Device::CUDA);
  EXPECT_STREQ(device_->backend_name(), GetParam() == DeviceCommKind::Nccl ? "nccl" : "staged-mpi");
  EXPECT_EQ(device_->size(), 1);
  EXPECT_EQ(device_->rank(), 0);
}

// The input is produced by a kernel queued on the compute stream just before the collective (no host
// synchronisation in between): the compute -> comm event must order them. The result is consumed by a
// kernel queued right after wait(): the comm -> compute event must order that.
TEST_P(DeviceCommunicators, F32AllReduceIsOrderedAgainstTheComputeStream) {
  const size_t n = 1 << 20;
  const std::vector<float> values = random_values(n, 7);
  Tensor x = upload(*gpu_, values, {static_cast<int64_t>(n)});
  for (bool async : {false, true}) {
    SCOPED_TRACE(async ? "async" : "blocking");
    Tensor y = gpu_->allocate({static_cast<int64_t>(n)});
    gpu_->copy(y, x);            // queued on the compute stream
    gpu_->scale_inplace(y, 2.0f);  // y = 2x, still queued when the collective is issued
    if (async) device_->all_reduce_async(span_of<float>(y)).wait();
    else device_->all_reduce(span_of<float>(y));
    gpu_->scale_inplace(y, 0.5f);  // after the collective: back to x
    std::vector<float> want = values;
    host_->all_reduce(std::span<float>(want));  // world size 1: x itself, through MPI
    EXPECT_EQ(download<float>(*gpu_, y), want);
  }
}

TEST_P(DeviceCommunicators, Bf16CollectivesMatchMpi) {
  const size_t n = 4099;
  std::vector<uint16_t> bits(n);
  const std::vector<float> values = random_values(n, 11);
  for (size_t i = 0; i < n; ++i) bits[i] = math::bf16_bits_from_float(values[i]);
  Tensor x = gpu_->allocate({static_cast<int64_t>(n)}, DType::BF16);
  gpu_->copy_from_host(x, bits.data(), n * sizeof(uint16_t));
  Tensor gathered = gpu_->allocate({static_cast<int64_t>(n)}, DType::BF16);
  device_->all_reduce(span_of<uint16_t>(x));
  device_->all_gather(span_of<const uint16_t>(x), span_of<uint16_t>(gathered));
  std::vector<uint16_t> want = bits, want_gathered(n);
  host_->all_reduce(std::span<uint16_t>(want));
  host_->all_gather(std::span<const uint16_t>(want), std::span<uint16_t>(want_gathered));
  EXPECT_EQ(download<uint16_t>(*gpu_, x), want);
  EXPECT_EQ(download<uint16_t>(*gpu_, gathered), want_gathered);
}

TEST_P(DeviceCommunicators, SendRecvToItselfAndAllToAll) {
  const size_t n = 513;
  const std::vector<float> values = random_values(n, 13);
  Tensor send = upload(*gpu_, values, {static_cast<int64_t>(n)});
  Tensor recv = gpu_->allocate({static_cast<int64_t>(n)});
  device_->send_recv_async(span_of<const float>(send), 0, span_of<float>(recv), 0).wait();
  EXPECT_EQ(download<float>(*gpu_, recv), values);
  Tensor swapped = gpu_->allocate({static_cast<int64_t>(n)});
  device_->all_to_all(span_of<const float>(send), span_of<float>(swapped));
  EXPECT_EQ(download<float>(*gpu_, swapped), values);
}

INSTANTIATE_TEST_SUITE_P(Kinds, DeviceCommunicators, ::testing::Values(DeviceCommKind::Nccl, DeviceCommKind::StagedMpi),
                         [](const auto& info) { return info.param == DeviceCommKind::Nccl ? "Nccl" : "StagedMpi"; });

// The staged backend's pinned buffers are pooled: repeating an operation allocates nothing new.
TEST(StagedMpiCommunicator, ReusesItsPinnedBuffers) {
  TRLHPC_REQUIRE_GPU();
  std::unique_ptr<CudaOps> gpu = make_cuda_backend(0);
  MpiComm handle = MpiComm::duplicate(MPI_COMM_WORLD);
  StagedMpiCommunicator comm(handle.get(), 0, static_cast<CUstream_st*>(gpu->stream_handle()));
  Tensor x = upload(*gpu, random_values(10000, 3), {10000});
  comm.all_reduce(span_of<float>(x));
  const size_t after_first = comm.pinned_bytes();
  EXPECT_GE(after_first, 10000 * sizeof(float));
  for (int i = 0; i < 5; ++i) comm.all_reduce_async(span_of<float>(x)).wait();
  EXPECT_EQ(comm.pinned_bytes(), after_first);
}

}  // namespace
}  // namespace trlhpc::cuda_test
