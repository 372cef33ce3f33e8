// NcclContext: NCCL collectives on one CUDA stream (see include/trlhpc/comm/nccl_context.hpp).
// Host code only (no kernels); a .cu file so that it is compiled, and NCCL linked, in CUDA builds only.
// Stream ordering and the watchdog path: see the header. Compiled here; not yet run on a GPU.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>

#include "cuda_raii.cuh"
#include "trlhpc/runtime/mpi_check.hpp"
#include "trlhpc/core/cuda_check.hpp"
#include "trlhpc/comm/nccl_context.hpp"

namespace trlhpc {

namespace {

using cuda::CudaEvent;
using cuda::CudaStream;
using cuda::DeviceGuard;

// An NCCL call on a communicator that may be non-blocking: ncclInProgress means "issued, not finished":
// poll ncclCommGetAsyncError (under the watchdog's deadline) until the communicator is ready again, as
// NCCL requires before the next call on it. Other results are checked as usual.
void settle(ncclResult_t rc, const char* expr, ncclComm_t comm, CollectiveWatchdog& watchdog, uint64_t index,
            const char* name) {
  if (rc != ncclInProgress) {
    if (rc != ncclSuccess)
      throw_runtime_failure("NCCL", expr, std::string(ncclGetErrorString(rc)) + " (" + ncclGetLastError(comm) + ")",
                            __FILE__, __LINE__);
    return;
  }
  watchdog.wait(index, name, [&] {
    ncclResult_t state = ncclSuccess;
    TRLHPC_CHECK_NCCL(ncclCommGetAsyncError(comm, &state));
    if (state == ncclInProgress) return false;
    TRLHPC_CHECK_NCCL(state);
    return true;
  });
}
#define TRLHPC_SETTLE_NCCL(expr, comm, watchdog, index, name) settle((expr), #expr, (comm), (watchdog), (index), (name))

// Throws if the communicator reports an asynchronous error (a peer failed, a network error).
void check_async_error(ncclComm_t comm) {
  ncclResult_t state = ncclSuccess;
  TRLHPC_CHECK_NCCL(ncclCommGetAsyncError(comm, &state));
  if (state != ncclInProgress) TRLHPC_CHECK_NCCL(state);
}

class NcclComm {
 public:
  // Always non-blocking (config.blocking = 0): initialisation returns at once and is settled by polling
  // ncclCommGetAsyncError under the watchdog's deadline, so a peer that never calls it cannot hang
  // this rank in ncclCommInitRankConfig; later calls may return ncclInProgress and are settled likewise.
  NcclComm(int size, const ncclUniqueId& id, int rank, CollectiveWatchdog& watchdog)
      : timeout_seconds_(watchdog.timeout_seconds()) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const uint64_t index = watchdog.arrive();
    try {
      TRLHPC_SETTLE_NCCL(ncclCommInitRankConfig(&comm_, size, id, rank, &config), comm_, watchdog, index,
                         "nccl communicator init");
    } catch (...) {
      if (comm_) ncclCommAbort(comm_);
      throw;
    }
  }
  ~NcclComm() {
    if (!comm_) return;
    // Finalize flushes outstanding work; on a non-blocking communicator it may be in progress, so wait
    // for it (at most the timeout) and abort instead of hanging in a destructor.
    ncclResult_t rc = ncclCommFinalize(comm_);
    if (rc == ncclInProgress) {
      Backoff backoff;
      ncclResult_t state = ncclInProgress;
      while (ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state == ncclInProgress &&
             (timeout_seconds_ <= 0 || backoff.elapsed_seconds() < timeout_seconds_))
        backoff.pause(false);  // sleeps between polls after 10 ms
      rc = state;
    }
    if (rc != ncclSuccess) {
      ncclCommAbort(comm_);
      return;
    }
    ncclCommDestroy(comm_);
  }
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  ncclComm_t get() const { return comm_; }

 private:
  double timeout_seconds_;
  ncclComm_t comm_ = nullptr;
};

class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) { TRLHPC_CHECK_CUDA(cudaMalloc(&data_, bytes)); }
  ~DeviceBuffer() {
    if (data_) cudaFree(data_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return data_; }

 private:
  void* data_ = nullptr;
};

ncclDataType_t nccl_type(ElementType type) {
  switch (type) {
    case ElementType::F32: return ncclFloat32;
    case ElementType::F64: return ncclFloat64;
    case ElementType::I32: return ncclInt32;
    case ElementType::I64: return ncclInt64;
    case ElementType::U8: return ncclUint8;
    case ElementType::BF16: return ncclBfloat16;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
  }
  return ncclSum;
}

// Completion of everything enqueued on the comm stream before construction. wait() synchronises on it
// (polling the event and the communicator's async error under the deadline when the watchdog is on),
// then makes the compute stream wait on it: the comm -> compute half of the bridge (nccl_context.hpp).
class NcclPending final : public PendingOperation {
 public:
  NcclPending(int device, cudaStream_t comm_stream, cudaStream_t compute_stream, ncclComm_t comm,
              CollectiveWatchdog& watchdog, uint64_t index, const char* name)
      : device_(device), compute_stream_(compute_stream), comm_(comm), watchdog_(watchdog), index_(index), name_(name) {
    TRLHPC_CHECK_CUDA(cudaEventRecord(done_.get(), comm_stream));
  }
  bool test() override {
    DeviceGuard guard(device_);
    const cudaError_t rc = cudaEventQuery(done_.get());
    if (rc == cudaErrorNotReady) {
      // Not an error: if the runtime recorded it, clear it (only it) so the next launch check does not
      // report it, as the allocator's event poll does.
      if (cudaPeekAtLastError() == cudaErrorNotReady) cudaGetLastError();
      check_async_error(comm_);
      return false;
    }
    TRLHPC_CHECK_CUDA(rc);
    order_compute_after();
    return true;
  }
  void wait() override {
    if (!watchdog_.enabled()) {
      DeviceGuard guard(device_);
      TRLHPC_CHECK_CUDA(cudaEventSynchronize(done_.get()));
      order_compute_after();
      return;
    }
    watchdog_.wait(index_, name_, [this] { return test(); });
  }

 private:
  // Compute work queued from now on (and the allocator's reuse of the buffers) follows the collective.
  void order_compute_after() { TRLHPC_CHECK_CUDA(cudaStreamWaitEvent(compute_stream_, done_.get(), 0)); }

  int device_;
  cudaStream_t compute_stream_;
  ncclComm_t comm_;
  CollectiveWatchdog& watchdog_;  // the context's; pending operations do not outlive their context
  uint64_t index_;
  const char* name_;
  CudaEvent done_;
};

// Brackets several NCCL calls so they run as one fused operation (required for send/recv pairs:
// without it a ring of blocking sends deadlocks).
// end() returns ncclGroupEnd's result (ncclInProgress on a non-blocking communicator: the caller settles
// it); the destructor only closes a group left open by an exception.
class NcclGroup {
 public:
  NcclGroup() { TRLHPC_CHECK_NCCL(ncclGroupStart()); }
  ~NcclGroup() {
    if (open_) ncclGroupEnd();
  }
  ncclResult_t end() {
    open_ = false;
    return ncclGroupEnd();
  }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

 private:
  bool open_ = true;
};

const char* at(const void* base, size_t elements, ElementType type) {
  return static_cast<const char*>(base) + elements * element_size(type);
}
char* at(void* base, size_t elements, ElementType type) { return static_cast<char*>(base) + elements * element_size(type); }

ncclUniqueId shared_unique_id(MPI_Comm comm, int rank) {
  ncclUniqueId id{};
  if (rank == 0) TRLHPC_CHECK_NCCL(ncclGetUniqueId(&id));
  TRLHPC_CHECK_MPI(MPI_Bcast(&id, static_cast<int>(sizeof(id)), MPI_BYTE, 0, comm));
  return id;
}

int comm_rank(MPI_Comm comm) {
  int rank = 0;
  TRLHPC_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  return rank;
}
int comm_size(MPI_Comm comm) {
  int size = 0;
  TRLHPC_CHECK_MPI(MPI_Comm_size(comm, &size));
  return size;
}

}  // namespace

// The watchdog's last step before MPI_Abort: say what NCCL itself knows (a peer's failure, a network
// error, or still in progress), then abort the communicator so the kernels stuck on the stream end.
static void report_and_abort(ncclComm_t comm) {
  ncclResult_t state = ncclSuccess;
  const ncclResult_t rc = ncclCommGetAsyncError(comm, &state);
  std::fprintf(stderr, "trlhpc: failure: %sNCCL communicator state at the timeout: %s%s\n", rank_prefix().c_str(),
               rc == ncclSuccess ? ncclGetErrorString(state) : "unknown (ncclCommGetAsyncError failed)",
               state == ncclInProgress ? " (the collective never completed)" : "");
  std::fflush(stderr);
  ncclCommAbort(comm);
}

struct NcclContext::State {
  // The device must be current (NcclContext's constructor guards it).
  State(MPI_Comm mpi, int device_index, cudaStream_t compute, double timeout_seconds, CollectiveLabel label,
        StreamUseRecorder record_use)
      : device(device_index),
        rank(comm_rank(mpi)),
        size(comm_size(mpi)),
        compute_stream(compute),
        record_stream_use(std::move(record_use)),
        watchdog(mpi, timeout_seconds, std::move(label)),
        comm(size, shared_unique_id(mpi, rank), rank, watchdog) {
    watchdog.set_abort_hook([c = comm.get()] { report_and_abort(c); });
  }

  int device;
  int rank;
  int size;
  cudaStream_t compute_stream;  // the CUDA backend's (not owned); null = legacy default stream
  StreamUseRecorder record_stream_use;  // the backend allocator's hook (null: none)
  CollectiveWatchdog watchdog;  // before comm: the communicator's creation is watched too
  CudaStream stream;            // the comm stream
  CudaEvent inputs_ready;       // recorded on compute_stream before each operation
  NcclComm comm;
  DeviceBuffer scratch{sizeof(float)};  // (1) float for barrier()

  // One operation: its arrival notice, then `enqueue` (the NCCL calls, returning the last result, which
  // may be ncclInProgress on a non-blocking communicator), then completion. Blocking: wait for the
  // stream. Async: hand an event recorded after the enqueued work to the caller, and tell the allocator
  // that `buffers` are in use on the comm stream (stream-ordered release, nccl_context.hpp).
  template <class Enqueue>
  CommRequest run(Completion mode, const char* blocking_name, const char* async_name,
                  std::initializer_list<const void*> buffers, Enqueue&& enqueue) {
    const char* name = mode == Completion::Async ? async_name : blocking_name;
    const uint64_t index = watchdog.arrive();
    // compute -> comm: the collective starts after the compute work that produced its inputs.
    inputs_ready.record(compute_stream);
    TRLHPC_CHECK_CUDA(cudaStreamWaitEvent(stream.get(), inputs_ready.get(), 0));
    TRLHPC_SETTLE_NCCL(enqueue(), comm.get(), watchdog, index, name);
    auto pending =
        std::make_unique<NcclPending>(device, stream.get(), compute_stream, comm.get(), watchdog, index, name);
    if (mode == Completion::Async) {
      if (record_stream_use)
        for (const void* buffer : buffers)
          if (buffer) record_stream_use(buffer, stream.get());
      return CommRequest(std::move(pending));
    }
    pending->wait();  // comm -> compute, and the data is complete on return
    return CommRequest();
  }
};

NcclContext::NcclContext(MPI_Comm comm, int device, CUstream_st* compute_stream, double timeout_seconds,
                         CollectiveLabel label, StreamUseRecorder record_stream_use) {
  DeviceGuard guard(device);
  state_ = std::make_unique<State>(comm, device, compute_stream, timeout_seconds, std::move(label),
                                   std::move(record_stream_use));
}

NcclContext::~NcclContext() {
  if (!state_) return;
  try {
    DeviceGuard guard(state_->device);
    state_.reset();
  } catch (...) {
    state_.reset();  // the device is gone; release the handles anyway
  }
}

NcclContext::NcclContext(NcclContext&&) noexcept = default;
NcclContext& NcclContext::operator=(NcclContext&&) noexcept = default;

int NcclContext::rank() const { return state_->rank; }
int NcclContext::size() const { return state_->size; }
int NcclContext::device() const { return state_->device; }
CUstream_st* NcclContext::stream() const { return state_->stream.get(); }
CUstream_st* NcclContext::compute_stream() const { return state_->compute_stream; }

CommRequest NcclContext::all_reduce(const void* in, void* out, size_t count, ElementType type, ReduceOp op,
                                    Completion mode) {
  DeviceGuard guard(state_->device);
  State& st = *state_;
  return st.run(mode, "all_reduce", "all_reduce_async", {in, out}, [&] {
    return count > 0 ? ncclAllReduce(in, out, count, nccl_type(type), nccl_op(op), st.comm.get(), st.stream.get())
                     : ncclSuccess;
  });
}

CommRequest NcclContext::reduce_scatter(const void* in, void* out, size_t block, ElementType type, ReduceOp op,
                                        Completion mode) {
  DeviceGuard guard(state_->device);
  State& st = *state_;
  return st.run(mode, "reduce_scatter", "reduce_scatter_async", {in, out}, [&] {
    return block > 0
               ? ncclReduceScatter(in, out, block, nccl_type(type), nccl_op(op), st.comm.get(), st.stream.get())
               : ncclSuccess;
  });
}

CommRequest NcclContext::all_gather(const void* in, void* out, size_t block, ElementType type, Completion mode) {
  DeviceGuard guard(state_->device);
  State& st = *state_;
  return st.run(mode, "all_gather", "all_gather_async", {in, out}, [&] {
    return block > 0 ? ncclAllGather(in, out, block, nccl_type(type), st.comm.get(), st.stream.get()) : ncclSuccess;
  });
}

CommRequest NcclContext::all_gather_variable(const void* in, void* out, const size_t* counts, ElementType type,
                                             Completion mode) {
  DeviceGuard guard(state_->device);
  State& st = *state_;
  return st.run(mode, "all_gather_variable", "all_gather_variable_async", {in, out}, [&] {
    NcclGroup group;  // one broadcast per rank, fused
    size_t displ = 0;
    for (int root = 0; root < st.size; ++root) {
      if (counts[root] > 0) {
        void* dst = at(out, displ, type);
        const void* src = root == st.rank ? in : dst;
        TRLHPC_CHECK_NCCL(
            ncclBroadcast(src, dst, counts[root], nccl_type(type), root, st.comm.get(), st.stream.get()));
      }
      displ += counts[root];
    }
    return group.end();
  });
}

CommRequest NcclContext::all_to_all(const void* in, void* out, size_t block, ElementType type, Completion mode) {
  DeviceGuard guard(state_->device);
  State& st = *state_;
  return st.run(mode, "all_to_all", "all_to_all_async", {in, out}, [&] {
    if (block == 0) return ncclSuccess;
    NcclGroup group;
    for (int peer = 0; peer < st.size; ++peer) {
      const size_t base = static_cast<size_t>(peer) * block;
      TRLHPC_CHECK_NCCL(ncclSend(at(in, base, type), block, nccl_type(type), peer, st.comm.get(), st.stream.get()));
      TRLHPC_CHECK_NCCL(ncclRecv(at(out, base, type), block, nccl_type(type), peer, st.comm.get(), st.stream.get()));
    }
    return group.end();
  });
}

CommRequest NcclContext::broadcast(void* data, size_t count, ElementType type, int root, Completion mode) {
  DeviceGuard guard(state_->device);
  State& st = *state_;
  return st.run(mode, "broadcast", "broadcast_async", {data}, [&] {
    return count > 0 ? ncclBroadcast(data, data, count, nccl_type(type), root, st.comm.get(), st.stream.get())
                     : ncclSuccess;
  });
}

CommRequest NcclContext::send_recv(const void* send, size_t send_count, int dest, void* recv, size_t recv_count,
                                   int source, ElementType type, Completion mode) {
  DeviceGuard guard(state_->device);
  State& st = *state_;
  return st.run(mode, "send_recv", "send_recv_async", {send, recv}, [&] {
    NcclGroup group;  // send and receive progress together, so a ring of them cannot deadlock
    if (send_count > 0)
      TRLHPC_CHECK_NCCL(ncclSend(send, send_count, nccl_type(type), dest, st.comm.get(), st.stream.get()));
    if (recv_count > 0)
      TRLHPC_CHECK_NCCL(ncclRecv(recv, recv_count, nccl_type(type), source, st.comm.get(), st.stream.get()));
    return group.end();
  });
}

void NcclContext::barrier() {
  DeviceGuard guard(state_->device);
  State& st = *state_;
  // An all-reduce of one element completes only once every rank has joined it.
  st.run(Completion::Blocking, "barrier", "barrier", {}, [&] {
    return ncclAllReduce(st.scratch.get(), st.scratch.get(), 1, ncclFloat32, ncclSum, st.comm.get(), st.stream.get());
  });
}

}  // namespace trlhpc
