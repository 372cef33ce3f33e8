#pragma once
// The device side of a process group: which Communicator carries the backend's tensors.
//
// Every ProcessGroup has two communicators (process_groups.hpp):
//   host()   always MPI on host memory: counts, flags, metadata, scalars, agreement between ranks.
//   device() collectives on the backend's tensors, in their dtype. Its kind:
//     HostMpi    MPI on host memory. The CPU backend's tensors live in host memory, so this is the
//                MpiCommunicator over a duplicate of the group's communicator (never the host one:
//                host and device messages can never match each other's).
//     Nccl       NCCL on device memory (nccl_communicator.hpp): CUDA with one rank per GPU.
//     StagedMpi  device -> pinned host -> MPI -> device (staged_mpi_communicator.hpp): CUDA with
//                several ranks on one GPU, which NCCL refuses ("Duplicate GPU detected").
// choose_device_comm() is that table; ranks_share_a_gpu() (gpu_sharing.hpp) supplies its second input.
#include <cstdint>
#include <functional>
#include <memory>

#include "trlhpc/core/dtype.hpp"
#include "trlhpc/comm/communicator.hpp"
#include "trlhpc/comm/mpi_communicator.hpp"
#include "trlhpc/comm/stream_use_recorder.hpp"

struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace trlhpc {

enum class DeviceCommKind : uint8_t { HostMpi, Nccl, StagedMpi };
const char* device_comm_kind_name(DeviceCommKind kind);  // "mpi (host memory)", "nccl", "staged mpi"

// The device communicator for a backend: CPU -> HostMpi; CUDA with one rank per GPU -> Nccl; CUDA with
// several ranks of the job on one GPU -> StagedMpi. `ranks_share_a_gpu` must be the same on every rank
// (ranks_share_a_gpu() agrees it over the world), so every rank picks the same kind.
DeviceCommKind choose_device_comm(Device device, bool ranks_share_a_gpu);

// What a factory gets to build one group's device communicator.
struct DeviceCommArgs {
  // A duplicate of the group's communicator reserved for device traffic, owned by the ProcessGroup
  // (which outlives the communicator built over it). Same ranks in the same order as host().
  MPI_Comm comm;
  // The group's options (--ddp_timeout watchdog, progress thread, call-size limit).
  MpiCommunicatorOptions options;
  // The group's name and the shared phase label, so a timeout report reads the same as host()'s.
  CollectiveLabel label;
};

// Builds one group's device communicator; called once per group kind, collectively over args.comm.
using DeviceCommunicatorFactory = std::function<std::unique_ptr<Communicator>(const DeviceCommArgs&)>;

// The factory for `kind`. HostMpi needs nothing else. Nccl and StagedMpi need a CUDA build, the GPU
// this rank drives (Topology::gpu_index()) and the CUDA backend's compute stream, which every
// collective is ordered against (see nccl_context.hpp / staged_mpi_context.hpp); in a CPU-only build
// they throw a UsageError naming the missing CUDA backend. `record_stream_use` (Nccl): the backend's
// allocator hook, told which buffers each async collective uses on the comm stream (null: none; then
// a buffer must not be released before its request's wait()).
DeviceCommunicatorFactory make_device_communicator_factory(DeviceCommKind kind, int gpu_index = -1,
                                                           CUstream_st* compute_stream = nullptr,
                                                           StreamUseRecorder record_stream_use = nullptr);

}  // namespace trlhpc
