// The device communicators on device memory: every collective, blocking and async, for f32 and bf16,
// with the exactly predictable inputs of comm_test_support.hpp. NcclCommunicator needs a CUDA build and
// one GPU per rank; StagedMpiCommunicator needs a CUDA build and one GPU that every rank may share.
// Both skip on every rank alike otherwise, so this passes on CPU-only CI. The staged cases were only
// compiled on the development machine (no GPU).
#include <gtest/gtest.h>
#include <mpi.h>

#include "mpi/comm_test_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/runtime/mpi_environment.hpp"
#include "trlhpc/runtime/topology.hpp"
#include "trlhpc/comm/device_communicator.hpp"

#ifdef TRLHPC_HAVE_CUDA
#include <cuda_runtime.h>

#include "trlhpc/core/cuda_check.hpp"
#include "device_query.cuh"
#include "trlhpc/comm/nccl_communicator.hpp"
#include "trlhpc/comm/staged_mpi_communicator.hpp"
#endif

namespace trlhpc {
namespace {

#ifndef TRLHPC_HAVE_CUDA
TEST(NcclCommunicator, NeedsACudaBuild) { GTEST_SKIP() << "CPU-only build: NcclCommunicator is not compiled"; }
#else

using testing::matches;
using testing::v;

// (n) elements of T in device memory.
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) { TRLHPC_CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&data_), std::max<size_t>(n, 1) * sizeof(T))); }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    TRLHPC_CHECK_CUDA(cudaMemcpy(data_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  std::span<T> span() { return {data_, n_}; }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    TRLHPC_CHECK_CUDA(cudaMemcpy(host.data(), data_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  size_t n_;
  T* data_ = nullptr;
};

// Calls the blocking or the async (then waited) variant.
struct Runner {
  Communicator& comm;
  bool async;
  template <class T>
  void all_reduce(std::span<T> in, std::span<T> out, ReduceOp op) {
    if (async) return comm.all_reduce_async<T>(in, out, op).wait();
    comm.all_reduce<T>(in, out, op);
  }
  template <class T>
  void reduce_scatter(std::span<T> in, std::span<T> out) {
    if (async) return comm.reduce_scatter_async<T>(in, out).wait();
    comm.reduce_scatter<T>(in, out);
  }
  template <class T>
  void all_gather(std::span<T> in, std::span<T> out) {
    if (async) return comm.all_gather_async<T>(in, out).wait();
    comm.all_gather<T>(in, out);
  }
  template <class T>
  void all_gather_variable(std::span<T> in, std::span<T> out, std::span<const size_t> counts) {
    if (async) return comm.all_gather_variable_async<T>(in, out, counts).wait();
    comm.all_gather_variable<T>(in, out, counts);
  }
  template <class T>
  void all_to_all(std::span<T> in, std::span<T> out) {
    if (async) return comm.all_to_all_async<T>(in, out).wait();
    comm.all_to_all<T>(in, out);
  }
  template <class T>
  void broadcast(std::span<T> data, int root) {
    if (async) return comm.broadcast_async<T>(data, root).wait();
    comm.broadcast<T>(data, root);
  }
  template <class T>
  void send_recv(std::span<T> send, int dest, std::span<T> recv, int source) {
    if (async) return comm.send_recv_async<T>(send, dest, recv, source).wait();
    comm.send_recv<T>(send, dest, recv, source);
  }
};

class DeviceCommunicatorTest : public ::testing::TestWithParam<DeviceCommKind> {
 protected:
  void SetUp() override {
    MpiEnvironment mpi(nullptr, nullptr);  // MPI is already up: this only reads rank, size and host
    if (GetParam() == DeviceCommKind::Nccl) {
      try {
        gpu_ = Topology::discover(mpi, DeviceRequest::Cuda).gpu_index();
      } catch (const UserError& e) {
        GTEST_SKIP() << e.what();  // same decision on every rank
      }
    } else {
      int gpus = cuda::visible_device_count();
      MPI_Allreduce(MPI_IN_PLACE, &gpus, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
      if (gpus == 0) GTEST_SKIP() << "the staged backend needs a GPU on every rank";
      gpu_ = mpi.world_rank() % gpus;  // with more ranks than GPUs, several ranks share one
    }
    handle_ = MpiComm::duplicate(MPI_COMM_WORLD);
    comm_ = make_device_communicator_factory(GetParam(), gpu_)(DeviceCommArgs{handle_.get(), {}, {}});
    TRLHPC_CHECK_CUDA(cudaSetDevice(gpu_));
  }

  template <class T>
  void check_all(bool async) {
    Communicator& comm = *comm_;
    Runner run{comm, async};
    const int P = comm.size(), r = comm.rank();
    auto sum = [&](size_t i) {
      int64_t s = 0;
      for (int q = 0; q < P; ++q) s += v(q, i);
      return s;
    };
    for (size_t n : testing::test_counts()) {
      SCOPED_TRACE(std::string(async ? "async" : "blocking") + " n=" + std::to_string(n));
      DeviceArray<T> in(testing::filled<T>(n, [&](size_t i) { return v(r, i); })), out(n);
      run.all_reduce(in.span(), out.span(), ReduceOp::Sum);
      EXPECT_TRUE(matches(out.download(), sum)) << "all_reduce";
      run.all_reduce(in.span(), in.span(), ReduceOp::Max);
      EXPECT_TRUE(matches(in.download(), [&](size_t i) { return v(P - 1, i); })) << "all_reduce max in place";

      DeviceArray<T> blocks(testing::filled<T>(n * P, [&](size_t i) { return v(r, i); })), shard(n), full(n * P);
      run.reduce_scatter(blocks.span(), shard.span());
      EXPECT_TRUE(matches(shard.download(), [&](size_t i) { return sum(r * n + i); })) << "reduce_scatter";
      DeviceArray<T> mine(testing::filled<T>(n, [&](size_t i) { return v(r, i); }));
      run.all_gather(mine.span(), full.span());
      EXPECT_TRUE(matches(full.download(), [&](size_t j) { return v(static_cast<int>(j / n), j % n); })) << "all_gather";
      run.all_to_all(blocks.span(), full.span());
      EXPECT_TRUE(matches(full.download(), [&](size_t j) { return v(static_cast<int>(j / n), r * n + j % n); }))
          << "all_to_all";

      std::vector<size_t> counts(P);  // (P) rank q contributes n + q elements, every third rank none
      size_t total = 0;
      for (int q = 0; q < P; ++q) total += counts[q] = q % 3 == 1 ? 0 : n + q;
      DeviceArray<T> part(testing::filled<T>(counts[r], [&](size_t i) { return v(r, i); })), joined(total);
      run.all_gather_variable(part.span(), joined.span(), std::span<const size_t>(counts));
      const auto got = joined.download();
      size_t offset = 0;
      for (int q = 0; q < P; ++q) {
        EXPECT_TRUE(matches(std::span<const T>(got).subspan(offset, counts[q]), [&](size_t i) { return v(q, i); }))
            << "all_gather_variable part of rank " << q;
        offset += counts[q];
      }

      DeviceArray<T> data(testing::filled<T>(n, [&](size_t i) { return r == P - 1 ? v(P - 1, i) : 99; }));
      run.broadcast(data.span(), P - 1);
      EXPECT_TRUE(matches(data.download(), [&](size_t i) { return v(P - 1, i); })) << "broadcast";

      const int prev = (r + P - 1) % P;
      DeviceArray<T> send(testing::filled<T>(n + r, [&](size_t i) { return v(r, i); })), recv(n + prev);
      run.send_recv(send.span(), (r + 1) % P, recv.span(), prev);
      EXPECT_TRUE(matches(recv.download(), [&](size_t i) { return v(prev, i); })) << "send_recv ring";
    }
    comm.barrier();
  }

  int gpu_ = -1;
  MpiComm handle_;
  std::unique_ptr<Communicator> comm_;
};

TEST_P(DeviceCommunicatorTest, FloatBlockingAndAsync) {
  check_all<float>(false);
  check_all<float>(true);
}

TEST_P(DeviceCommunicatorTest, Bf16BlockingAndAsync) {
  check_all<uint16_t>(false);
  check_all<uint16_t>(true);
}

TEST_P(DeviceCommunicatorTest, AsyncOverlapsHostCompute) {
  const int P = comm_->size(), r = comm_->rank();
  const size_t n = size_t{16} << 20;  // 64 MiB of float
  DeviceArray<float> data(testing::filled<float>(n, [&](size_t i) { return v(r, i); }));
  CommRequest req = comm_->all_reduce_async(data.span());
  double acc = 0;
  for (int i = 0; i < 1000000; ++i) acc += (i % 3) * 0.5;
  EXPECT_DOUBLE_EQ(acc, 499999.5);
  req.wait();
  EXPECT_TRUE(matches(data.download(), [&](size_t i) { return P * static_cast<int64_t>(i % 7) + 3 * P * (P - 1) / 2; }));
  EXPECT_EQ(comm_->device(), Device::CUDA);
  EXPECT_STREQ(comm_->backend_name(), GetParam() == DeviceCommKind::Nccl ? "nccl" : "staged-mpi");
}

INSTANTIATE_TEST_SUITE_P(Kinds, DeviceCommunicatorTest,
                         ::testing::Values(DeviceCommKind::Nccl, DeviceCommKind::StagedMpi),
                         [](const auto& info) { return info.param == DeviceCommKind::Nccl ? "Nccl" : "StagedMpi"; });
#endif

}  // namespace
}  // namespace trlhpc
