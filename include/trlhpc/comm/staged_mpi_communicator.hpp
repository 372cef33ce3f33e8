#pragma once
// StagedMpiCommunicator: Communicator on device memory through MPI on host memory, for several ranks
// sharing one GPU (NCCL refuses them; Debian's Open MPI is not CUDA-aware). CUDA builds only: include
// it from code compiled when TRLHPC_HAVE_CUDA is defined.
//
// Each operation: device -> pinned host (PinnedStaging::download, after the compute stream's queued
// work) -> the same operation of an MpiCommunicator on the pinned buffers -> device (upload, on the
// compute stream). Async operations stage in at issue and stage out when CommRequest::wait() (or a
// test() returning true) sees the MPI part complete; until then their pinned buffers stay leased.
// Everything MpiCommunicator does holds here: bf16 sums through MpiBf16Ops (fp32 accumulation, round
// to nearest even), large-count splitting, the hang watchdog with the same report, the progress thread.
// Compiled here; not yet run on a GPU.
#include <mpi.h>

#include "trlhpc/comm/communicator.hpp"
#include "trlhpc/comm/mpi_communicator.hpp"
#include "trlhpc/comm/pinned_staging.hpp"

namespace trlhpc {

class StagedMpiCommunicator final : public Communicator {
 public:
  // Collective over `comm` (not owned; it must outlive this object). `device`: the GPU the buffers live
  // on; `compute_stream`: the CUDA backend's stream (null = legacy default stream); `options`/`label`:
  // as for MpiCommunicator.
  StagedMpiCommunicator(MPI_Comm comm, int device, CUstream_st* compute_stream, MpiCommunicatorOptions options = {},
                        CollectiveLabel label = {});

  int rank() const override { return mpi_.rank(); }
  int size() const override { return mpi_.size(); }
  Device device() const override { return Device::CUDA; }
  const char* backend_name() const override { return "staged-mpi"; }
  void barrier() override { mpi_.barrier(); }
  MpiCommunicator& host_side() { return mpi_; }
  size_t pinned_bytes() const { return staging_.pinned_bytes(); }

 protected:
  CommRequest do_all_reduce(const void* in, void* out, size_t count, ElementType type, ReduceOp op,
                            Completion mode) override;
  CommRequest do_reduce_scatter(const void* in, void* out, size_t block, ElementType type, ReduceOp op,
                                Completion mode) override;
  CommRequest do_all_gather(const void* in, void* out, size_t block, ElementType type, Completion mode) override;
  CommRequest do_all_gather_variable(const void* in, void* out, const size_t* counts, ElementType type,
                                     Completion mode) override;
  CommRequest do_all_to_all(const void* in, void* out, size_t block, ElementType type, Completion mode) override;
  CommRequest do_broadcast(void* data, size_t count, ElementType type, int root, Completion mode) override;
  CommRequest do_send_recv(const void* send, size_t send_count, int dest, void* recv, size_t recv_count, int source,
                           ElementType type, Completion mode) override;

 private:
  struct Staged;  // the pinned buffers of one operation
  Staged stage_in(const void* in, size_t in_bytes, size_t out_bytes);
  // Blocking: uploads now. Async: wraps `mpi` so that completion uploads (staged_mpi_communicator.cpp).
  CommRequest stage_out(Staged staged, CommRequest mpi, void* device_out, size_t out_bytes, Completion mode);

  MpiCommunicator mpi_;
  PinnedStaging staging_;
};

}  // namespace trlhpc
