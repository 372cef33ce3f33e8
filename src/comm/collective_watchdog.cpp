#include "trlhpc/comm/collective_watchdog.hpp"

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "trlhpc/runtime/mpi_check.hpp"
#include "trlhpc/core/error.hpp"

namespace trlhpc {

namespace {

constexpr int kArrivalTag = 7201;

std::string rank_list(const std::vector<int>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) s.append(i ? "," : "").append(std::to_string(ranks[i]));
  return s + "]";
}

// World ranks (MPI_COMM_WORLD) of group ranks `ranks` of `comm`. Local calls only.
std::vector<int> world_ranks_of(MPI_Comm comm, const std::vector<int>& ranks) {
  std::vector<int> world(ranks.size(), MPI_UNDEFINED);
  if (ranks.empty()) return world;
  MPI_Group group = MPI_GROUP_NULL, world_group = MPI_GROUP_NULL;
  if (MPI_Comm_group(comm, &group) == MPI_SUCCESS && MPI_Comm_group(MPI_COMM_WORLD, &world_group) == MPI_SUCCESS)
    MPI_Group_translate_ranks(group, static_cast<int>(ranks.size()), ranks.data(), world_group, world.data());
  if (group != MPI_GROUP_NULL) MPI_Group_free(&group);
  if (world_group != MPI_GROUP_NULL) MPI_Group_free(&world_group);
  return world;
}

}  // namespace

ArrivalBook::ArrivalBook(int size, int self) : self_(self), notices_(static_cast<size_t>(size), 0) {}

bool ArrivalBook::arrived(int member, uint64_t index) const {
  return member == self_ ? entered_ >= index : notices_[static_cast<size_t>(member)] >= index;
}

bool ArrivalBook::all_arrived(uint64_t index) const {
  for (size_t p = 0; p < notices_.size(); ++p)
    if (static_cast<int>(p) != self_ && notices_[p] < index) return false;
  return true;
}

std::vector<int> ArrivalBook::not_arrived(uint64_t index) const {
  std::vector<int> missing;
  for (size_t p = 0; p < notices_.size(); ++p)
    if (static_cast<int>(p) != self_ && notices_[p] < index) missing.push_back(static_cast<int>(p));
  return missing;
}

double Backoff::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Backoff::pause(bool everyone_arrived) {
  // Spinning on MPI_Test* is what MPI's own blocking waits do (Open MPI yields inside them when
  // oversubscribed); an explicit sched_yield here measured 100x slower small collectives on a loaded
  // machine (the rank lost its time slice). So: spin while the wait is short or the operation is under
  // way (every member arrived: it needs our MPI calls to progress), sleep only while waiting for a
  // member that has not arrived.
  if (everyone_arrived) return;
  const double waited = elapsed_seconds();
  if (waited < 0.01) return;
  std::this_thread::sleep_for(std::chrono::microseconds(waited < 1.0 ? 100 : 1000));
}

CollectiveWatchdog::CollectiveWatchdog(MPI_Comm comm, double timeout_seconds, CollectiveLabel label)
    : comm_(comm),
      timeout_seconds_(timeout_seconds > 0 ? timeout_seconds : 0),
      label_(std::move(label)),
      book_(1, 0) {
  TRLHPC_CHECK_MPI(MPI_Comm_rank(comm_, &rank_));
  TRLHPC_CHECK_MPI(MPI_Comm_size(comm_, &size_));
  book_ = ArrivalBook(size_, rank_);
  if (!enabled()) return;
  notices_ = MpiComm::duplicate(comm_);
  TRLHPC_CHECK_MPI(MPI_Recv_init(nullptr, 0, MPI_BYTE, MPI_ANY_SOURCE, kArrivalTag, notices_.get(), &receive_));
  TRLHPC_CHECK_MPI(MPI_Start(&receive_));
}

CollectiveWatchdog::~CollectiveWatchdog() {
  if (receive_ == MPI_REQUEST_NULL) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  // Every notice sent to this rank must be received before notices_ is freed: one still in flight
  // would be delivered to the next communicator that reuses the id (Open MPI 4.1's ob1 crashed in
  // MPI_Comm_dup on that, in a test creating many groups). Each rank announces how many notices it
  // sent to each peer (one per operation it issued), and receives until it has them all.
  uint64_t sent = book_.entered();
  std::vector<uint64_t> announced(static_cast<size_t>(size_));
  if (MPI_Allgather(&sent, 1, MPI_UINT64_T, announced.data(), 1, MPI_UINT64_T, notices_.get()) == MPI_SUCCESS) {
    for (int peer = 0; peer < size_; ++peer)
      while (peer != rank_ && book_.received(peer) < announced[static_cast<size_t>(peer)]) {
        MPI_Status status;
        if (MPI_Wait(&receive_, &status) != MPI_SUCCESS) break;
        book_.record_notice(status.MPI_SOURCE);
        MPI_Start(&receive_);
      }
  }
  MPI_Cancel(&receive_);
  MPI_Wait(&receive_, MPI_STATUS_IGNORE);
  MPI_Request_free(&receive_);
}

uint64_t CollectiveWatchdog::arrive() {
  if (!enabled()) return 0;
  const uint64_t index = book_.enter();
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    // Zero bytes: no buffer to keep alive, so the request can be released at once (it still completes).
    MPI_Request request = MPI_REQUEST_NULL;
    TRLHPC_CHECK_MPI(MPI_Isend(nullptr, 0, MPI_BYTE, peer, kArrivalTag, notices_.get(), &request));
    TRLHPC_CHECK_MPI(MPI_Request_free(&request));
  }
  drain_notices();
  return index;
}

void CollectiveWatchdog::drain_notices() {
  if (receive_ == MPI_REQUEST_NULL) return;  // disabled: no notices
  for (;;) {
    int flag = 0;
    MPI_Status status;
    TRLHPC_CHECK_MPI(MPI_Test(&receive_, &flag, &status));
    if (!flag) return;
    book_.record_notice(status.MPI_SOURCE);
    TRLHPC_CHECK_MPI(MPI_Start(&receive_));
  }
}

std::vector<int> CollectiveWatchdog::not_arrived_world_ranks(uint64_t index) {
  if (enabled()) drain_notices();
  return world_ranks_of(comm_, book_.not_arrived(index));
}

std::vector<int> CollectiveWatchdog::member_world_ranks() const {
  std::vector<int> all(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) all[static_cast<size_t>(r)] = r;
  return world_ranks_of(comm_, all);
}

std::string CollectiveWatchdog::report(uint64_t index, const char* collective, double waited_seconds) {
  const std::vector<int> missing = not_arrived_world_ranks(index);
  const std::string phase = label_.phase && !label_.phase->text().empty() ? label_.phase->text() : "no phase set";
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(1);
  os << "collective timeout: " << collective << " (#" << index << " on this communicator) in group "
     << label_.group << " (world ranks " << rank_list(member_world_ranks()) << ") during " << phase
     << ": waited " << waited_seconds << " s (--ddp_timeout ";
  os.precision(6);
  os.unsetf(std::ios::fixed);
  os << timeout_seconds_ << "); ";
  if (missing.empty())
    os << "every member arrived, so one stopped inside the collective or the network failed (which one is "
          "unknown)";
  else
    os << "not arrived: world ranks " << rank_list(missing);
  os << "; aborting the job";
  return os.str();
}

void CollectiveWatchdog::expire(uint64_t index, const char* collective, double waited_seconds) {
  std::string line;
  try {
    line = report(index, collective, waited_seconds);
  } catch (...) {
    line = std::string("collective timeout: ") + collective + " in group " + label_.group + "; aborting the job";
  }
  std::fprintf(stderr, "trlhpc: failure: %s%s\n", rank_prefix().c_str(), line.c_str());
  std::fflush(stderr);
  if (abort_hook_) {
    try {
      abort_hook_();
    } catch (...) {
      // Aborting anyway.
    }
  }
  MPI_Abort(comm_, 2);
  std::_Exit(2);  // MPI_Abort does not return; this is for an MPI that does
}

}  // namespace trlhpc
