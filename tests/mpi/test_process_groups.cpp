// ProcessGroups under mpirun: for every factorisation of the world size, every group's MPI members
// equal the mesh's mixed-radix prediction, the groups of each kind partition the world, the sizes are
// the products of their axes, and each group's communicator really connects those ranks.
#include <gtest/gtest.h>
#include <mpi.h>

#include <numeric>
#include <set>

#include "mpi/mesh_layouts.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"

namespace trlhpc {
namespace {

int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}
int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

TEST(ProcessGroups, MembersMatchTheMeshForEveryFactorisation) {
  const int world = world_size(), me = world_rank();
  std::vector<ParallelDims> layouts;
  for (const ParallelDims& dims : testing::all_layouts(world)) {
    layouts.push_back(dims);
    // tp above a model's kv heads: every tp rank holds the one kv head (kv_share = tp), or pairs do.
    for (int share : {2, dims.tp})
      if (share > 1 && share <= dims.tp && dims.tp % share == 0) {
        ParallelDims shared = dims;
        shared.kv_share = share;
        layouts.push_back(shared);
      }
  }
  for (const ParallelDims& dims : layouts) {
    SCOPED_TRACE(dims.to_string() + ", kv_share " + std::to_string(dims.kv_share));
    const Mesh mesh(dims);
    ProcessGroups groups(mesh, MPI_COMM_WORLD);
    EXPECT_EQ(groups.coords(), mesh.coords_of(me));
    for (GroupKind kind : kAllGroupKinds) {
      SCOPED_TRACE(group_kind_name(kind));
      ProcessGroup& group = groups.get(kind);
      EXPECT_EQ(group.kind(), kind);
      EXPECT_EQ(group.members(), mesh.group_members(kind, me));
      EXPECT_EQ(group.rank(), mesh.group_rank(kind, me));
      int expected_size = 1;
      for (MeshAxis a : group_axes(kind)) expected_size *= mesh.axis_size(a);
      if (kind == GroupKind::KvShare) expected_size = dims.kv_share;  // a block of the tp axis
      EXPECT_EQ(group.size(), expected_size);
      int mpi_size = 0;
      MPI_Comm_size(group.mpi_comm(), &mpi_size);
      EXPECT_EQ(mpi_size, expected_size);

      // Both communicators connect exactly the predicted ranks: the sum of world ranks over the group.
      const auto& members = group.members();
      for (Communicator* comm : {static_cast<Communicator*>(&group.host()), &group.device()}) {
        SCOPED_TRACE(comm == &group.device() ? "device()" : "host()");
        EXPECT_EQ(comm->rank(), group.rank());
        EXPECT_EQ(comm->size(), group.size());
        std::vector<int64_t> value = {me, 1};
        comm->all_reduce(std::span<int64_t>(value));
        EXPECT_EQ(value[0], std::accumulate(members.begin(), members.end(), int64_t{0}));
        EXPECT_EQ(value[1], static_cast<int64_t>(members.size()));
      }

      // Partition: gather every rank's member list (padded to the world size with -1); two lists are
      // equal or disjoint, each rank lies in its own list, and every rank is covered.
      std::vector<int> mine(static_cast<size_t>(world), -1);
      std::copy(members.begin(), members.end(), mine.begin());
      std::vector<int> all(static_cast<size_t>(world) * static_cast<size_t>(world));  // (world, world)
      MPI_Allgather(mine.data(), world, MPI_INT, all.data(), world, MPI_INT, MPI_COMM_WORLD);
      std::set<int> covered;
      for (int r = 0; r < world; ++r) {
        std::set<int> a, b;
        for (int i = 0; i < world; ++i) {
          if (int x = all[static_cast<size_t>(r * world + i)]; x >= 0) a.insert(x);
          if (int x = all[static_cast<size_t>(me * world + i)]; x >= 0) b.insert(x);
        }
        EXPECT_TRUE(a.count(r)) << "rank " << r << " missing from its own group";
        std::vector<int> common;
        std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(common));
        EXPECT_TRUE(common.empty() || a == b) << "groups of ranks " << r << " and " << me << " overlap";
        covered.insert(a.begin(), a.end());
      }
      EXPECT_EQ(covered.size(), static_cast<size_t>(world));
    }
  }
}

TEST(ProcessGroups, DerivedGroupsHaveTheirDocumentedSizes) {
  const int world = world_size();
  const ParallelDims dims = ParallelDims{1, -1, 1, 1, world % 2 == 0 ? 2 : 1}.resolved(world);
  ProcessGroups groups{Mesh(dims), MPI_COMM_WORLD};
  EXPECT_EQ(groups.tp().size(), dims.tp);
  EXPECT_EQ(groups.dp().size(), dims.dp_replicate * dims.dp_shard);
  EXPECT_EQ(groups.fsdp().size(), dims.dp_shard * dims.cp * dims.sp);
  EXPECT_EQ(groups.loss().size(), dims.dp() * dims.cp * dims.sp);
  EXPECT_EQ(groups.world().size(), world);
  EXPECT_EQ(groups.world().rank(), world_rank());
  EXPECT_EQ(groups.cp().size(), 1);
  EXPECT_EQ(groups.sp().size(), 1);
  EXPECT_EQ(groups.dp_replicate().size(), 1);
  EXPECT_EQ(groups.dp_shard().size(), dims.dp_shard);
  EXPECT_STREQ(groups.fsdp().name(), "fsdp");
  EXPECT_STREQ(groups.fsdp().host().backend_name(), "mpi");
  EXPECT_STREQ(groups.fsdp().device().backend_name(), "mpi");  // the default device communicator: HostMpi
  EXPECT_EQ(groups.fsdp().device().device(), Device::CPU);
}

}  // namespace
}  // namespace trlhpc
