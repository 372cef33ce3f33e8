#pragma once
// Do several ranks of a job drive the same GPU? NCCL refuses a communicator with two ranks on one
// device, so the answer picks the device communicator (choose_device_comm, device_communicator.hpp):
// NCCL when every rank has its own GPU, the staged MPI backend when some share one.
//
// A GPU is identified by the host it is attached to and its PCI bus id: the ordinal alone is not
// enough, because CUDA_VISIBLE_DEVICES renumbers the devices per process (two ranks that each see
// "device 0" may hold different GPUs, or the same one).
#include <mpi.h>

#include <span>
#include <string>
#include <vector>

namespace trlhpc {

struct GpuIdentity {
  std::string host;    // the node (MPI_Get_processor_name)
  std::string device;  // the PCI bus id, or "ordinal N" when it cannot be queried
  bool operator==(const GpuIdentity&) const = default;
};

// Pure: true when two ranks' identities are equal.
bool any_gpu_shared(std::span<const GpuIdentity> ranks);

// Collective over `comm`: every rank's identity, indexed by rank in `comm` (the same table on every rank).
std::vector<GpuIdentity> gather_gpu_identities(MPI_Comm comm, const GpuIdentity& mine);

// Collective over `comm`: any_gpu_shared of the gathered table, so every rank gets the same answer.
bool ranks_share_a_gpu(MPI_Comm comm, const GpuIdentity& mine);

// This rank's identity when it drives GPU `gpu_index` (its host name and, in CUDA builds, the device's
// PCI bus id).
GpuIdentity local_gpu_identity(int gpu_index);

}  // namespace trlhpc
