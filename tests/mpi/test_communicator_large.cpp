// Large buffers (64 MiB per rank): through the single-call path, and (all_reduce, reduce_scatter,
// all_gather) once more with max_elements_per_call = 4 Mi elements, which splits each collective into
// several MPI calls exactly as counts beyond INT_MAX are split. A DISABLED test moves more than INT_MAX elements for real; run it by
// hand (it needs ~4 GiB per rank): mpirun -np 2 mpi_test_communicator_large --gtest_also_run_disabled_tests
#include <gtest/gtest.h>

#include <climits>

#include "mpi/comm_test_support.hpp"

namespace trlhpc {
namespace {

using testing::matches;
using testing::v;

constexpr size_t kElements = size_t{64} << 20 >> 2;  // 64 MiB of float
constexpr size_t kSplitLimit = size_t{4} << 20;       // elements per MPI call on the split path

class LargeCounts : public ::testing::TestWithParam<size_t> {
 protected:
  void SetUp() override {
    handle_ = MpiComm::duplicate(MPI_COMM_WORLD);
    comm_ = std::make_unique<MpiCommunicator>(handle_.get(), MpiCommunicatorOptions{GetParam()});
  }
  MpiComm handle_;
  std::unique_ptr<MpiCommunicator> comm_;
};

TEST_P(LargeCounts, AllReduceInPlace64MiB) {
  const int P = comm_->size(), r = comm_->rank();
  auto data = testing::filled<float>(kElements, [&](size_t i) { return v(r, i); });
  comm_->all_reduce(std::span(data));
  EXPECT_TRUE(matches(data, [&](size_t i) { return P * static_cast<int64_t>(i % 7) + 3 * P * (P - 1) / 2; }));
}

TEST_P(LargeCounts, ReduceScatterAndAllGather64MiB) {
  const int P = comm_->size(), r = comm_->rank();
  const size_t block = kElements / static_cast<size_t>(P);
  const auto in = testing::filled<float>(block * P, [&](size_t i) { return v(r, i); });
  std::vector<float> shard(block);
  comm_->reduce_scatter(in, std::span(shard));
  EXPECT_TRUE(matches(shard, [&](size_t i) {
    return P * static_cast<int64_t>((r * block + i) % 7) + 3 * P * (P - 1) / 2;
  })) << "reduce_scatter";
  std::vector<float> full(block * P);
  comm_->all_gather(std::span<const float>(shard), std::span(full));
  EXPECT_TRUE(matches(full, [&](size_t i) { return P * static_cast<int64_t>(i % 7) + 3 * P * (P - 1) / 2; }))
      << "all_gather";
}

INSTANTIATE_TEST_SUITE_P(Paths, LargeCounts, ::testing::Values(size_t{INT_MAX}, kSplitLimit),
                         [](const auto& info) { return info.param == kSplitLimit ? "split" : "single_call"; });

// Single-call path only: the split path of these is point-to-point/broadcast chunking, which
// test_communicator covers with a 3- and 5-element limit, and 64 MiB more of it costs seconds at np=8.
TEST(LargeCountsSingleCall, AllToAllBroadcastAndRing64MiB) {
  MpiComm handle = MpiComm::duplicate(MPI_COMM_WORLD);
  MpiCommunicator comm(handle.get());
  const int P = comm.size(), r = comm.rank();
  const size_t block = kElements / static_cast<size_t>(P);
  const auto in = testing::filled<float>(block * P, [&](size_t i) { return v(r, i); });
  std::vector<float> out(block * P);
  CommRequest exchange = comm.all_to_all_async(in, std::span(out));
  exchange.wait();
  EXPECT_TRUE(matches(out, [&](size_t j) { return v(static_cast<int>(j / block), r * block + j % block); }))
      << "all_to_all";
  comm.send_recv(in, (r + 1) % P, std::span(out), (r + P - 1) % P);
  EXPECT_TRUE(matches(out, [&](size_t i) { return v((r + P - 1) % P, i); })) << "send_recv";
  comm.broadcast(std::span(out), P - 1);
  EXPECT_TRUE(matches(out, [&](size_t i) { return v((P - 2 + P) % P, i); })) << "broadcast of the last rank's ring data";
}

// More than INT_MAX elements for real (uint8: 2 GiB per buffer).
TEST(LargeCountsBeyondIntMax, DISABLED_AllReduceAndAllGatherOfMoreThanIntMaxElements) {
  MpiComm handle = MpiComm::duplicate(MPI_COMM_WORLD);
  MpiCommunicator comm(handle.get());
  const int P = comm.size(), r = comm.rank();
  const size_t n = size_t{INT_MAX} + 11;
  std::vector<uint8_t> data(n);
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<uint8_t>(v(r, i));
  comm.all_reduce(std::span(data));
  EXPECT_TRUE(matches(data, [&](size_t i) { return P * static_cast<int64_t>(i % 7) + 3 * P * (P - 1) / 2; }));
  data = {};
  const size_t block = size_t{INT_MAX} / static_cast<size_t>(P) + 5;  // total > INT_MAX
  std::vector<uint8_t> part(block), all(block * P);
  for (size_t i = 0; i < block; ++i) part[i] = static_cast<uint8_t>(v(r, i));
  comm.all_gather(std::span<const uint8_t>(part), std::span(all));
  EXPECT_TRUE(matches(all, [&](size_t j) { return v(static_cast<int>(j / block), j % block); }));
}

}  // namespace
}  // namespace trlhpc
