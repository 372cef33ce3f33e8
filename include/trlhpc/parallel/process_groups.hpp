#pragma once
// ProcessGroups: one MPI communicator per group kind of the mesh, built once at start-up.
//
// Each group comes from MPI_Comm_split of a duplicate of the world communicator with
// color = Mesh::group_color (the coordinates outside the group) and key = Mesh::group_rank (the
// coordinates inside it), so MPI's rank in the group equals the mesh's prediction. Construction checks
// that, and that the members MPI reports (MPI_Group_translate_ranks) are the predicted world ranks.
// Groups of size 1 are real communicators too: callers never branch on a dim being 1.
//
// Each group exposes its rank, size, member world ranks and an MpiCommunicator (host memory). The
// CUDA backend builds an NcclCommunicator from mpi_comm() when it needs one.
//
// Hang watchdog: MpiCommunicatorOptions::timeout_seconds (`--ddp_timeout`) applies to every group's
// communicator; a collective that waits longer ends the job with a report naming the operation, the
// group (its GroupKind name), the phase and the ranks that had not arrived (collective_watchdog.hpp).
// The phase is a label the trainer sets with set_phase("step 12"), set_phase("evaluation at step 12"),
// set_phase("checkpoint save at step 12"), ...: one PhaseLabel owned here and shared (read-only) by every
// group's communicator, so there is no global state. Set it from the thread that issues collectives.
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "trlhpc/parallel/mesh.hpp"
#include "trlhpc/parallel/mpi_communicator.hpp"
#include "trlhpc/runtime/mpi_comm.hpp"

namespace trlhpc {

class ProcessGroup {
 public:
  // Collective over comm (the communicator's watchdog duplicates it when options.timeout_seconds > 0).
  // `phase`: the label timeout reports name (may be null).
  ProcessGroup(GroupKind kind, MpiComm comm, std::vector<int> members, MpiCommunicatorOptions options,
               std::shared_ptr<const PhaseLabel> phase = nullptr);
  ProcessGroup(ProcessGroup&&) noexcept = default;
  ProcessGroup& operator=(ProcessGroup&&) noexcept = default;

  GroupKind kind() const { return kind_; }
  const char* name() const { return group_kind_name(kind_); }
  int rank() const { return communicator_->rank(); }
  int size() const { return communicator_->size(); }
  const std::vector<int>& members() const { return members_; }  // (size) world ranks, index = group rank
  Communicator& comm() { return *communicator_; }
  MPI_Comm mpi_comm() const { return comm_.get(); }
  // --ddp_timeout of this group's collectives (<= 0: none); also the deadline of the parallel HDF5
  // calls made over it (parallel_hdf5.hpp).
  double timeout_seconds() const { return communicator_->watchdog().timeout_seconds(); }

 private:
  GroupKind kind_;
  MpiComm comm_;                                    // owns the MPI communicator
  std::unique_ptr<MpiCommunicator> communicator_;   // uses comm_; stable address across moves
  std::vector<int> members_;
};

class ProcessGroups {
 public:
  // Collective over `world`, whose size must equal mesh.world_size() (ParallelDims::resolved checked it).
  // options.timeout_seconds: the hang watchdog's limit per collective (<= 0: none; default 1800 s). The
  // sft job passes MpiCommunicatorOptions{.timeout_seconds = config.ddp_timeout}.
  ProcessGroups(const Mesh& mesh, MPI_Comm world, MpiCommunicatorOptions options = {});

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
