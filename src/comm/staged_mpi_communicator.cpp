// StagedMpiCommunicator (include/trlhpc/comm/staged_mpi_communicator.hpp). CUDA builds only: the
// whole file is empty otherwise. Compiled here; not yet run on a GPU.
#ifdef TRLHPC_HAVE_CUDA
#include "trlhpc/comm/staged_mpi_communicator.hpp"

#include <functional>
#include <memory>
#include <numeric>
#include <utility>

namespace trlhpc {

// The two pinned buffers of one operation: `in` holds the downloaded input, `out` receives MPI's result
// (the same buffer for in-place operations: `out` stays empty and `result()` is `in`).
struct StagedMpiCommunicator::Staged {
  PinnedBuffer in, out;
  void* input() const { return in.data(); }
  void* result() const { return out.data() ? out.data() : in.data(); }
};

namespace {

// An async staged operation: the MPI request, then the upload of the result once it completes. The
// pinned buffers stay leased until then.
class StagedPending final : public PendingOperation {
 public:
  StagedPending(CommRequest mpi, std::function<void()> upload) : mpi_(std::move(mpi)), upload_(std::move(upload)) {}
  bool test() override {
    if (!mpi_.test()) return false;
    finish();
    return true;
  }
  void wait() override {
    mpi_.wait();
    finish();
  }

 private:
  void finish() {
    if (upload_) std::exchange(upload_, nullptr)();
  }
  CommRequest mpi_;
  std::function<void()> upload_;  // null once run
};

}  // namespace

StagedMpiCommunicator::StagedMpiCommunicator(MPI_Comm comm, int device, CUstream_st* compute_stream,
                                             MpiCommunicatorOptions options, CollectiveLabel label)
    : mpi_(comm, std::move(options), std::move(label)), staging_(device, compute_stream) {}

StagedMpiCommunicator::Staged StagedMpiCommunicator::stage_in(const void* in, size_t in_bytes, size_t out_bytes) {
  Staged s;
  s.in = staging_.acquire(in_bytes);
  if (in) staging_.download(s.in.data(), in, in_bytes);
  if (out_bytes > 0) s.out = staging_.acquire(out_bytes);
  return s;
}

CommRequest StagedMpiCommunicator::stage_out(Staged staged, CommRequest mpi, void* device_out, size_t out_bytes,
                                             Completion mode) {
  if (mode == Completion::Blocking) {
    mpi.wait();  // already complete: blocking MPI calls return complete requests
    if (device_out) staging_.upload(device_out, staged.result(), out_bytes);
    return {};
  }
  auto buffers = std::make_shared<Staged>(std::move(staged));
  auto upload = [this, buffers, device_out, out_bytes] {
    if (device_out) staging_.upload(device_out, buffers->result(), out_bytes);
  };
  return CommRequest(std::make_unique<StagedPending>(std::move(mpi), std::move(upload)));
}

CommRequest StagedMpiCommunicator::do_all_reduce(const void* in, void* out, size_t count, ElementType type,
                                                 ReduceOp op, Completion mode) {
  const size_t bytes = count * element_size(type);
  Staged s = stage_in(in, bytes, 0);  // reduced in place in the pinned buffer
  CommRequest mpi = mpi_.do_all_reduce(s.input(), s.input(), count, type, op, mode);
  return stage_out(std::move(s), std::move(mpi), out, bytes, mode);
}

CommRequest StagedMpiCommunicator::do_reduce_scatter(const void* in, void* out, size_t block, ElementType type,
                                                     ReduceOp op, Completion mode) {
  const size_t bytes = block * element_size(type);
  Staged s = stage_in(in, bytes * static_cast<size_t>(size()), bytes);
  CommRequest mpi = mpi_.do_reduce_scatter(s.input(), s.result(), block, type, op, mode);
  return stage_out(std::move(s), std::move(mpi), out, bytes, mode);
}

CommRequest StagedMpiCommunicator::do_all_gather(const void* in, void* out, size_t block, ElementType type,
                                                 Completion mode) {
  const size_t bytes = block * element_size(type);
  const size_t total = bytes * static_cast<size_t>(size());
  Staged s = stage_in(in, bytes, total);
  CommRequest mpi = mpi_.do_all_gather(s.input(), s.result(), block, type, mode);
  return stage_out(std::move(s), std::move(mpi), out, total, mode);
}

CommRequest StagedMpiCommunicator::do_all_gather_variable(const void* in, void* out, const size_t* counts,
                                                          ElementType type, Completion mode) {
  const size_t element = element_size(type);
  const size_t total = std::accumulate(counts, counts + size(), size_t{0}) * element;
  Staged s = stage_in(in, counts[rank()] * element, total);
  CommRequest mpi = mpi_.do_all_gather_variable(s.input(), s.result(), counts, type, mode);
  return stage_out(std::move(s), std::move(mpi), out, total, mode);
}

CommRequest StagedMpiCommunicator::do_all_to_all(const void* in, void* out, size_t block, ElementType type,
                                                 Completion mode) {
  const size_t total = block * static_cast<size_t>(size()) * element_size(type);
  Staged s = stage_in(in, total, total);
  CommRequest mpi = mpi_.do_all_to_all(s.input(), s.result(), block, type, mode);
  return stage_out(std::move(s), std::move(mpi), out, total, mode);
}

CommRequest StagedMpiCommunicator::do_broadcast(void* data, size_t count, ElementType type, int root,
                                                Completion mode) {
  const size_t bytes = count * element_size(type);
  const bool is_root = root == rank();
  Staged s = stage_in(is_root ? data : nullptr, bytes, 0);  // only the root's bytes matter
  CommRequest mpi = mpi_.do_broadcast(s.input(), count, type, root, mode);
  return stage_out(std::move(s), std::move(mpi), is_root ? nullptr : data, bytes, mode);
}

CommRequest StagedMpiCommunicator::do_send_recv(const void* send, size_t send_count, int dest, void* recv,
                                                size_t recv_count, int source, ElementType type, Completion mode) {
  const size_t element = element_size(type);
  Staged s = stage_in(send, send_count * element, recv_count * element);
  CommRequest mpi = mpi_.do_send_recv(s.input(), send_count, dest, s.result(), recv_count, source, type, mode);
  return stage_out(std::move(s), std::move(mpi), recv, recv_count * element, mode);
}

}  // namespace trlhpc
#endif  // TRLHPC_HAVE_CUDA
