#include "trlhpc/comm/mpi_communicator.hpp"
#include "trlhpc/runtime/mpi_check.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

namespace trlhpc {

namespace {

MPI_Datatype mpi_datatype(ElementType type) {
  switch (type) {
    case ElementType::F32: return MPI_FLOAT;
    case ElementType::F64: return MPI_DOUBLE;
    case ElementType::I32: return MPI_INT32_T;
    case ElementType::I64: return MPI_INT64_T;
    case ElementType::U8: return MPI_UINT8_T;
    case ElementType::BF16: return MPI_UINT16_T;  // bit patterns; reductions through MpiBf16Ops
  }
  return MPI_DATATYPE_NULL;
}

// Point-to-point tags; collectives match in a separate context, so these cannot collide with them.
constexpr int kAllToAllTag = 7101;
constexpr int kSendRecvTag = 7102;

// The MPI requests of one operation plus the arrays MPI reads until it completes.
class MpiPending final : public PendingOperation, public ProgressTarget {
 public:
  std::vector<MPI_Request> requests;
  std::vector<int> counts, displs;  // (size) MPI_Iallgatherv arguments
  CollectiveWatchdog* watchdog = nullptr;  // null: no deadline (MPI_Waitall)
  uint64_t index = 0;                      // the watchdog's number of this operation
  const char* name = "";                   // for the timeout report
  AsyncWaitStats* wait_stats = nullptr;    // set for async operations: wait() adds its blocked time
  MpiProgressThread* progress = nullptr;   // the communicator's progress thread, or null
  bool watched = false;                    // the progress thread tests `requests` (async, until wait())

  ~MpiPending() override {
    if (watched) progress->forget(*this);
  }
  void watch() {
    watched = progress != nullptr;
    if (watched) progress->watch(*this);
  }
  int test_requests(bool* complete) noexcept override {
    int flag = 0;
    const int rc = MPI_Testall(static_cast<int>(requests.size()), requests.data(), &flag, MPI_STATUSES_IGNORE);
    *complete = rc == MPI_SUCCESS && flag != 0;
    return rc;
  }
  bool test() override {
    bool complete = false;
    if (watched)
      TRLHPC_CHECK_MPI(progress->test(*this, &complete));  // serialised with the thread's tests
    else
      TRLHPC_CHECK_MPI(test_requests(&complete));
    return complete;
  }
  void wait() override {
    std::optional<MpiProgressThread::OwnerWait> owner_waits;  // the thread keeps out of MPI meanwhile
    if (progress) owner_waits.emplace(*progress);
    if (watched) {  // blocking MPI calls below must not race the thread's tests
      progress->forget(*this);
      watched = false;
    }
    const auto start = std::chrono::steady_clock::now();
    double before_peers = 0;
    if (watchdog == nullptr)
      TRLHPC_CHECK_MPI(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE));
    else
      before_peers = watchdog->wait(index, name, [this] { return test(); });
    if (wait_stats) {
      wait_stats->seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      wait_stats->before_peers += before_peers;
      ++wait_stats->waits;
    }
  }
};

// Collects the calls of one operation and announces it to the watchdog. Without a watchdog, blocking
// mode makes blocking collective calls directly (MPI's tuned blocking algorithms are faster than its
// non-blocking ones) and waits for any point-to-point requests before returning. With one, every call is
// non-blocking and blocking mode waits with the deadline before returning. Async mode hands every
// request to the CommRequest, and to the progress thread when there is one.
class Issue {
 public:
  Issue(Completion mode, CollectiveWatchdog& watchdog, const char* blocking_name, const char* async_name)
      : async_(mode == Completion::Async),
        nonblocking_(async_ || watchdog.enabled()),
        pending_(std::make_unique<MpiPending>()) {
    if (!watchdog.enabled()) return;
    pending_->watchdog = &watchdog;
    pending_->name = async_ ? async_name : blocking_name;
    pending_->index = watchdog.arrive();
  }
  bool nonblocking() const { return nonblocking_; }  // use MPI's I-calls
  MpiPending& pending() { return *pending_; }
  MPI_Request* next_request() {
    pending_->requests.push_back(MPI_REQUEST_NULL);
    return &pending_->requests.back();
  }
  // The progress thread watches async operations only (a blocking one is waited right here, and the
  // thread pauses while it is); wait_stats count async operations only.
  CommRequest finish(MpiProgressThread* progress = nullptr, AsyncWaitStats* wait_stats = nullptr) {
    if (pending_->requests.empty()) return {};
    pending_->progress = progress;
    if (async_) {
      pending_->wait_stats = wait_stats;
      pending_->watch();  // last: every request exists before the thread may test them
      return CommRequest(std::move(pending_));
    }
    pending_->wait();
    return {};
  }

 private:
  bool async_;
  bool nonblocking_;
  std::unique_ptr<MpiPending> pending_;
};

// Calls fn(offset, n) for consecutive chunks of at most `limit` elements covering [0, count).
template <class Fn>
void for_each_chunk(size_t count, size_t limit, Fn&& fn) {
  for (size_t offset = 0; offset < count; offset += limit) fn(offset, std::min(limit, count - offset));
}

const char* at(const void* base, size_t elements, size_t element_bytes) {
  return static_cast<const char*>(base) + elements * element_bytes;
}
char* at(void* base, size_t elements, size_t element_bytes) {
  return static_cast<char*>(base) + elements * element_bytes;
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, MpiCommunicatorOptions options, CollectiveLabel label)
    : comm_(comm),
      max_elements_per_call_(std::clamp<size_t>(options.max_elements_per_call, 1, INT_MAX)),
      progress_(std::move(options.progress)) {
  TRLHPC_CHECK_MPI(MPI_Comm_rank(comm_, &rank_));
  TRLHPC_CHECK_MPI(MPI_Comm_size(comm_, &size_));
  watchdog_ = std::make_unique<CollectiveWatchdog>(comm_, options.timeout_seconds, std::move(label));
}

MPI_Op MpiCommunicator::mpi_op(ReduceOp op, ElementType type) const {
  if (type == ElementType::BF16) return bf16_ops_.get(op);
  switch (op) {
    case ReduceOp::Sum: return MPI_SUM;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
  }
  return MPI_OP_NULL;
}

void MpiCommunicator::barrier() {
  Issue issue(Completion::Blocking, *watchdog_, "barrier", "barrier");
  if (issue.nonblocking())
    TRLHPC_CHECK_MPI(MPI_Ibarrier(comm_, issue.next_request()));
  else
    TRLHPC_CHECK_MPI(MPI_Barrier(comm_));
  issue.finish(progress_.get(), async_wait_.get());
}

CommRequest MpiCommunicator::do_all_reduce(const void* in, void* out, size_t count, ElementType type, ReduceOp op,
                                           Completion mode) {
  Issue issue(mode, *watchdog_, "all_reduce", "all_reduce_async");
  const size_t bytes = element_size(type);
  const MPI_Datatype dt = mpi_datatype(type);
  const MPI_Op mop = mpi_op(op, type);
  for_each_chunk(count, max_elements_per_call_, [&](size_t offset, size_t n) {
    const void* send = in == out ? MPI_IN_PLACE : at(in, offset, bytes);
    void* recv = at(out, offset, bytes);
    if (issue.nonblocking())
      TRLHPC_CHECK_MPI(MPI_Iallreduce(send, recv, static_cast<int>(n), dt, mop, comm_, issue.next_request()));
    else
      TRLHPC_CHECK_MPI(MPI_Allreduce(send, recv, static_cast<int>(n), dt, mop, comm_));
  });
  return issue.finish(progress_.get(), async_wait_.get());
}

CommRequest MpiCommunicator::do_reduce_scatter(const void* in, void* out, size_t block, ElementType type,
                                               ReduceOp op, Completion mode) {
  Issue issue(mode, *watchdog_, "reduce_scatter", "reduce_scatter_async");
  const size_t bytes = element_size(type);
  const MPI_Datatype dt = mpi_datatype(type);
  const MPI_Op mop = mpi_op(op, type);
  if (block == 0) return issue.finish(progress_.get(), async_wait_.get());
  if (block * static_cast<size_t>(size_) <= max_elements_per_call_) {
    const int n = static_cast<int>(block);
    if (issue.nonblocking())
      TRLHPC_CHECK_MPI(MPI_Ireduce_scatter_block(in, out, n, dt, mop, comm_, issue.next_request()));
    else
      TRLHPC_CHECK_MPI(MPI_Reduce_scatter_block(in, out, n, dt, mop, comm_));
    return issue.finish(progress_.get(), async_wait_.get());
  }
  // Split path: rank `root`'s block is reduced onto it, chunk by chunk.
  for (int root = 0; root < size_; ++root) {
    const size_t base = static_cast<size_t>(root) * block;
    for_each_chunk(block, max_elements_per_call_, [&](size_t offset, size_t n) {
      const void* send = at(in, base + offset, bytes);
      void* recv = root == rank_ ? at(out, offset, bytes) : nullptr;
      if (issue.nonblocking())
        TRLHPC_CHECK_MPI(MPI_Ireduce(send, recv, static_cast<int>(n), dt, mop, root, comm_, issue.next_request()));
      else
        TRLHPC_CHECK_MPI(MPI_Reduce(send, recv, static_cast<int>(n), dt, mop, root, comm_));
    });
  }
  return issue.finish(progress_.get(), async_wait_.get());
}

CommRequest MpiCommunicator::do_all_gather(const void* in, void* out, size_t block, ElementType type,
                                           Completion mode) {
  std::vector<size_t> counts(static_cast<size_t>(size_), block);  // (size)
  return gather(in, out, counts.data(), type, mode, "all_gather", "all_gather_async");
}

CommRequest MpiCommunicator::do_all_gather_variable(const void* in, void* out, const size_t* counts,
                                                    ElementType type, Completion mode) {
  return gather(in, out, counts, type, mode, "all_gather_variable", "all_gather_variable_async");
}

CommRequest MpiCommunicator::gather(const void* in, void* out, const size_t* counts, ElementType type,
                                    Completion mode, const char* blocking_name, const char* async_name) {
  Issue issue(mode, *watchdog_, blocking_name, async_name);
  const size_t bytes = element_size(type);
  const MPI_Datatype dt = mpi_datatype(type);
  std::vector<size_t> displs(static_cast<size_t>(size_));  // (size) element offset of each rank's part
  size_t total = 0;
  for (int r = 0; r < size_; ++r) displs[static_cast<size_t>(r)] = total, total += counts[r];
  if (total == 0) return issue.finish(progress_.get(), async_wait_.get());
  if (total <= max_elements_per_call_) {
    // All counts equal -> MPI_Allgather (tuned ring/Bruck); otherwise MPI_Allgatherv.
    const bool equal = std::all_of(counts, counts + size_, [&](size_t c) { return c == counts[0]; });
    const int mine = static_cast<int>(counts[rank_]);
    if (equal) {
      if (issue.nonblocking())
        TRLHPC_CHECK_MPI(MPI_Iallgather(in, mine, dt, out, mine, dt, comm_, issue.next_request()));
      else
        TRLHPC_CHECK_MPI(MPI_Allgather(in, mine, dt, out, mine, dt, comm_));
      return issue.finish(progress_.get(), async_wait_.get());
    }
    auto& p = issue.pending();
    p.counts.assign(counts, counts + size_);
    p.displs.assign(displs.begin(), displs.end());
    if (issue.nonblocking())
      TRLHPC_CHECK_MPI(MPI_Iallgatherv(in, mine, dt, out, p.counts.data(), p.displs.data(), dt, comm_,
                                       issue.next_request()));
    else
      TRLHPC_CHECK_MPI(MPI_Allgatherv(in, mine, dt, out, p.counts.data(), p.displs.data(), dt, comm_));
    return issue.finish(progress_.get(), async_wait_.get());
  }
  // Split path: copy our own part, then every rank broadcasts its part in chunks.
  void* own = at(out, displs[static_cast<size_t>(rank_)], bytes);
  if (own != in && counts[rank_] > 0) std::memmove(own, in, counts[rank_] * bytes);  // empty parts may be null
  for (int root = 0; root < size_; ++root) {
    for_each_chunk(counts[root], max_elements_per_call_, [&](size_t offset, size_t n) {
      void* data = at(out, displs[static_cast<size_t>(root)] + offset, bytes);
      if (issue.nonblocking())
        TRLHPC_CHECK_MPI(MPI_Ibcast(data, static_cast<int>(n), dt, root, comm_, issue.next_request()));
      else
        TRLHPC_CHECK_MPI(MPI_Bcast(data, static_cast<int>(n), dt, root, comm_));
    });
  }
  return issue.finish(progress_.get(), async_wait_.get());
}

CommRequest MpiCommunicator::do_all_to_all(const void* in, void* out, size_t block, ElementType type,
                                           Completion mode) {
  Issue issue(mode, *watchdog_, "all_to_all", "all_to_all_async");
  const size_t bytes = element_size(type);
  const MPI_Datatype dt = mpi_datatype(type);
  if (block == 0) return issue.finish(progress_.get(), async_wait_.get());
  if (block * static_cast<size_t>(size_) <= max_elements_per_call_) {
    const int n = static_cast<int>(block);
    if (issue.nonblocking())
      TRLHPC_CHECK_MPI(MPI_Ialltoall(in, n, dt, out, n, dt, comm_, issue.next_request()));
    else
      TRLHPC_CHECK_MPI(MPI_Alltoall(in, n, dt, out, n, dt, comm_));
    return issue.finish(progress_.get(), async_wait_.get());
  }
  // Split path: block p goes to rank p as chunked messages (matched in order per peer).
  std::memcpy(at(out, static_cast<size_t>(rank_) * block, bytes), at(in, static_cast<size_t>(rank_) * block, bytes),
              block * bytes);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    const size_t base = static_cast<size_t>(peer) * block;
    for_each_chunk(block, max_elements_per_call_, [&](size_t offset, size_t n) {
      TRLHPC_CHECK_MPI(MPI_Irecv(at(out, base + offset, bytes), static_cast<int>(n), dt, peer, kAllToAllTag, comm_,
                                 issue.next_request()));
      TRLHPC_CHECK_MPI(MPI_Isend(at(in, base + offset, bytes), static_cast<int>(n), dt, peer, kAllToAllTag, comm_,
                                 issue.next_request()));
    });
  }
  return issue.finish(progress_.get(), async_wait_.get());
}

CommRequest MpiCommunicator::do_broadcast(void* data, size_t count, ElementType type, int root, Completion mode) {
  Issue issue(mode, *watchdog_, "broadcast", "broadcast_async");
  const size_t bytes = element_size(type);
  const MPI_Datatype dt = mpi_datatype(type);
  for_each_chunk(count, max_elements_per_call_, [&](size_t offset, size_t n) {
    if (issue.nonblocking())
      TRLHPC_CHECK_MPI(MPI_Ibcast(at(data, offset, bytes), static_cast<int>(n), dt, root, comm_, issue.next_request()));
    else
      TRLHPC_CHECK_MPI(MPI_Bcast(at(data, offset, bytes), static_cast<int>(n), dt, root, comm_));
  });
  return issue.finish(progress_.get(), async_wait_.get());
}

CommRequest MpiCommunicator::do_send_recv(const void* send, size_t send_count, int dest, void* recv,
                                          size_t recv_count, int source, ElementType type, Completion mode) {
  Issue issue(mode, *watchdog_, "send_recv", "send_recv_async");
  const size_t bytes = element_size(type);
  const MPI_Datatype dt = mpi_datatype(type);
  // Receives first so a peer's eager sends land directly in place.
  for_each_chunk(recv_count, max_elements_per_call_, [&](size_t offset, size_t n) {
    TRLHPC_CHECK_MPI(MPI_Irecv(at(recv, offset, bytes), static_cast<int>(n), dt, source, kSendRecvTag, comm_,
                               issue.next_request()));
  });
  for_each_chunk(send_count, max_elements_per_call_, [&](size_t offset, size_t n) {
    TRLHPC_CHECK_MPI(MPI_Isend(at(send, offset, bytes), static_cast<int>(n), dt, dest, kSendRecvTag, comm_,
                               issue.next_request()));
  });
  return issue.finish(progress_.get(), async_wait_.get());
}

}  // namespace trlhpc
