#pragma once
// NcclContext: the NCCL half of NcclCommunicator (see nccl_communicator.hpp), defined in
// src/parallel/nccl_context.cu. CUDA builds only; no CUDA or NCCL header leaks out of this file, and
// it is C++17 because nvcc compiles its definition in C++17 mode (cmake/cuda.cmake).
//
// One NCCL communicator and one CUDA stream per context, both owned (RAII). The ncclUniqueId is made
// by rank 0 of the MPI communicator and broadcast over it, so an NcclContext spans exactly the ranks
// of that MPI communicator (a ProcessGroup's mpi_comm()).
//
// Operations are enqueued on the context's stream. The caller must have finished producing the input
// (e.g. synchronized its compute stream) before the call. Blocking calls synchronize the stream before
// returning; async calls record an event that CommRequest::wait() synchronizes on.
//
// Hang watchdog (collective_watchdog.hpp), with timeout_seconds > 0: the NCCL communicator is created
// non-blocking (ncclConfig_t::blocking = 0, NCCL >= 2.14), so no NCCL call blocks the host; calls that
// return ncclInProgress are settled by polling ncclCommGetAsyncError, and waits for the stream poll the
// event (cudaEventQuery) and ncclCommGetAsyncError, all against the deadline. Arrival notices go over the
// MPI communicator's duplicate as for MpiCommunicator. On expiry: the report line, ncclCommAbort (which
// also ends the kernels stuck on the stream), then MPI_Abort(comm, 2). timeout_seconds <= 0: a blocking
// communicator and cudaStreamSynchronize, as before. Compiled, not yet run on a GPU.
#include <mpi.h>

#include <cstddef>
#include <memory>

#include "trlhpc/parallel/collective_watchdog.hpp"
#include "trlhpc/parallel/comm_types.hpp"

struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace trlhpc {

class NcclContext {
 public:
  // Collective over `comm`. Makes `device` current while it works and restores the previous device.
  // `label` names the group and phase in timeout reports.
  NcclContext(MPI_Comm comm, int device, double timeout_seconds = kDefaultCollectiveTimeoutSeconds,
              CollectiveLabel label = {});
  ~NcclContext();
  NcclContext(NcclContext&&) noexcept;
  NcclContext& operator=(NcclContext&&) noexcept;
  NcclContext(const NcclContext&) = delete;
  NcclContext& operator=(const NcclContext&) = delete;

  int rank() const;
  int size() const;
  int device() const;
  CUstream_st* stream() const;

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
