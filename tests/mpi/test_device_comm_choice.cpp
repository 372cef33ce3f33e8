// Which device communicator a job uses (device_communicator.hpp) and how "ranks share a GPU" is
// detected (gpu_sharing.hpp), under mpirun (np 1, 2, 4, 8) with injected (host, GPU) identities, so
// the decision is tested for placements this machine does not have.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "trlhpc/core/error.hpp"
#include "trlhpc/comm/device_communicator.hpp"
#include "trlhpc/comm/gpu_sharing.hpp"

namespace trlhpc {
namespace {

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}
int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// The decision of every rank, all-reduced: {min, max} of (kind as int), so a disagreement shows.
std::pair<int, int> decisions(DeviceCommKind kind) {
  int low = static_cast<int>(kind), high = low;
  MPI_Allreduce(MPI_IN_PLACE, &low, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &high, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return {low, high};
}

// The kind every rank picks for the CUDA backend given its injected identity; fails if ranks disagree.
DeviceCommKind chosen_for(const GpuIdentity& mine) {
  const DeviceCommKind kind = choose_device_comm(Device::CUDA, ranks_share_a_gpu(MPI_COMM_WORLD, mine));
  const auto [low, high] = decisions(kind);
  EXPECT_EQ(low, high) << "ranks chose different device communicators";
  return kind;
}

TEST(ChooseDeviceComm, TheTable) {
  EXPECT_EQ(choose_device_comm(Device::CPU, false), DeviceCommKind::HostMpi);
  EXPECT_EQ(choose_device_comm(Device::CPU, true), DeviceCommKind::HostMpi);
  EXPECT_EQ(choose_device_comm(Device::CUDA, false), DeviceCommKind::Nccl);
  EXPECT_EQ(choose_device_comm(Device::CUDA, true), DeviceCommKind::StagedMpi);
}

TEST(AnyGpuShared, ComparesHostAndDeviceTogether) {
  const std::vector<GpuIdentity> distinct = {{"a", "0000:01:00.0"}, {"a", "0000:02:00.0"}, {"b", "0000:01:00.0"}};
  EXPECT_FALSE(any_gpu_shared(distinct));
  std::vector<GpuIdentity> shared = distinct;
  shared.push_back({"b", "0000:01:00.0"});
  EXPECT_TRUE(any_gpu_shared(shared));
  EXPECT_FALSE(any_gpu_shared(std::vector<GpuIdentity>{}));
  EXPECT_FALSE(any_gpu_shared(std::vector<GpuIdentity>{{"a", "0"}}));
}

TEST(RanksShareAGpu, OneGpuPerRankOnItsOwnNodePicksNccl) {
  const int me = world_rank();
  EXPECT_EQ(chosen_for({"node" + std::to_string(me), "0000:01:00.0"}), DeviceCommKind::Nccl);
}

TEST(RanksShareAGpu, TwoRanksPerNodeOnDifferentGpusPicksNccl) {
  const int me = world_rank();
  EXPECT_EQ(chosen_for({"node" + std::to_string(me / 2), "0000:0" + std::to_string(me % 2) + ":00.0"}),
            DeviceCommKind::Nccl);
}

TEST(RanksShareAGpu, TwoRanksPerNodeOnOneGpuPicksStagedMpi) {
  const int me = world_rank();
  const DeviceCommKind want = world_size() >= 2 ? DeviceCommKind::StagedMpi : DeviceCommKind::Nccl;
  EXPECT_EQ(chosen_for({"node" + std::to_string(me / 2), "0000:01:00.0"}), want);
}

TEST(RanksShareAGpu, TheSameBusIdOnDifferentHostsIsNotShared) {
  const int me = world_rank();
  EXPECT_EQ(chosen_for({"host-" + std::to_string(me), "ordinal 0"}), DeviceCommKind::Nccl);
}

// One pair on one node shares while every other rank has its own GPU: every rank, including those
// not involved, must pick the staged backend (the communicators span groups across nodes).
TEST(RanksShareAGpu, OneSharedPairAnywhereMakesEveryRankPickStagedMpi) {
  const int me = world_rank(), P = world_size();
  GpuIdentity mine{"node" + std::to_string(me), "0000:01:00.0"};
  if (P >= 2 && me == P - 1) mine = GpuIdentity{"node0", "0000:01:00.0"};  // the last rank lands on rank 0's GPU
  EXPECT_EQ(chosen_for(mine), P >= 2 ? DeviceCommKind::StagedMpi : DeviceCommKind::Nccl);
}

TEST(RanksShareAGpu, GathersEveryRanksIdentityInRankOrder) {
  const int me = world_rank(), P = world_size();
  const std::vector<GpuIdentity> table =
      gather_gpu_identities(MPI_COMM_WORLD, {"h" + std::to_string(me), std::string(static_cast<size_t>(me), 'x')});
  ASSERT_EQ(table.size(), static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) {
    EXPECT_EQ(table[static_cast<size_t>(r)].host, "h" + std::to_string(r));
    EXPECT_EQ(table[static_cast<size_t>(r)].device, std::string(static_cast<size_t>(r), 'x'));  // rank 0: empty
  }
}

TEST(LocalGpuIdentity, NamesThisHost) {
  const GpuIdentity mine = local_gpu_identity(0);
  EXPECT_FALSE(mine.host.empty());
  EXPECT_FALSE(mine.device.empty());  // the PCI bus id, or "ordinal 0" without a GPU
}

TEST(DeviceCommunicatorFactory, HostMpiBuildsAnMpiCommunicatorOnHostMemory) {
  const DeviceCommunicatorFactory factory = make_device_communicator_factory(DeviceCommKind::HostMpi);
  std::unique_ptr<Communicator> comm = factory(DeviceCommArgs{MPI_COMM_WORLD, {}, {}});
  EXPECT_STREQ(comm->backend_name(), "mpi");
  EXPECT_EQ(comm->device(), Device::CPU);
  EXPECT_EQ(comm->size(), world_size());
}

TEST(DeviceCommunicatorFactory, CudaKindsNeedTheGpuIndex) {
#ifdef TRLHPC_HAVE_CUDA
  EXPECT_THROW(make_device_communicator_factory(DeviceCommKind::Nccl, -1), RuntimeFailure);
  EXPECT_THROW(make_device_communicator_factory(DeviceCommKind::StagedMpi, -1), RuntimeFailure);
#else
  EXPECT_THROW(make_device_communicator_factory(DeviceCommKind::Nccl, 0), UserError);
  EXPECT_THROW(make_device_communicator_factory(DeviceCommKind::StagedMpi, 0), UserError);
#endif
}

}  // namespace
}  // namespace trlhpc
