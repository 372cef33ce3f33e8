#pragma once
// NcclContext: the NCCL half of NcclCommunicator (see nccl_communicator.hpp), defined in
// src/comm/nccl_context.cu. CUDA builds only; no CUDA or NCCL header leaks out of this file, and
// it is C++17 because nvcc compiles its definition in C++17 mode (cmake/cuda.cmake).
//
// One NCCL communicator and one CUDA stream per context, both owned (RAII). The ncclUniqueId is made
// by rank 0 of the MPI communicator and broadcast over it, so an NcclContext spans exactly the ranks
// of that MPI communicator (a ProcessGroup's mpi_comm()).
//
// Stream ordering. Operations run on the context's own comm stream, bridged to the CUDA backend's
// compute stream (given at construction) with events both ways:
//   compute -> comm: before enqueueing, an event recorded on the compute stream is waited by the comm
//     stream (cudaEventRecord + cudaStreamWaitEvent), so the collective reads what the compute work
//     queued before the call produced, with no host synchronisation;
//   comm -> compute: an event recorded on the comm stream after the NCCL calls. Blocking calls
//     synchronise on it before returning; CommRequest::wait() of async ones synchronises on it (under the
//     watchdog's deadline) and then makes the compute stream wait on it, so compute work queued after
//     wait(), and the caching allocator's reuse of a released buffer (it hands blocks out in compute
//     stream order), is ordered after the collective.
// Stream-ordered release (docs/CUDA-REVIEW-FIXES.md defect 5): an async operation also hands each of its buffers
// to `record_stream_use` (the CUDA backend's allocator hook) with the comm stream, so a tensor released
// before wait() keeps its block out of reuse until the collective has completed on the comm stream.
// Blocking operations have completed on return and record nothing.
// A null compute stream is the legacy default stream.
//
// Hang watchdog (collective_watchdog.hpp). The NCCL communicator is always created non-blocking
// (ncclConfig_t::blocking = 0, NCCL >= 2.14): ncclCommInitRankConfig returns at once and is settled by
// polling ncclCommGetAsyncError, under the deadline when timeout_seconds > 0, so a peer that never
// arrives cannot hang initialisation; calls that return ncclInProgress are settled the same way, and
// waits poll the event (cudaEventQuery) and ncclCommGetAsyncError. Arrival notices go over the MPI
// communicator's duplicate as for MpiCommunicator. On expiry: the report line (the MPI watchdog's), the
// communicator's ncclCommGetAsyncError state on a second line, ncclCommAbort (which also ends the kernels
// stuck on the stream), then MPI_Abort(comm, 2). timeout_seconds <= 0: no deadline.
// Compiled, not yet run on a GPU.
#include <mpi.h>

#include <cstddef>
#include <memory>

#include "trlhpc/comm/collective_watchdog.hpp"
#include "trlhpc/comm/comm_types.hpp"
#include "trlhpc/comm/stream_use_recorder.hpp"

struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace trlhpc {

class NcclContext {
 public:
  // Collective over `comm`. Makes `device` current while it works and restores the previous device.
  // `compute_stream`: the CUDA backend's stream (Ops::stream_handle()), which every operation is ordered
  // against; null = the legacy default stream. `label` names the group and phase in timeout reports.
  // `record_stream_use`: see "Stream-ordered release" above (null: not told; buffers must then outlive wait()).
  NcclContext(MPI_Comm comm, int device, CUstream_st* compute_stream,
              double timeout_seconds = kDefaultCollectiveTimeoutSeconds, CollectiveLabel label = {},
              StreamUseRecorder record_stream_use = nullptr);
  ~NcclContext();
  NcclContext(NcclContext&&) noexcept;
  NcclContext& operator=(NcclContext&&) noexcept;
  NcclContext(const NcclContext&) = delete;
  NcclContext& operator=(const NcclContext&) = delete;

  int rank() const;
  int size() const;
  int device() const;
  CUstream_st* stream() const;          // the comm stream
  CUstream_st* compute_stream() const;  // the stream it is bridged to

  // Same contracts as Communicator's do_* functions (device pointers on device()).
  CommRequest all_reduce(const void* in, void* out, size_t count, ElementType type, ReduceOp op, Completion mode);
  CommRequest reduce_scatter(const void* in, void* out, size_t block, ElementType type, ReduceOp op, Completion mode);
  CommRequest all_gather(const void* in, void* out, size_t block, ElementType type, Completion mode);
  CommRequest all_gather_variable(const void* in, void* out, const size_t* counts, ElementType type, Completion mode);
  CommRequest all_to_all(const void* in, void* out, size_t block, ElementType type, Completion mode);
  CommRequest broadcast(void* data, size_t count, ElementType type, int root, Completion mode);
  CommRequest send_recv(const void* send, size_t send_count, int dest, void* recv, size_t recv_count, int source,
                        ElementType type, Completion mode);
  void barrier();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace trlhpc
