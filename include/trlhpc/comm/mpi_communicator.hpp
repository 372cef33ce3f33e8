#pragma once
// MpiCommunicator: Communicator over an MPI communicator, for host memory (the CPU backend).
//
// Large counts: MPI takes int counts and OpenMPI 4.1 (Debian 12) has no MPI_*_c large-count calls, so
// an operation whose total element count exceeds `max_elements_per_call` (at most INT_MAX) is split:
// all_reduce and broadcast into consecutive chunks; reduce_scatter into one chunked MPI_Reduce per
// destination rank; all_gather(_variable) into chunked broadcasts from each rank; all_to_all and
// send_recv into chunked point-to-point messages. Below the limit each collective is one MPI call.
//
// bf16 (uint16_t) reductions use MpiBf16Ops. Non-blocking variants use MPI's I-collectives; OpenMPI
// progresses them inside MPI calls, so CommRequest::test() from the compute loop helps them along, and
// with options.progress set a MpiProgressThread (progress_thread.hpp) tests them while compute runs.
// async_wait() counts the time the owner spent blocked in CommRequest::wait() (overlap measurements).
//
// Hang watchdog (collective_watchdog.hpp): with timeout_seconds > 0 every operation (blocking ones,
// barrier, send_recv, and CommRequest::wait of non-blocking ones) is issued non-blocking and waited by
// polling MPI_Test* against that deadline; past it the rank writes one line naming the operation, the
// group, the phase and the members that had not arrived, and calls MPI_Abort(comm, 2). Each operation
// also posts zero-byte arrival notices to the other members (that is how the missing ones are named).
// timeout_seconds <= 0: no watchdog, MPI's blocking collectives and MPI_Waitall, as before.
#include <mpi.h>

#include <climits>
#include <cstddef>
#include <memory>

#include "trlhpc/comm/collective_watchdog.hpp"
#include "trlhpc/comm/communicator.hpp"
#include "trlhpc/comm/mpi_bf16_ops.hpp"
#include "trlhpc/comm/progress_thread.hpp"

namespace trlhpc {

struct MpiCommunicatorOptions {
  // Largest element count handed to one MPI call. Tests lower it to reach the split path cheaply.
  size_t max_elements_per_call = INT_MAX;
  // Longest wait for one collective before the job is aborted (exit 2); <= 0: wait forever. The default
  // is Hugging Face's / PyTorch's (--ddp_timeout 1800).
  double timeout_seconds = kDefaultCollectiveTimeoutSeconds;
  // Tests this communicator's non-blocking operations while they are outstanding (`--comm_progress
  // thread`); null: only the owner's test()/wait() calls progress them. One thread may serve several
  // communicators (ProcessGroups shares one); it must outlive every operation it watches.
  std::shared_ptr<MpiProgressThread> progress;
};

// Time the owner of non-blocking operations spent blocked waiting for them: seconds inside
// CommRequest::wait() (including a destructor's wait) of this communicator's async operations. Blocking
// collectives are not counted: nothing overlaps them. Of those seconds, `before_peers` passed before
// every member had even issued the operation (known from the hang watchdog's arrival notices, so 0 with
// the watchdog off): load imbalance between ranks, which no progress can hide.
struct AsyncWaitStats {
  double seconds = 0;
  double before_peers = 0;
  uint64_t waits = 0;
};

class MpiCommunicator final : public Communicator {
 public:
  // Does not own `comm` (a ProcessGroup or test owns it through MpiComm and outlives this object).
  // Collective over `comm` when options.timeout_seconds > 0 (the watchdog duplicates it). `label` names
  // the group and its phase in timeout reports (ProcessGroups sets it; default "unnamed", no phase).
  explicit MpiCommunicator(MPI_Comm comm, MpiCommunicatorOptions options = {}, CollectiveLabel label = {});

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Device device() const override { return Device::CPU; }
  const char* backend_name() const override { return "mpi"; }
  void barrier() override;
  MPI_Comm mpi_comm() const { return comm_; }
  // The hang watchdog of this communicator (diagnostics and tests: arrival bookkeeping).
  CollectiveWatchdog& watchdog() { return *watchdog_; }
  // Blocked time in waits of async operations since construction (single-threaded like the rest).
  const AsyncWaitStats& async_wait() const { return *async_wait_; }
  MpiProgressThread* progress_thread() const { return progress_.get(); }

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
  // Stages device buffers through pinned host memory and then runs this communicator's operations on
  // them (staged_mpi_communicator.hpp): it calls the do_* functions above with the mode it was given.
  friend class StagedMpiCommunicator;

  MPI_Op mpi_op(ReduceOp op, ElementType type) const;
  // all_gather and all_gather_variable; the names are what a timeout report calls the operation.
  CommRequest gather(const void* in, void* out, const size_t* counts, ElementType type, Completion mode,
                     const char* blocking_name, const char* async_name);

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  size_t max_elements_per_call_;
  MpiBf16Ops bf16_ops_;
  std::unique_ptr<CollectiveWatchdog> watchdog_;  // stable address: in-flight requests point at it
  std::unique_ptr<AsyncWaitStats> async_wait_ = std::make_unique<AsyncWaitStats>();  // likewise
  std::shared_ptr<MpiProgressThread> progress_;   // null: no progress thread
};

}  // namespace trlhpc
