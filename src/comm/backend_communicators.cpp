#include "trlhpc/comm/backend_communicators.hpp"

#include "trlhpc/core/error.hpp"
#include "trlhpc/ops/ops.hpp"
#include "trlhpc/comm/gpu_sharing.hpp"
#include "trlhpc/runtime/topology.hpp"

#if defined(TRLHPC_HAVE_CUDA)
#include "trlhpc/ops/cuda_ops.hpp"
#endif

namespace trlhpc {

BackendCommunicators backend_communicators(const Topology& topology, Ops& ops, MPI_Comm world) {
  TRLHPC_ASSERT(ops.device() == topology.device(), "the backend runs on another device than the rank is bound to");
  if (topology.device() != Device::CUDA)
    return {DeviceCommKind::HostMpi, make_device_communicator_factory(DeviceCommKind::HostMpi)};
#if defined(TRLHPC_HAVE_CUDA)
  const bool shared = ranks_share_a_gpu(world, local_gpu_identity(topology.gpu_index()));
  const DeviceCommKind kind = choose_device_comm(Device::CUDA, shared);
  CudaOps* cuda = as_cuda_ops(ops);
  TRLHPC_ASSERT(cuda != nullptr, "a CUDA-bound rank without the CUDA backend");
  // The NCCL comm stream's use of a buffer holds its block back from reuse until the work completes.
  StreamUseRecorder record = [allocator_hook = cuda->stream_use_recorder()](const void* ptr, CUstream_st* stream) {
    allocator_hook(ptr, stream);
  };
  return {kind, make_device_communicator_factory(kind, topology.gpu_index(),
                                                 static_cast<CUstream_st*>(cuda->stream_handle()), std::move(record))};
#else
  (void)world;
  throw UserError("this trlhpc was built without CUDA and cannot communicate on a GPU: pass --device cpu");
#endif
}

}  // namespace trlhpc
