#pragma once
// ProcessGroups: one MPI communicator per group kind of the mesh, built once at start-up.
//
// Each group comes from MPI_Comm_split of a duplicate of the world communicator with
// color = Mesh::group_color (the coordinates outside the group) and key = Mesh::group_rank (the
// coordinates inside it), so MPI's rank in the group equals the mesh's prediction. Construction checks
// that, and that the members MPI reports (MPI_Group_translate_ranks) are the predicted world ranks.
// Groups of size 1 are real communicators too: callers never branch on a dim being 1.
//
// Each group exposes its rank, size, member world ranks and two communicators (device_communicator.hpp):
//   host()   an MpiCommunicator on host memory, over the group's communicator: counts, flags, metadata,
//            scalars (loss sums, grad norms), agreement (signals, outcomes), parallel HDF5.
//   device() the backend's tensors (gradient buckets, parameter gathers, activations, ring blocks), in
//            their dtype, built by the DeviceCommunicatorFactory given to ProcessGroups over a SEPARATE
//            duplicate of the group's communicator. Default HostMpi: an MpiCommunicator on host memory
//            (the CPU backend), so the CPU suite runs through the same split a GPU run uses; the two
//            never share an MPI communicator, so host and device messages cannot match each other's.
// Which one: where the buffer lives. A std::vector or a scalar on the stack -> host(); a Tensor from
// Ops -> device(). Both carry the same watchdog options and the same group/phase label.
//
// Hang watchdog: MpiCommunicatorOptions::timeout_seconds (`--ddp_timeout`) applies to every group's
// communicators, host and device; a collective that waits longer ends the job with a report naming the operation, the
// group (its GroupKind name), the phase and the ranks that had not arrived (collective_watchdog.hpp).
// The phase is a label the trainer sets with set_phase("step 12"), set_phase("evaluation at step 12"),
// set_phase("checkpoint save at step 12"), ...: one PhaseLabel owned here and shared (read-only) by every
// group's communicator, so there is no global state. Set it from the thread that issues collectives.
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "trlhpc/comm/device_communicator.hpp"
#include "trlhpc/parallel/mesh/mesh.hpp"
#include "trlhpc/comm/mpi_communicator.hpp"
#include "trlhpc/runtime/mpi_comm.hpp"

namespace trlhpc {

class ProcessGroup {
 public:
  // Collective over comm (the communicators' watchdogs duplicate it when options.timeout_seconds > 0).
  // `phase`: the label timeout reports name (may be null). `device_factory` builds device() over a
  // duplicate of comm (null: HostMpi).
  ProcessGroup(GroupKind kind, MpiComm comm, std::vector<int> members, MpiCommunicatorOptions options,
               std::shared_ptr<const PhaseLabel> phase = nullptr, const DeviceCommunicatorFactory& device_factory = {});
  ProcessGroup(ProcessGroup&&) noexcept = default;
  ProcessGroup& operator=(ProcessGroup&&) noexcept = default;

  GroupKind kind() const { return kind_; }
  const char* name() const { return group_kind_name(kind_); }
  int rank() const { return host_->rank(); }
  int size() const { return host_->size(); }
  const std::vector<int>& members() const { return members_; }  // (size) world ranks, index = group rank
  // Host memory, always MPI: scalars, counts, flags, metadata, agreement, parallel HDF5.
  MpiCommunicator& host() { return *host_; }
  // The backend's tensors (device memory under CUDA, host memory on the CPU backend).
  Communicator& device() { return *device_; }
  // The MPI communicator under host() (parallel HDF5, MPI-IO).
  MPI_Comm mpi_comm() const { return comm_.get(); }
  // --ddp_timeout of this group's collectives (<= 0: none); also the deadline of the parallel HDF5
  // calls made over it (parallel_hdf5.hpp).
  double timeout_seconds() const { return host_->watchdog().timeout_seconds(); }

 private:
  GroupKind kind_;
  MpiComm comm_;                              // owns the host MPI communicator
  MpiComm device_comm_;                       // owns the duplicate reserved for device()
  std::unique_ptr<MpiCommunicator> host_;     // over comm_; stable address across moves
  std::unique_ptr<Communicator> device_;      // over device_comm_; destroyed before it (declared after)
  std::vector<int> members_;
};

class ProcessGroups {
 public:
  // Collective over `world`, whose size must equal mesh.world_size() (ParallelDims::resolved checked it).
  // options.timeout_seconds: the hang watchdog's limit per collective (<= 0: none; default 1800 s). The
  // sft job passes MpiCommunicatorOptions{.timeout_seconds = config.ddp_timeout}. `device_factory`
  // builds each group's device() (null: HostMpi, the CPU backend's; make_device_communicator_factory
  // and choose_device_comm in device_communicator.hpp pick one for a backend).
  ProcessGroups(const Mesh& mesh, MPI_Comm world, MpiCommunicatorOptions options = {},
                const DeviceCommunicatorFactory& device_factory = {});

  // What the job is doing, named by timeout reports ("step 12", "evaluation at step 12", ...). The
  // label starts empty (reported as "no phase set").
  void set_phase(std::string phase) { phase_->set(std::move(phase)); }
  const std::string& phase() const { return phase_->text(); }
  // The shared label itself, for communicators built outside (NcclCommunicator's CollectiveLabel).
  std::shared_ptr<const PhaseLabel> phase_label() const { return phase_; }

  const Mesh& mesh() const { return mesh_; }
  int world_rank() const { return world_rank_; }
  const MeshCoord& coords() const { return coords_; }

  ProcessGroup& get(GroupKind kind) { return groups_[static_cast<size_t>(kind)]; }
  const ProcessGroup& get(GroupKind kind) const { return groups_[static_cast<size_t>(kind)]; }
  ProcessGroup& tp() { return get(GroupKind::Tp); }
  ProcessGroup& kv_share() { return get(GroupKind::KvShare); }  // tp ranks sharing a kv head (mesh.hpp)
  ProcessGroup& cp() { return get(GroupKind::Cp); }
  ProcessGroup& sp() { return get(GroupKind::Sp); }
  ProcessGroup& dp_replicate() { return get(GroupKind::DpReplicate); }
  ProcessGroup& dp_shard() { return get(GroupKind::DpShard); }
  ProcessGroup& dp() { return get(GroupKind::Dp); }
  ProcessGroup& fsdp() { return get(GroupKind::Fsdp); }
  ProcessGroup& loss() { return get(GroupKind::Loss); }
  ProcessGroup& world() { return get(GroupKind::World); }

 private:
  Mesh mesh_;
  std::shared_ptr<PhaseLabel> phase_ = std::make_shared<PhaseLabel>();  // shared with every group's communicator
  int world_rank_ = 0;
  MeshCoord coords_{};
  std::vector<ProcessGroup> groups_;  // (kNumGroupKinds) indexed by GroupKind
};

}  // namespace trlhpc
