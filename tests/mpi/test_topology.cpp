// Topology: the gathered table is consistent with what MPI reports, and the pure decisions (device
// binding, CPU threads per rank) follow their documented rules on fabricated multi-node tables.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <map>
#include <set>

#include "trlhpc/core/error.hpp"
#include "trlhpc/runtime/mpi_environment.hpp"
#include "trlhpc/runtime/topology.hpp"

namespace trlhpc {
namespace {

TEST(Topology, DiscoveredTableMatchesMpi) {
  MpiEnvironment mpi(nullptr, nullptr);  // MPI is already up: this only reads rank, size and host
  const Topology topo = Topology::discover(mpi, DeviceRequest::Cpu);
  EXPECT_EQ(topo.world_rank(), mpi.world_rank());
  EXPECT_EQ(topo.world_size(), mpi.world_size());
  EXPECT_EQ(topo.self().host, mpi.host());
  EXPECT_EQ(topo.device(), Device::CPU);
  EXPECT_EQ(topo.gpu_index(), -1);

  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, mpi.world_rank(), MPI_INFO_NULL, &node);
  int local_rank = 0, local_size = 0;
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_size(node, &local_size);
  MPI_Comm_free(&node);
  EXPECT_EQ(topo.local_rank(), local_rank);
  EXPECT_EQ(topo.local_size(), local_size);

  // Every node's ranks have local ranks 0..n-1 and agree on the node's size; nodes are numbered densely.
  std::map<int, std::set<int>> local_ranks_of_node;
  for (const auto& r : topo.ranks()) {
    EXPECT_GE(r.node_index, 0);
    EXPECT_LT(r.node_index, topo.num_nodes());
    EXPECT_EQ(r.host, topo.node_hosts()[static_cast<size_t>(r.node_index)]);
    local_ranks_of_node[r.node_index].insert(r.local_rank);
  }
  EXPECT_EQ(static_cast<int>(local_ranks_of_node.size()), topo.num_nodes());
  for (const auto& r : topo.ranks()) {
    const auto& locals = local_ranks_of_node[r.node_index];
    EXPECT_EQ(static_cast<int>(locals.size()), r.local_size);
    EXPECT_EQ(*locals.rbegin(), r.local_size - 1);
  }
  EXPECT_GE(topo.max_ranks_per_node(), topo.local_size());
  EXPECT_EQ(topo.cpu_threads(),
            cpu_threads_per_rank(std::getenv("OMP_NUM_THREADS"), topo.self().node_cpus, topo.local_size()));
  EXPECT_GE(topo.cpu_threads(), 1);
}

TEST(Topology, CudaWithoutGpusIsTheSameUserErrorEverywhere) {
  MpiEnvironment mpi(nullptr, nullptr);
  const Topology probe = Topology::discover(mpi, DeviceRequest::Auto);
  bool every_node_has_gpus = true;
  for (const auto& r : probe.ranks()) every_node_has_gpus = every_node_has_gpus && r.visible_gpus > 0;
  if (every_node_has_gpus) GTEST_SKIP() << "GPUs visible: the no-GPU error cannot be produced here";
  EXPECT_EQ(probe.device(), Device::CPU);
  std::string message;
  try {
    Topology::discover(mpi, DeviceRequest::Cuda);
  } catch (const UserError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("--device cuda"), std::string::npos) << message;
  EXPECT_NE(message.find("--device cpu"), std::string::npos) << message;
  int length = static_cast<int>(message.size()), shortest = 0, longest = 0;
  MPI_Allreduce(&length, &shortest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&length, &longest, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(shortest, longest);
}

// nodes x ranks_per_node ranks, block placement, each rank seeing `gpus[node]` GPUs.
std::vector<RankPlacement> table(int ranks_per_node, const std::vector<int>& gpus) {
  std::vector<RankPlacement> t;
  for (size_t n = 0; n < gpus.size(); ++n)
    for (int l = 0; l < ranks_per_node; ++l)
      t.push_back({static_cast<int>(t.size()), "node" + std::to_string(n), static_cast<int>(n), l, ranks_per_node,
                   gpus[n], 16});
  return t;
}

TEST(DeviceBinding, CudaBindsLocalRankToGpu) {
  const auto t = table(4, {4, 8});
  for (const auto& r : t) {
    const DeviceBinding b = bind_device(DeviceRequest::Cuda, t, r.world_rank);
    EXPECT_EQ(b.device, Device::CUDA);
    EXPECT_EQ(b.gpu_index, r.local_rank);
    EXPECT_EQ(bind_device(DeviceRequest::Auto, t, r.world_rank).gpu_index, r.local_rank);
  }
}

TEST(DeviceBinding, MoreRanksThanGpusUnderAutoIsAUserErrorNamingTheNode) {
  const auto t = table(4, {4, 2});
  try {
    bind_device(DeviceRequest::Auto, t, 0);
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    const std::string m = e.what();
    for (const char* part : {"node1", "4 ranks", "2 GPUs", "--device cpu", "--device cuda"})
      EXPECT_NE(m.find(part), std::string::npos) << part << " not in: " << m;
  }
}

// --device cuda with more ranks than GPUs: the ranks share them round robin (the staged MPI backend
// carries their collectives, backend_communicators.hpp); nodes with enough GPUs keep one each.
TEST(DeviceBinding, CudaSharesGpusRoundRobinWhenRanksOutnumberThem) {
  const auto t = table(4, {4, 2});
  for (const auto& r : t) {
    const DeviceBinding b = bind_device(DeviceRequest::Cuda, t, r.world_rank);
    EXPECT_EQ(b.device, Device::CUDA);
    EXPECT_EQ(b.gpu_index, r.node_index == 0 ? r.local_rank : r.local_rank % 2) << "rank " << r.world_rank;
    EXPECT_EQ(b.reason.find("share") != std::string::npos, r.node_index == 1) << b.reason;
  }
}

TEST(DeviceBinding, CpuNeverNeedsAGpuAndAutoFallsBackToCpu) {
  const auto t = table(8, {0, 4});
  EXPECT_EQ(bind_device(DeviceRequest::Cpu, t, 3).device, Device::CPU);
  EXPECT_EQ(bind_device(DeviceRequest::Cpu, table(8, {1}), 3).device, Device::CPU);
  const DeviceBinding b = bind_device(DeviceRequest::Auto, t, 9);
  EXPECT_EQ(b.device, Device::CPU);
  EXPECT_EQ(b.gpu_index, -1);
  EXPECT_NE(b.reason.find("node0"), std::string::npos) << b.reason;
  EXPECT_THROW(bind_device(DeviceRequest::Cuda, t, 9), UserError);
}

TEST(DeviceBinding, ParsesTheFlag) {
  EXPECT_EQ(parse_device_request("auto"), DeviceRequest::Auto);
  EXPECT_EQ(parse_device_request("cpu"), DeviceRequest::Cpu);
  EXPECT_EQ(parse_device_request("cuda"), DeviceRequest::Cuda);
  EXPECT_THROW(parse_device_request("gpu"), UserError);
}

TEST(CpuThreads, OmpNumThreadsWinsElseCoresPerLocalRank) {
  EXPECT_EQ(cpu_threads_per_rank("8", 64, 4), 8);
  EXPECT_EQ(cpu_threads_per_rank("4,2", 64, 4), 4);
  EXPECT_EQ(cpu_threads_per_rank(nullptr, 64, 4), 16);
  EXPECT_EQ(cpu_threads_per_rank("", 64, 3), 21);
  EXPECT_EQ(cpu_threads_per_rank("abc", 8, 2), 4);
  EXPECT_EQ(cpu_threads_per_rank("0", 8, 2), 4);
  EXPECT_EQ(cpu_threads_per_rank(nullptr, 2, 8), 1);  // oversubscribed: at least one thread
}

}  // namespace
}  // namespace trlhpc
