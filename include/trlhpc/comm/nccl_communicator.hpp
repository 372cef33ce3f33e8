#pragma once
// NcclCommunicator: Communicator over NCCL, for device memory (the CUDA backend). CUDA builds only:
// include it from code compiled when TRLHPC_HAVE_CUDA is defined.
//
// Header-only adapter from the typed C++20 Communicator API to NcclContext, whose definition (every
// NCCL and CUDA call) lives in src/comm/nccl_context.cu. The split exists because nvcc compiles
// .cu files as C++17 here and Communicator's API is built on std::span.
//
// NCCL takes size_t counts, so no operation needs splitting. all_gather_variable is a group of
// ncclBroadcast (one per rank), all_to_all and send_recv are groups of ncclSend/ncclRecv.
#include <mpi.h>

#include <utility>

#include "trlhpc/comm/communicator.hpp"
#include "trlhpc/comm/nccl_context.hpp"

namespace trlhpc {

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `comm` (a ProcessGroup builds it over its device duplicate through
  // make_device_communicator_factory); `device` is Topology::gpu_index(); `compute_stream` the CUDA
  // backend's stream (null: the legacy default stream), which every operation is ordered against
  // (nccl_context.hpp). timeout_seconds: the hang watchdog's limit per operation (<= 0: none); `label`
  // names the group and phase in its report (e.g. {group.name(), phase label of the ProcessGroups}).
  NcclCommunicator(MPI_Comm comm, int device, CUstream_st* compute_stream = nullptr,
                   double timeout_seconds = kDefaultCollectiveTimeoutSeconds, CollectiveLabel label = {},
                   StreamUseRecorder record_stream_use = nullptr)
      : context_(comm, device, compute_stream, timeout_seconds, std::move(label), std::move(record_stream_use)) {}

  int rank() const override { return context_.rank(); }
  int size() const override { return context_.size(); }
  Device device() const override { return Device::CUDA; }
  const char* backend_name() const override { return "nccl"; }
  void barrier() override { context_.barrier(); }
  int gpu_index() const { return context_.device(); }
  CUstream_st* stream() const { return context_.stream(); }

 protected:
  CommRequest do_all_reduce(const void* in, void* out, size_t count, ElementType type, ReduceOp op,
                            Completion mode) override {
    return context_.all_reduce(in, out, count, type, op, mode);
  }
  CommRequest do_reduce_scatter(const void* in, void* out, size_t block, ElementType type, ReduceOp op,
                                Completion mode) override {
    return context_.reduce_scatter(in, out, block, type, op, mode);
  }
  CommRequest do_all_gather(const void* in, void* out, size_t block, ElementType type, Completion mode) override {
    return context_.all_gather(in, out, block, type, mode);
  }
  CommRequest do_all_gather_variable(const void* in, void* out, const size_t* counts, ElementType type,
                                     Completion mode) override {
    return context_.all_gather_variable(in, out, counts, type, mode);
  }
  CommRequest do_all_to_all(const void* in, void* out, size_t block, ElementType type, Completion mode) override {
    return context_.all_to_all(in, out, block, type, mode);
  }
  CommRequest do_broadcast(void* data, size_t count, ElementType type, int root, Completion mode) override {
    return context_.broadcast(data, count, type, root, mode);
  }
  CommRequest do_send_recv(const void* send, size_t send_count, int dest, void* recv, size_t recv_count, int source,
                           ElementType type, Completion mode) override {
    return context_.send_recv(send, send_count, dest, recv, recv_count, source, type, mode);
  }

 private:
  NcclContext context_;
};

}  // namespace trlhpc
