// MpiCommunicator's blocking collectives, for every element type, on the world and on half-world
// communicators, through the single-call path and the split (large-count) path, with zero, one, odd
// and larger counts. Every rank checks its own output against the closed form of comm_test_support.hpp.
#include <gtest/gtest.h>

#include <numeric>

#include "mpi/comm_test_support.hpp"

namespace trlhpc {
namespace {

using testing::from_element;
using testing::matches;
using testing::v;

template <class T>
class CommunicatorTyped : public ::testing::Test {};
using ElementTypes = ::testing::Types<float, double, int32_t, int64_t, uint8_t, uint16_t>;
TYPED_TEST_SUITE(CommunicatorTyped, ElementTypes);

TYPED_TEST(CommunicatorTyped, AllReduceSumMaxMinOutOfPlaceAndInPlace) {
  using T = TypeParam;
  for (auto& c : testing::make_comm_cases()) {
    Communicator& comm = *c.comm;
    const int P = comm.size(), r = comm.rank();
    for (size_t n : testing::test_counts()) {
      SCOPED_TRACE(c.name + " n=" + std::to_string(n));
      const auto in = testing::filled<T>(n, [&](size_t i) { return v(r, i); });
      std::vector<T> out(n);
      comm.all_reduce(in, std::span(out));
      EXPECT_TRUE(matches(out, [&](size_t i) {
        int64_t s = 0;
        for (int q = 0; q < P; ++q) s += v(q, i);
        return s;
      })) << "sum";
      comm.all_reduce(in, std::span(out), ReduceOp::Max);
      EXPECT_TRUE(matches(out, [&](size_t i) { return v(P - 1, i); })) << "max";
      comm.all_reduce(in, std::span(out), ReduceOp::Min);
      EXPECT_TRUE(matches(out, [&](size_t i) { return v(0, i); })) << "min";
      auto inplace = in;
      comm.all_reduce(std::span(inplace));
      EXPECT_TRUE(matches(inplace, [&](size_t i) { return P * static_cast<int64_t>(i % 7) + 3 * P * (P - 1) / 2; }))
          << "in place";
    }
  }
}

TYPED_TEST(CommunicatorTyped, ReduceScatterEqualBlocks) {
  using T = TypeParam;
  for (auto& c : testing::make_comm_cases()) {
    Communicator& comm = *c.comm;
    const int P = comm.size(), r = comm.rank();
    for (size_t n : testing::test_counts()) {
      SCOPED_TRACE(c.name + " block=" + std::to_string(n));
      const auto in = testing::filled<T>(n * P, [&](size_t i) { return v(r, i); });
      std::vector<T> out(n);
      comm.reduce_scatter(in, std::span(out));
      EXPECT_TRUE(matches(out, [&](size_t i) {
        int64_t s = 0;
        for (int q = 0; q < P; ++q) s += v(q, r * n + i);
        return s;
      }));
      comm.reduce_scatter(in, std::span(out), ReduceOp::Max);
      EXPECT_TRUE(matches(out, [&](size_t i) { return v(P - 1, r * n + i); })) << "max";
    }
  }
}

TYPED_TEST(CommunicatorTyped, AllGatherEqualCounts) {
  using T = TypeParam;
  for (auto& c : testing::make_comm_cases()) {
    Communicator& comm = *c.comm;
    const int P = comm.size(), r = comm.rank();
    for (size_t n : testing::test_counts()) {
      SCOPED_TRACE(c.name + " n=" + std::to_string(n));
      const auto in = testing::filled<T>(n, [&](size_t i) { return v(r, i); });
      std::vector<T> out(n * P, testing::to_element<T>(99));
      comm.all_gather(in, std::span(out));
      EXPECT_TRUE(matches(out, [&](size_t j) { return v(static_cast<int>(j / n), j % n); }));
    }
  }
}

TYPED_TEST(CommunicatorTyped, AllGatherVariableCountsIncludingZero) {
  using T = TypeParam;
  for (auto& c : testing::make_comm_cases()) {
    Communicator& comm = *c.comm;
    const int P = comm.size(), r = comm.rank();
    for (size_t n : testing::test_counts()) {
      SCOPED_TRACE(c.name + " n=" + std::to_string(n));
      std::vector<size_t> counts(P), displs(P);  // (P): rank 1 of every 3 sends nothing
      for (int q = 0; q < P; ++q) counts[q] = q % 3 == 1 ? 0 : n + static_cast<size_t>(q);
      std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), size_t{0});
      const auto in = testing::filled<T>(counts[r], [&](size_t i) { return v(r, i); });
      std::vector<T> out(displs.back() + counts.back(), testing::to_element<T>(99));
      comm.all_gather_variable(in, std::span(out), std::span<const size_t>(counts));
      for (int q = 0; q < P; ++q)
        EXPECT_TRUE(matches(std::span<const T>(out).subspan(displs[q], counts[q]), [&](size_t i) { return v(q, i); }))
            << "part of rank " << q;
    }
  }
}

TYPED_TEST(CommunicatorTyped, AllToAllEqualBlocks) {
  using T = TypeParam;
  for (auto& c : testing::make_comm_cases()) {
    Communicator& comm = *c.comm;
    const int P = comm.size(), r = comm.rank();
    for (size_t m : testing::test_counts()) {
      SCOPED_TRACE(c.name + " block=" + std::to_string(m));
      const auto in = testing::filled<T>(m * P, [&](size_t i) { return v(r, i); });
      std::vector<T> out(m * P, testing::to_element<T>(99));
      comm.all_to_all(in, std::span(out));
      // Block s of the output is block r of rank s's input.
      EXPECT_TRUE(matches(out, [&](size_t j) { return v(static_cast<int>(j / m), r * m + j % m); }));
    }
  }
}

TYPED_TEST(CommunicatorTyped, BroadcastFromFirstAndLastRank) {
  using T = TypeParam;
  for (auto& c : testing::make_comm_cases()) {
    Communicator& comm = *c.comm;
    const int P = comm.size(), r = comm.rank();
    for (size_t n : testing::test_counts()) {
      for (int root : {0, P - 1}) {
        SCOPED_TRACE(c.name + " n=" + std::to_string(n) + " root=" + std::to_string(root));
        auto data = testing::filled<T>(n, [&](size_t i) { return r == root ? v(root, i) : 99; });
        comm.broadcast(std::span(data), root);
        EXPECT_TRUE(matches(data, [&](size_t i) { return v(root, i); }));
      }
    }
  }
}

TYPED_TEST(CommunicatorTyped, SendRecvRingBothDirectionsUnequalCounts) {
  using T = TypeParam;
  for (auto& c : testing::make_comm_cases()) {
    Communicator& comm = *c.comm;
    const int P = comm.size(), r = comm.rank();
    for (size_t n : testing::test_counts()) {
      for (int step : {1, P - 1}) {  // to the next rank, and to the previous one
        SCOPED_TRACE(c.name + " n=" + std::to_string(n) + " step=" + std::to_string(step));
        const int dest = (r + step) % P, source = (r - step % P + P) % P;
        // Rank q sends n + q elements, so each receive size differs from its own send size.
        const auto send = testing::filled<T>(n + r, [&](size_t i) { return v(r, i); });
        std::vector<T> recv(n + source, testing::to_element<T>(99));
        comm.send_recv(send, dest, std::span(recv), source);
        EXPECT_TRUE(matches(recv, [&](size_t i) { return v(source, i); }));
      }
    }
  }
}

TEST(Communicator, BarrierAndIdentity) {
  for (auto& c : testing::make_comm_cases()) {
    c.comm->barrier();
    int size = 0, rank = 0;
    MPI_Comm_size(c.handle.get(), &size);
    MPI_Comm_rank(c.handle.get(), &rank);
    EXPECT_EQ(c.comm->size(), size);
    EXPECT_EQ(c.comm->rank(), rank);
    EXPECT_EQ(c.comm->device(), Device::CPU);
  }
}

TEST(Communicator, SizeMismatchIsReportedWithBothSizes) {
  auto cases = testing::make_comm_cases();
  Communicator& comm = *cases[0].comm;
  std::vector<float> in(3), out(3 * comm.size() + 1);
  try {
    comm.all_gather(in, std::span(out));
    FAIL() << "expected RuntimeFailure";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(out.size())), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::to_string(3 * comm.size())), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trlhpc
