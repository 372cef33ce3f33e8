#pragma once
// Topology: where each rank runs and what it computes on.
//
// Discovered once at start-up (a collective over MPI_COMM_WORLD): every rank contributes its host,
// node-local rank (MPI_Comm_split_type SHARED), visible GPU count and CPU affinity, and every rank
// receives the whole table. Decisions that could fail (device binding) are then taken by the same
// pure function on the same table on every rank, so a UserError is raised identically everywhere and
// no rank is left waiting in a later collective.
//
// Device binding: `--device cpu` never touches a GPU; `cuda` binds node-local rank i to GPU i mod the
// GPUs its node's ranks all see (more ranks than GPUs share them; their collectives then go through the
// staged MPI backend, NCCL refusing two ranks on one GPU); `auto` means cuda when every node sees a GPU
// and has one per rank, cpu when a node sees none, and an error when ranks outnumber GPUs.
// The CUDA backend calls cudaSetDevice(gpu_index()) itself; this file only decides.
//
// CPU threads per rank: OMP_NUM_THREADS when set (the OpenMP runtime obeys it anyway), else the CPUs
// the node's ranks may run on (union of their affinity masks, so srun/cgroup limits count) divided by
// the ranks on the node, at least 1.
#include <span>
#include <string>
#include <vector>

#include "trlhpc/core/dtype.hpp"

namespace trlhpc {

class MpiEnvironment;

// --device auto|cpu|cuda
enum class DeviceRequest { Auto, Cpu, Cuda };
DeviceRequest parse_device_request(const std::string& name);  // UserError for anything else
const char* device_request_name(DeviceRequest request);

// One row of the gathered table.
struct RankPlacement {
  int world_rank = 0;
  std::string host;
  int node_index = 0;    // nodes numbered by their lowest world rank
  int local_rank = 0;    // rank within the node
  int local_size = 1;    // ranks on the node
  int visible_gpus = 0;  // CUDA devices this rank sees (0 in CPU builds or without a driver)
  int node_cpus = 1;     // CPUs in the union of the affinity masks of the node's ranks
};

struct DeviceBinding {
  Device device = Device::CPU;
  int gpu_index = -1;  // CUDA device ordinal; -1 on cpu
  std::string reason;  // why, for `trlhpc env`
};

// Pure decision over the whole table (identical result and identical UserError on every rank).
DeviceBinding bind_device(DeviceRequest request, std::span<const RankPlacement> ranks, int world_rank);
// Pure: OMP_NUM_THREADS's first entry when it is a positive integer, else max(1, node_cpus / local_size).
int cpu_threads_per_rank(const char* omp_num_threads, int node_cpus, int local_size);

class Topology {
 public:
  // Collective over MPI_COMM_WORLD. Throws UserError (same on every rank) when the device cannot be bound.
  static Topology discover(const MpiEnvironment& mpi, DeviceRequest request);

  int world_rank() const { return world_rank_; }
  int world_size() const { return static_cast<int>(ranks_.size()); }
  const RankPlacement& self() const { return ranks_[static_cast<size_t>(world_rank_)]; }
  int local_rank() const { return self().local_rank; }
  int local_size() const { return self().local_size; }
  int node_index() const { return self().node_index; }
  int num_nodes() const { return static_cast<int>(node_hosts_.size()); }
  int max_ranks_per_node() const;
  int gpus_per_node() const { return self().visible_gpus; }
  const std::vector<std::string>& node_hosts() const { return node_hosts_; }  // (num_nodes)
  const std::vector<RankPlacement>& ranks() const { return ranks_; }          // (world_size)

  const DeviceBinding& binding() const { return binding_; }
  Device device() const { return binding_.device; }
  int gpu_index() const { return binding_.gpu_index; }
  int cpu_threads() const { return cpu_threads_; }

 private:
  int world_rank_ = 0;
  std::vector<RankPlacement> ranks_;     // (world_size), index = world rank
  std::vector<std::string> node_hosts_;  // (num_nodes)
  DeviceBinding binding_;
  int cpu_threads_ = 1;
};

}  // namespace trlhpc
