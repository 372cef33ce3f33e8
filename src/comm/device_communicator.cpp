#include "trlhpc/comm/device_communicator.hpp"

#include <string>

#include "trlhpc/core/error.hpp"

#ifdef TRLHPC_HAVE_CUDA
#include "trlhpc/comm/nccl_communicator.hpp"
#include "trlhpc/comm/staged_mpi_communicator.hpp"
#endif

namespace trlhpc {

const char* device_comm_kind_name(DeviceCommKind kind) {
  switch (kind) {
    case DeviceCommKind::HostMpi: return "mpi (host memory)";
    case DeviceCommKind::Nccl: return "nccl";
    case DeviceCommKind::StagedMpi: return "staged mpi (device -> pinned host -> mpi -> device)";
  }
  return "?";
}

DeviceCommKind choose_device_comm(Device device, bool ranks_share_a_gpu) {
  if (device == Device::CPU) return DeviceCommKind::HostMpi;
  // NCCL rejects a communicator with two ranks on one GPU (ncclInvalidUsage, "Duplicate GPU detected").
  return ranks_share_a_gpu ? DeviceCommKind::StagedMpi : DeviceCommKind::Nccl;
}

DeviceCommunicatorFactory make_device_communicator_factory(DeviceCommKind kind, int gpu_index,
                                                           CUstream_st* compute_stream,
                                                           StreamUseRecorder record_stream_use) {
  if (kind == DeviceCommKind::HostMpi)
    return [](const DeviceCommArgs& args) -> std::unique_ptr<Communicator> {
      return std::make_unique<MpiCommunicator>(args.comm, args.options, args.label);
    };
#ifdef TRLHPC_HAVE_CUDA
  TRLHPC_ASSERT(gpu_index >= 0, std::string("the ") + device_comm_kind_name(kind) +
                                    " device communicator needs the GPU this rank drives (got " +
                                    std::to_string(gpu_index) + ")");
  if (kind == DeviceCommKind::Nccl)
    return [gpu_index, compute_stream, record_stream_use](const DeviceCommArgs& args) -> std::unique_ptr<Communicator> {
      return std::make_unique<NcclCommunicator>(args.comm, gpu_index, compute_stream, args.options.timeout_seconds,
                                                args.label, record_stream_use);
    };
  return [gpu_index, compute_stream](const DeviceCommArgs& args) -> std::unique_ptr<Communicator> {
    return std::make_unique<StagedMpiCommunicator>(args.comm, gpu_index, compute_stream, args.options, args.label);
  };
#else
  (void)record_stream_use;
  throw UserError(std::string("the ") + device_comm_kind_name(kind) +
                  " device communicator needs the CUDA backend, which this build of trlhpc does not have: rebuild "
                  "with -DTRLHPC_CUDA=ON, or run with --device cpu");
#endif
}

}  // namespace trlhpc
