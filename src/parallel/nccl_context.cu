// NcclContext: NCCL collectives on one CUDA stream (see include/trlhpc/parallel/nccl_context.hpp).
// Host code only (no kernels); a .cu file so that it is compiled, and NCCL linked, in CUDA builds only.
#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>

#include "cuda_raii.cuh"
#include "trlhpc/core/cuda_check.hpp"
#include "trlhpc/parallel/nccl_context.hpp"

namespace trlhpc {

namespace {

using cuda::CudaEvent;
using cuda::CudaStream;
using cuda::DeviceGuard;

class NcclComm {
 public:
  NcclComm(int size, const ncclUniqueId& id, int rank) { TRLHPC_CHECK_NCCL(ncclCommInitRank(&comm_, size, id, rank)); }
  ~NcclComm() {
    if (comm_) ncclCommDestroy(comm_);
  }
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  ncclComm_t get() const { return comm_; }

 private:
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

// Completion of everything enqueued on the stream before construction.
class NcclPending final : public PendingOperation {
 public:
  NcclPending(int device, cudaStream_t stream) : device_(device) {
    TRLHPC_CHECK_CUDA(cudaEventRecord(event_.get(), stream));
  }
  bool test() override {
    DeviceGuard guard(device_);
    const cudaError_t rc = cudaEventQuery(event_.get());
    if (rc == cudaErrorNotReady) return false;
    TRLHPC_CHECK_CUDA(rc);
    return true;
  }
  void wait() override {
    DeviceGuard guard(device_);
    TRLHPC_CHECK_CUDA(cudaEventSynchronize(event_.get()));
  }

 private:
  int device_;
  CudaEvent event_;
};

// Brackets several NCCL calls so they run as one fused operation (required for send/recv pairs:
// without it a ring of blocking sends deadlocks).
// end() reports errors; the destructor only closes a group left open by an exception.
class NcclGroup {
 public:
  NcclGroup() { TRLHPC_CHECK_NCCL(ncclGroupStart()); }
  ~NcclGroup() {
    if (open_) ncclGroupEnd();
  }
  void end() {
    open_ = false;
    TRLHPC_CHECK_NCCL(ncclGroupEnd());
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

struct NcclContext::State {
  // The device must be current (NcclContext's constructor guards it).
  State(MPI_Comm mpi, int device_index)
      : device(device_index), rank(comm_rank(mpi)), size(comm_size(mpi)), comm(size, shared_unique_id(mpi, rank), rank) {}

  int device;
  int rank;
  int size;
  CudaStream stream;
  NcclComm comm;
  DeviceBuffer scratch{sizeof(float)};  // (1) float for barrier()

  // Blocking: wait for the stream. Async: hand an event recorded after the enqueued work to the caller.
  CommRequest finish(Completion mode) {
    if (mode == Completion::Async) return CommRequest(std::make_unique<NcclPending>(device, stream.get()));
    TRLHPC_CHECK_CUDA(cudaStreamSynchronize(stream.get()));
    return CommRequest();
  }
};

NcclContext::NcclContext(MPI_Comm comm, int device) {
  DeviceGuard guard(device);
  state_ = std::make_unique<State>(comm, device);
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

CommRequest NcclContext::all_reduce(const void* in, void* out, size_t count, ElementType type, ReduceOp op,
                                    Completion mode) {
  DeviceGuard guard(state_->device);
  if (count > 0)
    TRLHPC_CHECK_NCCL(ncclAllReduce(in, out, count, nccl_type(type), nccl_op(op), state_->comm.get(), state_->stream.get()));
  return state_->finish(mode);
}

CommRequest NcclContext::reduce_scatter(const void* in, void* out, size_t block, ElementType type, ReduceOp op,
                                        Completion mode) {
  DeviceGuard guard(state_->device);
  if (block > 0)
    TRLHPC_CHECK_NCCL(
        ncclReduceScatter(in, out, block, nccl_type(type), nccl_op(op), state_->comm.get(), state_->stream.get()));
  return state_->finish(mode);
}

CommRequest NcclContext::all_gather(const void* in, void* out, size_t block, ElementType type, Completion mode) {
  DeviceGuard guard(state_->device);
  if (block > 0)
    TRLHPC_CHECK_NCCL(ncclAllGather(in, out, block, nccl_type(type), state_->comm.get(), state_->stream.get()));
  return state_->finish(mode);
}

CommRequest NcclContext::all_gather_variable(const void* in, void* out, const size_t* counts, ElementType type,
                                             Completion mode) {
  DeviceGuard guard(state_->device);
  {
    NcclGroup group;  // one broadcast per rank, fused
    size_t displ = 0;
    for (int root = 0; root < state_->size; ++root) {
      if (counts[root] > 0) {
        void* dst = at(out, displ, type);
        const void* src = root == state_->rank ? in : dst;
        TRLHPC_CHECK_NCCL(ncclBroadcast(src, dst, counts[root], nccl_type(type), root, state_->comm.get(),
                                        state_->stream.get()));
      }
      displ += counts[root];
    }
    group.end();
  }
  return state_->finish(mode);
}

CommRequest NcclContext::all_to_all(const void* in, void* out, size_t block, ElementType type, Completion mode) {
  DeviceGuard guard(state_->device);
  if (block > 0) {
    NcclGroup group;
    for (int peer = 0; peer < state_->size; ++peer) {
      const size_t base = static_cast<size_t>(peer) * block;
      TRLHPC_CHECK_NCCL(ncclSend(at(in, base, type), block, nccl_type(type), peer, state_->comm.get(), state_->stream.get()));
      TRLHPC_CHECK_NCCL(ncclRecv(at(out, base, type), block, nccl_type(type), peer, state_->comm.get(), state_->stream.get()));
    }
    group.end();
  }
  return state_->finish(mode);
}

CommRequest NcclContext::broadcast(void* data, size_t count, ElementType type, int root, Completion mode) {
  DeviceGuard guard(state_->device);
  if (count > 0)
    TRLHPC_CHECK_NCCL(ncclBroadcast(data, data, count, nccl_type(type), root, state_->comm.get(), state_->stream.get()));
  return state_->finish(mode);
}

CommRequest NcclContext::send_recv(const void* send, size_t send_count, int dest, void* recv, size_t recv_count,
                                   int source, ElementType type, Completion mode) {
  DeviceGuard guard(state_->device);
  {
    NcclGroup group;  // send and receive progress together, so a ring of them cannot deadlock
    if (send_count > 0)
      TRLHPC_CHECK_NCCL(ncclSend(send, send_count, nccl_type(type), dest, state_->comm.get(), state_->stream.get()));
    if (recv_count > 0)
      TRLHPC_CHECK_NCCL(ncclRecv(recv, recv_count, nccl_type(type), source, state_->comm.get(), state_->stream.get()));
    group.end();
  }
  return state_->finish(mode);
}

void NcclContext::barrier() {
  DeviceGuard guard(state_->device);
  // An all-reduce of one element completes only once every rank has joined it.
  TRLHPC_CHECK_NCCL(ncclAllReduce(state_->scratch.get(), state_->scratch.get(), 1, ncclFloat32, ncclSum,
                                  state_->comm.get(), state_->stream.get()));
  TRLHPC_CHECK_CUDA(cudaStreamSynchronize(state_->stream.get()));
}

}  // namespace trlhpc
