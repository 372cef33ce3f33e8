// The host/device split of ProcessGroup (process_groups.hpp, device_communicator.hpp) under mpirun
// (np 1, 2, 4, 8): with the default HostMpi device communicator, host() and device() are two MPI
// communicators over the same ranks, and a message on one can never be received on the other.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <thread>

#include "trlhpc/parallel/mesh/process_groups.hpp"

namespace trlhpc {
namespace {

ProcessGroups world_groups(MpiCommunicatorOptions options = {}) {
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  return ProcessGroups(Mesh(ParallelDims{1, -1, 1, 1, 1}.resolved(world)), MPI_COMM_WORLD, options);
}

MPI_Comm device_mpi_comm(ProcessGroup& group) { return dynamic_cast<MpiCommunicator&>(group.device()).mpi_comm(); }

TEST(HostDeviceCommunicators, AreCongruentButNotTheSameMpiCommunicator) {
  ProcessGroups groups = world_groups();
  for (GroupKind kind : kAllGroupKinds) {
    SCOPED_TRACE(group_kind_name(kind));
    ProcessGroup& group = groups.get(kind);
    EXPECT_NE(static_cast<Communicator*>(&group.host()), &group.device());
    EXPECT_EQ(group.device().rank(), group.host().rank());
    EXPECT_EQ(group.device().size(), group.host().size());
    int result = MPI_IDENT;
    ASSERT_EQ(MPI_Comm_compare(group.host().mpi_comm(), device_mpi_comm(group), &result), MPI_SUCCESS);
    EXPECT_EQ(result, MPI_CONGRUENT);  // same ranks in the same order, a different context
  }
}

// A message sent on host() is visible (MPI_Iprobe) on host() and never on device(), and the other way
// round. Each rank sends to itself and to its ring successor, so np 1 checks it too.
TEST(HostDeviceCommunicators, AMessageOnOneIsNotReceivedOnTheOther) {
  ProcessGroups groups = world_groups();
  ProcessGroup& world = groups.world();
  const int P = world.size(), me = world.rank(), next = (me + 1) % P, prev = (me + P - 1) % P;
  const MPI_Comm sides[2] = {world.host().mpi_comm(), device_mpi_comm(world)};
  constexpr int kTag = 4242;
  for (int side = 0; side < 2; ++side) {
    SCOPED_TRACE(side == 0 ? "sent on host()" : "sent on device()");
    const MPI_Comm on = sides[side], other = sides[1 - side];
    const int32_t payload = 1000 * side + me;
    MPI_Request request = MPI_REQUEST_NULL;
    ASSERT_EQ(MPI_Isend(&payload, 1, MPI_INT32_T, next, kTag, on, &request), MPI_SUCCESS);
    // Wait until the message is there on the communicator it was sent on...
    int arrived = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!arrived && std::chrono::steady_clock::now() < deadline) {
      ASSERT_EQ(MPI_Iprobe(prev, kTag, on, &arrived, MPI_STATUS_IGNORE), MPI_SUCCESS);
      if (!arrived) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    ASSERT_TRUE(arrived) << "the message never arrived on the communicator it was sent on";
    // ...and not on the other one, from any source with any tag.
    int leaked = 1;
    ASSERT_EQ(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, other, &leaked, MPI_STATUS_IGNORE), MPI_SUCCESS);
    EXPECT_FALSE(leaked);
    int32_t received = -1;
    ASSERT_EQ(MPI_Recv(&received, 1, MPI_INT32_T, prev, kTag, on, MPI_STATUS_IGNORE), MPI_SUCCESS);
    ASSERT_EQ(MPI_Wait(&request, MPI_STATUS_IGNORE), MPI_SUCCESS);
    EXPECT_EQ(received, 1000 * side + prev);
    MPI_Barrier(MPI_COMM_WORLD);  // nobody sends the next round before everyone has probed this one
  }
}

// Through the typed API: the two communicators' send_recv use the same tag, and ranks issue them in
// opposite orders (even ranks host first, odd ranks device first). On one shared MPI communicator the
// messages would match in issue order and the payloads would cross; on two they cannot.
TEST(HostDeviceCommunicators, InterleavedSendRecvDoNotCross) {
  ProcessGroups groups = world_groups();
  ProcessGroup& world = groups.world();
  const int P = world.size(), me = world.rank(), next = (me + 1) % P, prev = (me + P - 1) % P;
  const std::vector<float> host_send = {100.0f + me}, device_send = {200.0f + me};
  std::vector<float> host_recv(1, -1), device_recv(1, -1);
  CommRequest first, second;
  if (me % 2 == 0) {
    first = world.host().send_recv_async<float>(host_send, next, host_recv, prev);
    second = world.device().send_recv_async<float>(device_send, next, device_recv, prev);
  } else {
    first = world.device().send_recv_async<float>(device_send, next, device_recv, prev);
    second = world.host().send_recv_async<float>(host_send, next, host_recv, prev);
  }
  first.wait();
  second.wait();
  EXPECT_EQ(host_recv[0], 100.0f + prev);
  EXPECT_EQ(device_recv[0], 200.0f + prev);
}

// Both sides carry the group's name and the shared phase label, so a timeout report reads the same
// whichever side hung.
TEST(HostDeviceCommunicators, ShareTheGroupNameAndPhaseLabel) {
  ProcessGroups groups = world_groups({.timeout_seconds = 30});
  groups.set_phase("step 7");
  for (GroupKind kind : kAllGroupKinds) {
    SCOPED_TRACE(group_kind_name(kind));
    ProcessGroup& group = groups.get(kind);
    CollectiveWatchdog& host = group.host().watchdog();
    CollectiveWatchdog& device = dynamic_cast<MpiCommunicator&>(group.device()).watchdog();
    EXPECT_TRUE(device.enabled());
    EXPECT_EQ(device.timeout_seconds(), host.timeout_seconds());
    EXPECT_EQ(device.label().group, std::string(group_kind_name(kind)));
    EXPECT_EQ(device.label().group, host.label().group);
    ASSERT_TRUE(device.label().phase);
    EXPECT_EQ(device.label().phase.get(), host.label().phase.get());
    EXPECT_EQ(device.label().phase->text(), "step 7");
  }
}

}  // namespace
}  // namespace trlhpc
