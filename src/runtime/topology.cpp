#include "trlhpc/runtime/topology.hpp"

#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>

#include "trlhpc/runtime/mpi_check.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/runtime/mpi_comm.hpp"
#include "trlhpc/runtime/mpi_environment.hpp"

#ifdef TRLHPC_HAVE_CUDA
#include "device_query.cuh"
#endif

namespace trlhpc {

DeviceRequest parse_device_request(const std::string& name) {
  if (name == "auto") return DeviceRequest::Auto;
  if (name == "cpu") return DeviceRequest::Cpu;
  if (name == "cuda") return DeviceRequest::Cuda;
  throw UserError("--device must be auto, cpu or cuda (got '" + name + "')");
}

const char* device_request_name(DeviceRequest request) {
  switch (request) {
    case DeviceRequest::Auto: return "auto";
    case DeviceRequest::Cpu: return "cpu";
    case DeviceRequest::Cuda: return "cuda";
  }
  return "?";
}

namespace {

// Per node: its host, its rank count and the fewest GPUs any of its ranks sees.
struct NodeSummary {
  std::string host;
  int ranks = 0;
  int min_gpus = 0;
};

std::vector<NodeSummary> summarize_nodes(std::span<const RankPlacement> ranks) {
  std::map<int, NodeSummary> by_index;
  for (const auto& r : ranks) {
    auto [it, inserted] = by_index.try_emplace(r.node_index, NodeSummary{r.host, 0, r.visible_gpus});
    it->second.ranks += 1;
    it->second.min_gpus = std::min(it->second.min_gpus, r.visible_gpus);
  }
  std::vector<NodeSummary> nodes;
  for (auto& [index, node] : by_index) nodes.push_back(node);
  return nodes;
}

}  // namespace

DeviceBinding bind_device(DeviceRequest request, std::span<const RankPlacement> ranks, int world_rank) {
  TRLHPC_ASSERT(world_rank >= 0 && static_cast<size_t>(world_rank) < ranks.size(), "world rank outside the table");
  if (request == DeviceRequest::Cpu) return {Device::CPU, -1, "--device cpu"};
  const auto nodes = summarize_nodes(ranks);
  if (request == DeviceRequest::Auto) {
    for (const auto& node : nodes)
      if (node.min_gpus == 0) return {Device::CPU, -1, "--device auto: no GPU visible on host " + node.host};
  }
  for (const auto& node : nodes) {
    if (node.min_gpus == 0)
      throw UserError("--device cuda, but host " + node.host + " has no visible GPU (no device or no driver); "
                      "use --device cpu or run on GPU nodes");
    // More ranks than GPUs: an explicit --device cuda shares them round robin (each GPU's ranks then
    // communicate through the staged MPI backend: NCCL refuses two ranks on one device); auto does not
    // guess that the user wants it.
    if (node.ranks > node.min_gpus && request == DeviceRequest::Auto)
      throw UserError("--device auto: host " + node.host + " runs " + std::to_string(node.ranks) + " ranks but only " +
                      std::to_string(node.min_gpus) + " GPUs are visible to them; launch at most " +
                      std::to_string(node.min_gpus) + " ranks per node (one per GPU), pass --device cuda to let ranks "
                      "share the GPUs (slower: staged collectives), or use --device cpu");
  }
  const auto& self = ranks[static_cast<size_t>(world_rank)];
  TRLHPC_ASSERT(self.node_index >= 0 && static_cast<size_t>(self.node_index) < nodes.size(), "node index outside the table");
  const NodeSummary* mine = &nodes[static_cast<size_t>(self.node_index)];
  const int gpu = self.local_rank % mine->min_gpus;
  const bool shared = mine->ranks > mine->min_gpus;
  return {Device::CUDA, gpu,
          std::string("--device ") + device_request_name(request) + ": node-local rank " +
              std::to_string(self.local_rank) + " -> GPU " + std::to_string(gpu) + " of " +
              std::to_string(self.visible_gpus) +
              (shared ? " (" + std::to_string(mine->ranks) + " ranks share " + std::to_string(mine->min_gpus) +
                            " GPUs: staged MPI collectives)"
                      : "")};
}

int cpu_threads_per_rank(const char* omp_num_threads, int node_cpus, int local_size) {
  if (omp_num_threads && *omp_num_threads) {
    // "4" or a nested list "4,2": the outer level is what a rank's parallel regions use.
    char* end = nullptr;
    long value = std::strtol(omp_num_threads, &end, 10);
    if (end != omp_num_threads && (*end == '\0' || *end == ',') && value > 0 && value < (1 << 20))
      return static_cast<int>(value);
  }
  return std::max(1, node_cpus / std::max(1, local_size));
}

namespace {

int visible_gpu_count() {
#ifdef TRLHPC_HAVE_CUDA
  return cuda::visible_device_count();
#else
  return 0;
#endif
}

// CPUs that any rank of the node may run on: the bitwise OR of their affinity masks.
int node_cpu_count(MPI_Comm node) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return 1;
  std::array<uint8_t, sizeof(cpu_set_t)> bytes{};
  std::memcpy(bytes.data(), &mask, sizeof(mask));
  TRLHPC_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, bytes.data(), static_cast<int>(bytes.size()), MPI_UINT8_T, MPI_BOR, node));
  std::memcpy(&mask, bytes.data(), sizeof(mask));
  return std::max(1, CPU_COUNT(&mask));
}

}  // namespace

Topology Topology::discover(const MpiEnvironment& mpi, DeviceRequest request) {
  MpiComm world = MpiComm::duplicate(MPI_COMM_WORLD);
  MpiComm node = MpiComm::split_shared(world.get());
  const int world_size = world.size();

  // The node's lowest world rank identifies it (split_shared orders by world rank, so it is local rank 0).
  int leader = mpi.world_rank();
  TRLHPC_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, node.get()));

  constexpr int kFields = 5;  // local_rank, local_size, leader, visible_gpus, node_cpus
  std::array<int, kFields> mine = {node.rank(), node.size(), leader, visible_gpu_count(), node_cpu_count(node.get())};
  std::vector<int> table(static_cast<size_t>(world_size) * kFields);  // (world_size, kFields)
  TRLHPC_CHECK_MPI(MPI_Allgather(mine.data(), kFields, MPI_INT, table.data(), kFields, MPI_INT, world.get()));

  std::array<char, MPI_MAX_PROCESSOR_NAME> my_host{};
  std::strncpy(my_host.data(), mpi.host().c_str(), my_host.size() - 1);
  std::vector<char> hosts(static_cast<size_t>(world_size) * my_host.size());  // (world_size, MPI_MAX_PROCESSOR_NAME)
  TRLHPC_CHECK_MPI(MPI_Allgather(my_host.data(), static_cast<int>(my_host.size()), MPI_CHAR, hosts.data(),
                                 static_cast<int>(my_host.size()), MPI_CHAR, world.get()));

  Topology topo;
  topo.world_rank_ = mpi.world_rank();
  std::map<int, int> node_of_leader;  // leader world rank -> node index, in increasing leader order
  for (int r = 0; r < world_size; ++r) node_of_leader.emplace(table[static_cast<size_t>(r) * kFields + 2], 0);
  for (auto& [lead, index] : node_of_leader) {
    index = static_cast<int>(topo.node_hosts_.size());
    topo.node_hosts_.emplace_back(&hosts[static_cast<size_t>(lead) * my_host.size()]);
  }
  for (int r = 0; r < world_size; ++r) {
    const int* row = &table[static_cast<size_t>(r) * kFields];
    RankPlacement p;
    p.world_rank = r;
    p.host = std::string(&hosts[static_cast<size_t>(r) * my_host.size()]);
    p.local_rank = row[0];
    p.local_size = row[1];
    p.node_index = node_of_leader.at(row[2]);
    p.visible_gpus = row[3];
    p.node_cpus = row[4];
    topo.ranks_.push_back(std::move(p));
  }
  topo.binding_ = bind_device(request, topo.ranks_, topo.world_rank_);
  topo.cpu_threads_ = cpu_threads_per_rank(std::getenv("OMP_NUM_THREADS"), topo.self().node_cpus, topo.self().local_size);
  return topo;
}

int Topology::max_ranks_per_node() const {
  int most = 0;
  for (const auto& r : ranks_) most = std::max(most, r.local_size);
  return most;
}

}  // namespace trlhpc
