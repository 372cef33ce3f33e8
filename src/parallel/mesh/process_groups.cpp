#include "trlhpc/parallel/mesh/process_groups.hpp"

#include "trlhpc/runtime/mpi_check.hpp"
#include "trlhpc/core/error.hpp"

namespace trlhpc {

namespace {
// World ranks of the members of `comm`, by their rank in `comm`.
std::vector<int> members_reported_by_mpi(MPI_Comm comm, MPI_Comm world) {
  MPI_Group group = MPI_GROUP_NULL, world_group = MPI_GROUP_NULL;
  TRLHPC_CHECK_MPI(MPI_Comm_group(comm, &group));
  TRLHPC_CHECK_MPI(MPI_Comm_group(world, &world_group));
  int size = 0;
  TRLHPC_CHECK_MPI(MPI_Group_size(group, &size));
  std::vector<int> local(static_cast<size_t>(size)), global(static_cast<size_t>(size));
  for (int i = 0; i < size; ++i) local[static_cast<size_t>(i)] = i;
  const int rc = MPI_Group_translate_ranks(group, size, local.data(), world_group, global.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  TRLHPC_CHECK_MPI(rc);
  return global;
}

std::string list_string(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(v[i]);
  }
  return s + "]";
}
}  // namespace

ProcessGroup::ProcessGroup(GroupKind kind, MpiComm comm, std::vector<int> members, MpiCommunicatorOptions options,
                           std::shared_ptr<const PhaseLabel> phase, const DeviceCommunicatorFactory& device_factory)
    : kind_(kind),
      comm_(std::move(comm)),
      device_comm_(MpiComm::duplicate(comm_.get())),
      host_(std::make_unique<MpiCommunicator>(comm_.get(), options, CollectiveLabel{group_kind_name(kind), phase})),
      members_(std::move(members)) {
  const DeviceCommArgs args{device_comm_.get(), options, CollectiveLabel{group_kind_name(kind), std::move(phase)}};
  device_ = device_factory ? device_factory(args) : make_device_communicator_factory(DeviceCommKind::HostMpi)(args);
  TRLHPC_ASSERT(device_ && device_->size() == host_->size() && device_->rank() == host_->rank(),
                std::string(group_kind_name(kind)) + " group: the device communicator does not span the group's ranks");
}

ProcessGroups::ProcessGroups(const Mesh& mesh, MPI_Comm world, MpiCommunicatorOptions options,
                             const DeviceCommunicatorFactory& device_factory)
    : mesh_(mesh) {
  MpiComm world_copy = MpiComm::duplicate(world);
  world_rank_ = world_copy.rank();
  TRLHPC_ASSERT(world_copy.size() == mesh_.world_size(),
                "mesh " + mesh_.dims().to_string() + " has " + std::to_string(mesh_.world_size()) +
                    " ranks but the world has " + std::to_string(world_copy.size()));
  coords_ = mesh_.coords_of(world_rank_);
  groups_.reserve(kNumGroupKinds);
  for (GroupKind kind : kAllGroupKinds) {
    MpiComm comm = kind == GroupKind::World
                       ? MpiComm::duplicate(world_copy.get())
                       : MpiComm::split(world_copy.get(), mesh_.group_color(kind, world_rank_),
                                        mesh_.group_rank(kind, world_rank_));
    std::vector<int> predicted = mesh_.group_members(kind, world_rank_);
    const std::vector<int> reported = members_reported_by_mpi(comm.get(), world);
    TRLHPC_ASSERT(comm.rank() == mesh_.group_rank(kind, world_rank_) && reported == predicted,
                  std::string(group_kind_name(kind)) + " group: MPI reports rank " + std::to_string(comm.rank()) +
                      " of members " + list_string(reported) + ", the mesh predicts rank " +
                      std::to_string(mesh_.group_rank(kind, world_rank_)) + " of " + list_string(predicted));
    groups_.emplace_back(kind, std::move(comm), std::move(predicted), options, phase_, device_factory);
  }
}

}  // namespace trlhpc
