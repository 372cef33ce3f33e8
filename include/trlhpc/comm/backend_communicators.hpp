#pragma once
// The device communicators that go with the rank's backend (the communication half of the backend seam,
// ops/backend.hpp being the compute half): what every ProcessGroup's device() is built as.
//
//   CPU backend                     -> MPI on host memory (a duplicate of the group's communicator)
//   CUDA, one rank per GPU          -> NCCL on a comm stream ordered against the backend's stream
//   CUDA, ranks sharing one GPU     -> staged MPI (device -> pinned host -> MPI -> device)
//
// Collective over `world` on a CUDA backend (the ranks compare their GPUs' PCI ids, so every rank takes
// the same decision); purely local on the CPU backend.
#include <mpi.h>

#include "trlhpc/comm/device_communicator.hpp"

namespace trlhpc {

class Ops;
class Topology;

struct BackendCommunicators {
  DeviceCommKind kind = DeviceCommKind::HostMpi;
  DeviceCommunicatorFactory factory;  // for ProcessGroups
};

BackendCommunicators backend_communicators(const Topology& topology, Ops& ops, MPI_Comm world);

}  // namespace trlhpc
