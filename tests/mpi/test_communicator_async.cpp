// Non-blocking collectives overlapped with compute: every async variant is started at once (in the same
// order on every rank), the rank computes something unrelated while polling test(), then waits in
// reverse order and checks every output exactly. Also: requests completing by polling alone, and a
// dropped or overwritten request waiting for its operation.
#include <gtest/gtest.h>

#include <numeric>

#include "mpi/comm_test_support.hpp"

namespace trlhpc {
namespace {

using testing::matches;
using testing::v;

// ~1 ms of arithmetic whose result is checked, so it cannot be optimised away.
double busy_compute(std::vector<CommRequest*> poll) {
  double acc = 0;
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 20000; ++i) acc += static_cast<double>(i % 13) * 0.5;
    for (CommRequest* r : poll) r->test();  // lets MPI progress the operations
  }
  return acc;
}
constexpr double kBusyResult = 50.0 * (20000 / 13 * 39.0 + [] {
  double tail = 0;
  for (int i = 0; i < 20000 % 13; ++i) tail += i * 0.5;
  return tail;
}());

template <class T>
class CommunicatorAsync : public ::testing::Test {};
using AsyncTypes = ::testing::Types<float, int64_t, uint16_t>;
TYPED_TEST_SUITE(CommunicatorAsync, AsyncTypes);

TYPED_TEST(CommunicatorAsync, AllVariantsOverlappedWithCompute) {
  using T = TypeParam;
  for (auto& c : testing::make_comm_cases()) {
    Communicator& comm = *c.comm;
    const int P = comm.size(), r = comm.rank();
    const size_t n = 1003;
    SCOPED_TRACE(c.name);
    auto sum_over_ranks = [&](size_t i) {
      int64_t s = 0;
      for (int q = 0; q < P; ++q) s += v(q, i);
      return s;
    };
    const auto in = testing::filled<T>(n, [&](size_t i) { return v(r, i); });
    const auto in_blocks = testing::filled<T>(n * P, [&](size_t i) { return v(r, i); });
    std::vector<T> reduced(n), inplace = in, scattered(n), gathered(n * P), exchanged(n * P), ring(n);
    auto bcast = testing::filled<T>(n, [&](size_t i) { return r == 0 ? v(0, i) : 99; });
    std::vector<size_t> counts(P);  // (P) rank q contributes q + 1 elements
    std::iota(counts.begin(), counts.end(), size_t{1});
    const auto in_var = testing::filled<T>(counts[r], [&](size_t i) { return v(r, i); });
    std::vector<T> gathered_var(static_cast<size_t>(P) * (P + 1) / 2);

    std::vector<CommRequest> requests;
    requests.push_back(comm.all_reduce_async(in, std::span(reduced)));
    requests.push_back(comm.all_reduce_async(std::span(inplace)));
    requests.push_back(comm.reduce_scatter_async(in_blocks, std::span(scattered)));
    requests.push_back(comm.all_gather_async(in, std::span(gathered)));
    requests.push_back(comm.all_gather_variable_async(in_var, std::span(gathered_var), std::span<const size_t>(counts)));
    requests.push_back(comm.all_to_all_async(in_blocks, std::span(exchanged)));
    requests.push_back(comm.broadcast_async(std::span(bcast), 0));
    requests.push_back(comm.send_recv_async(in, (r + 1) % P, std::span(ring), (r + P - 1) % P));
    std::vector<CommRequest*> poll;
    for (auto& req : requests) poll.push_back(&req);
    EXPECT_DOUBLE_EQ(busy_compute(poll), kBusyResult);
    for (auto it = requests.rbegin(); it != requests.rend(); ++it) it->wait();
    for (auto& req : requests) EXPECT_TRUE(req.done());

    EXPECT_TRUE(matches(reduced, sum_over_ranks)) << "all_reduce";
    EXPECT_TRUE(matches(inplace, sum_over_ranks)) << "all_reduce in place";
    EXPECT_TRUE(matches(scattered, [&](size_t i) { return sum_over_ranks(r * n + i); })) << "reduce_scatter";
    EXPECT_TRUE(matches(gathered, [&](size_t j) { return v(static_cast<int>(j / n), j % n); })) << "all_gather";
    EXPECT_TRUE(matches(exchanged, [&](size_t j) { return v(static_cast<int>(j / n), r * n + j % n); })) << "all_to_all";
    EXPECT_TRUE(matches(bcast, [&](size_t i) { return v(0, i); })) << "broadcast";
    EXPECT_TRUE(matches(ring, [&](size_t i) { return v((r + P - 1) % P, i); })) << "send_recv";
    size_t offset = 0;
    for (int q = 0; q < P; ++q) {
      EXPECT_TRUE(matches(std::span<const T>(gathered_var).subspan(offset, counts[q]), [&](size_t i) { return v(q, i); }))
          << "all_gather_variable part of rank " << q;
      offset += counts[q];
    }
  }
}

TEST(CommunicatorAsync, PollingTestAloneCompletesTheOperation) {
  for (auto& c : testing::make_comm_cases()) {
    Communicator& comm = *c.comm;
    std::vector<float> data(4096, 1.0f);
    CommRequest req = comm.all_reduce_async(std::span(data));
    while (!req.test()) {
    }
    EXPECT_TRUE(req.done());
    req.wait();  // waiting a completed request is a no-op
    EXPECT_TRUE(matches(data, [&](size_t) { return comm.size(); })) << c.name;
  }
}

TEST(CommunicatorAsync, DroppedAndOverwrittenRequestsWaitForTheirOperation) {
  for (auto& c : testing::make_comm_cases()) {
    Communicator& comm = *c.comm;
    std::vector<float> first(777, 1.0f), second(777, 2.0f);
    {
      CommRequest dropped = comm.all_reduce_async(std::span(first));
    }  // destructor waits
    EXPECT_TRUE(matches(first, [&](size_t) { return comm.size(); })) << c.name;
    CommRequest req = comm.all_reduce_async(std::span(first));
    req = comm.all_reduce_async(std::span(second));  // the first operation is waited for here
    EXPECT_TRUE(matches(first, [&](size_t) { return comm.size() * comm.size(); })) << c.name;
    req.wait();
    EXPECT_TRUE(matches(second, [&](size_t) { return 2 * comm.size(); })) << c.name;
    CommRequest empty;
    EXPECT_TRUE(empty.done());
    EXPECT_TRUE(empty.test());
  }
}

}  // namespace
}  // namespace trlhpc
