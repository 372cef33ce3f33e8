// The hang watchdog on real MPI traffic (collective_watchdog.hpp, mpi_communicator.hpp):
//   - the arrival notices name exactly the member that has not issued the collective yet (as world
//     ranks, also on a split communicator), and the report carries the group, phase and collective;
//   - a slow but alive rank (sleeping well under the timeout) is no false alarm, for blocking
//     collectives, async waits, send_recv and barrier;
//   - timeout 0 turns it off (no notices).
// The abort itself (a stopped rank ends the job with exit 2) is tests/e2e/test_watchdog.sh.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <numeric>
#include <thread>
#include <vector>

#include "trlhpc/parallel/mesh/mesh.hpp"
#include "trlhpc/comm/mpi_communicator.hpp"
#include "trlhpc/parallel/mesh/parallel_dims.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/runtime/mpi_comm.hpp"

namespace trlhpc {
namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// Polls `watchdog` (which drains notices) until not_arrived_world_ranks(index) == want; false after 20 s.
bool eventually_not_arrived(CollectiveWatchdog& watchdog, uint64_t index, const std::vector<int>& want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (watchdog.not_arrived_world_ranks(index) == want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// The last member of `comm` issues its all_reduce only after every other member has seen (through the
// notices alone) that exactly it is missing and has written its report (a barrier on a side
// communicator says so); it checks that it has everyone's notice first.
void check_late_member_is_named(MpiComm handle, const char* group_name) {
  MpiComm side = MpiComm::duplicate(handle.get());
  auto phase = std::make_shared<PhaseLabel>();
  phase->set("step 12");
  MpiCommunicator comm(handle.get(), MpiCommunicatorOptions{.timeout_seconds = 60},
                       CollectiveLabel{group_name, phase});
  CollectiveWatchdog& watchdog = comm.watchdog();
  const std::vector<int> members = watchdog.member_world_ranks();
  ASSERT_EQ(members.size(), static_cast<size_t>(comm.size()));
  EXPECT_EQ(members[static_cast<size_t>(comm.rank())], world_rank());
  const int late = comm.size() - 1;
  std::vector<int64_t> data(3, comm.rank() + 1);

  comm.all_reduce(std::span<int64_t>(data));  // #1: everyone
  const uint64_t index = watchdog.entered() + 1;
  if (comm.rank() != late) {
    CommRequest request = comm.all_reduce_async(std::span<int64_t>(data));
    ASSERT_EQ(watchdog.entered(), index);
    const std::vector<int> want{members[static_cast<size_t>(late)]};
    EXPECT_TRUE(eventually_not_arrived(watchdog, index, want)) << "expected only world rank " << want[0];
    const std::string report = watchdog.report(index, "all_reduce_async", 21.0);
    EXPECT_NE(report.find("all_reduce_async (#" + std::to_string(index)), std::string::npos) << report;
    EXPECT_NE(report.find(std::string("in group ") + group_name), std::string::npos) << report;
    EXPECT_NE(report.find("during step 12"), std::string::npos) << report;
    EXPECT_NE(report.find("waited 21.0 s"), std::string::npos) << report;
    EXPECT_NE(report.find("not arrived: world ranks [" + std::to_string(want[0]) + "]"), std::string::npos)
        << report;
    MPI_Barrier(side.get());
    request.wait();
  } else {
    // Everyone else is at `index` (so nobody is missing from our point of view); then join.
    EXPECT_TRUE(eventually_not_arrived(watchdog, index, {}));
    EXPECT_NE(watchdog.report(index, "all_reduce", 1.0).find("every member arrived"), std::string::npos);
    MPI_Barrier(side.get());
    comm.all_reduce(std::span<int64_t>(data));
  }
  const int64_t p = comm.size();
  const int64_t first = p * (p + 1) / 2;  // after #1 every element is this sum
  for (int64_t x : data) EXPECT_EQ(x, first * p);
}

TEST(Watchdog, NamesExactlyTheMemberThatHasNotArrived) {
  check_late_member_is_named(MpiComm::duplicate(MPI_COMM_WORLD), "world");
}

TEST(Watchdog, NamesWorldRanksOnASplitCommunicator) {
  const int me = world_rank();
  check_late_member_is_named(MpiComm::split(MPI_COMM_WORLD, me % 2, me), "halves");
}

TEST(Watchdog, ProcessGroupsLabelTheirCommunicatorsAndShareThePhase) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  ProcessGroups groups(Mesh(ParallelDims{}.resolved(world)), MPI_COMM_WORLD, {.timeout_seconds = 60});
  groups.set_phase("evaluation at step 7");
  EXPECT_EQ(groups.phase(), "evaluation at step 7");
  for (GroupKind kind : {GroupKind::Tp, GroupKind::Fsdp, GroupKind::Loss, GroupKind::World}) {
    auto& comm = groups.get(kind).host();
    const std::string report = comm.watchdog().report(1, "reduce_scatter", 3.0);
    EXPECT_NE(report.find(std::string("in group ") + group_kind_name(kind) + " "), std::string::npos) << report;
    EXPECT_NE(report.find("during evaluation at step 7"), std::string::npos) << report;
  }
  groups.set_phase("checkpoint save at step 8");
  auto& world_comm = groups.world().host();
  EXPECT_NE(world_comm.watchdog().report(1, "barrier", 3.0).find("during checkpoint save at step 8"),
            std::string::npos);
  MpiCommunicator unnamed(groups.world().mpi_comm(), {.timeout_seconds = 60});
  const std::string report = unnamed.watchdog().report(1, "broadcast", 3.0);
  EXPECT_NE(report.find("in group unnamed"), std::string::npos) << report;
  EXPECT_NE(report.find("during no phase set"), std::string::npos) << report;
}

// The last rank sleeps before each operation; the timeout is far above the sleep.
TEST(Watchdog, SlowButAliveRankIsNoFalseAlarm) {
  MpiComm handle = MpiComm::duplicate(MPI_COMM_WORLD);
  MpiCommunicator comm(handle.get(), {.timeout_seconds = 10});
  const int P = comm.size(), r = comm.rank();
  const bool slow = r == P - 1;
  auto nap = [&](int ms) {
    if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  };
  std::vector<float> data(1000, static_cast<float>(r + 1));
  nap(3000);
  comm.all_reduce(std::span<float>(data));  // blocking, 3 s late
  for (float x : data) ASSERT_EQ(x, static_cast<float>(P * (P + 1) / 2));

  std::vector<int32_t> in(4, r), out(4, -1);
  CommRequest request = comm.send_recv_async(std::span<const int32_t>(in), (r + 1) % P, std::span<int32_t>(out),
                                             (r + P - 1) % P);
  nap(1000);
  request.wait();  // async, waited 1 s late by one rank
  for (int32_t x : out) EXPECT_EQ(x, (r + P - 1) % P);
  nap(1000);
  comm.barrier();
  std::vector<int64_t> root_data(5, r == 0 ? 42 : 0);
  nap(500);
  comm.broadcast(std::span<int64_t>(root_data), 0);
  for (int64_t x : root_data) EXPECT_EQ(x, 42);
}

TEST(Watchdog, ZeroTimeoutIsOff) {
  MpiComm handle = MpiComm::duplicate(MPI_COMM_WORLD);
  MpiCommunicator comm(handle.get(), {.timeout_seconds = 0});
  EXPECT_FALSE(comm.watchdog().enabled());
  std::vector<double> data(8, 1.0);
  comm.all_reduce(std::span<double>(data));
  comm.all_reduce_async(std::span<double>(data)).wait();
  comm.barrier();
  EXPECT_EQ(comm.watchdog().entered(), 0u);  // no notices were sent
  EXPECT_EQ(data[0], static_cast<double>(comm.size() * comm.size()));
}

}  // namespace
}  // namespace trlhpc
