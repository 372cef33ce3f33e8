#pragma once
// CollectiveWatchdog: waits on a communicator's collectives with a deadline (`--ddp_timeout`) and, when
// one expires, names what hung and ends the whole job (exit 2), so a stopped or wedged rank cannot leave
// the others waiting forever.
//
// What a timing-out rank reports (one line on stderr, then MPI_Abort(comm, 2)):
//   trlhpc: failure: [rank 1 @ node07] collective timeout: all_reduce (#57 on this communicator) in group
//   tp (world ranks [0,1,2,3]) during step 12: waited 20.0 s (--ddp_timeout 20); not arrived: world
//   ranks [3]; aborting the job
//
// Who has not arrived. MPI's non-blocking collectives cannot say which member is missing, so each rank
// announces its arrival itself: when it issues collective #k on a communicator it sends a zero-byte
// message to every other member on a private duplicate of that communicator (so the notices can never
// match the collectives' own traffic). Messages between two ranks on one communicator are
// non-overtaking, so the number of notices received from member p is exactly the number of collectives p
// has issued there; a rank stuck in #k names the members whose count is below k (ArrivalBook). Notices
// are drained (one persistent any-source receive) at every arrival and while waiting, so they never pile
// up. Why this and not something cheaper:
//   - a notice only to one monitor rank: when the monitor is the rank that stopped, nobody can name it;
//   - notices only after a long wait: a member that finished #k early (a broadcast root, an eager send)
//     and moved on would never announce itself and would be named wrongly;
//   - one-sided reads of a counter (MPI_Get): some transports need the target to progress, so the
//     diagnosis itself could hang.
// Cost: (size - 1) zero-byte eager sends and as many receive completions per collective per rank, and
// Open MPI's non-blocking collective algorithms instead of its tuned blocking ones. Measured on the
// development VM (bench/RESULTS.md, "Hang watchdog cost"): about +1 us per collective on 2 ranks, +5-10 us
// on 4 ranks oversubscribed on 2 cores; above ~32 KB within run-to-run noise. A timeout of 0 (or less)
// turns the watchdog off entirely: no duplicate communicator, no notices, MPI's blocking collectives.
//
// If every member has arrived and the collective still does not finish, the report says so (a member
// stopped inside the collective, or the network failed) instead of naming a rank: that is all a rank can
// know. The notices are diagnostics only; nothing's correctness depends on them.
//
// Waiting (Backoff): MPI_Test* in a loop, spinning as MPI's own blocking waits do, for the first 10 ms
// and whenever every member has arrived (Open MPI progresses a non-blocking collective only inside MPI
// calls, so the operation under way needs them). Only while some member has not even arrived and the
// wait is over 10 ms does the rank sleep between polls: 100 us, 1 ms after 1 s, so a rank waiting for a
// straggler (another rank's checkpoint I/O, a hung rank) does not burn a core. (An explicit sched_yield
// between polls was tried first: on a loaded machine it made small collectives 100x slower.)
//
// The phase label ("step 12", "evaluation at step 12", ...) is a PhaseLabel shared by every
// communicator of one ProcessGroups (ProcessGroups::set_phase); it is read only when a report is written.
// Single-threaded like the communicators: set it from the thread that issues the collectives.
//
// C++17 on purpose: src/comm/nccl_context.cu (nvcc, C++17) uses it too.
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trlhpc/runtime/mpi_comm.hpp"

namespace trlhpc {

// Hugging Face's and PyTorch's default (--ddp_timeout 1800): 30 minutes for one collective.
constexpr double kDefaultCollectiveTimeoutSeconds = 1800;

// What the job is doing now, for timeout reports. Owned by ProcessGroups, shared with its communicators.
class PhaseLabel {
 public:
  void set(std::string text) { text_ = std::move(text); }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// How a communicator names itself in a timeout report.
struct CollectiveLabel {
  std::string group = "unnamed";            // a GroupKind name (tp, fsdp, loss, world, ...) or "unnamed"
  std::shared_ptr<const PhaseLabel> phase;  // null or empty text: "no phase set"
};

// Arrival bookkeeping of one communicator, without MPI (unit-tested): this rank's collective count and
// the number of arrival notices received from each member.
class ArrivalBook {
 public:
  ArrivalBook(int size, int self);
  uint64_t enter() { return ++entered_; }  // index (1-based) of the collective this rank now issues
  uint64_t entered() const { return entered_; }
  void record_notice(int member) { ++notices_[static_cast<size_t>(member)]; }
  uint64_t received(int member) const { return notices_[static_cast<size_t>(member)]; }
  bool arrived(int member, uint64_t index) const;
  bool all_arrived(uint64_t index) const;
  // (ascending) group ranks other than self whose notice for collective `index` has not come.
  std::vector<int> not_arrived(uint64_t index) const;

 private:
  int self_;
  uint64_t entered_ = 0;
  std::vector<uint64_t> notices_;  // (size) notices received per member; own slot unused
};

// Poll pacing of one wait (see the header comment). pause() is called between two unsuccessful tests;
// everyone_arrived: every member's arrival notice for the operation has come.
class Backoff {
 public:
  Backoff() : start_(std::chrono::steady_clock::now()) {}
  double elapsed_seconds() const;
  void pause(bool everyone_arrived);

 private:
  std::chrono::steady_clock::time_point start_;
};

class CollectiveWatchdog {
 public:
  // Collective over `comm` when timeout_seconds > 0 (duplicates it for the notices); otherwise local and
  // disabled. `comm` must outlive the watchdog.
  CollectiveWatchdog(MPI_Comm comm, double timeout_seconds, CollectiveLabel label);
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  bool enabled() const { return timeout_seconds_ > 0; }
  double timeout_seconds() const { return timeout_seconds_; }
  const CollectiveLabel& label() const { return label_; }
  // Runs before MPI_Abort when a wait expires (the NCCL backend aborts its communicator there).
  void set_abort_hook(std::function<void()> hook) { abort_hook_ = std::move(hook); }

  // This rank issues its next collective: notifies the other members, returns the collective's index.
  // Returns 0 (and sends nothing) when disabled.
  uint64_t arrive();
  // Waits until done() returns true, polling with Backoff. Past the timeout (when enabled): reports
  // `collective` (index from arrive()) and aborts the job; disabled, it waits forever.
  // Returns the seconds of the wait spent before every member's arrival notice had come (time lost to
  // load imbalance between ranks, not to the transfer; 0 when disabled or never observed).
  template <class Done>
  double wait(uint64_t index, const char* collective, Done&& done) {
    Backoff backoff;
    double before_everyone = 0;
    bool everyone = !enabled();
    while (!done()) {
      drain_notices();
      const double waited = backoff.elapsed_seconds();
      if (!everyone && book_.all_arrived(index)) everyone = true, before_everyone = waited;
      if (enabled() && waited > timeout_seconds_) expire(index, collective, waited);
      backoff.pause(book_.all_arrived(index));
    }
    return before_everyone;
  }

  // Diagnostics (also what the report uses): receives pending notices, then lists the world ranks of the
  // members whose notice for collective `index` has not come yet.
  std::vector<int> not_arrived_world_ranks(uint64_t index);
  uint64_t entered() const { return book_.entered(); }
  std::vector<int> member_world_ranks() const;  // (size) index = rank in the communicator

  // The report line (without the "trlhpc: failure: " prefix). Public for tests.
  std::string report(uint64_t index, const char* collective, double waited_seconds);

 private:
  void drain_notices();
  [[noreturn]] void expire(uint64_t index, const char* collective, double waited_seconds);

  MPI_Comm comm_;
  double timeout_seconds_;
  CollectiveLabel label_;
  int rank_ = 0;
  int size_ = 1;
  ArrivalBook book_;
  MpiComm notices_;                          // duplicate of comm_ carrying only arrival notices
  MPI_Request receive_ = MPI_REQUEST_NULL;   // persistent any-source receive of one notice
  std::function<void()> abort_hook_;
};

}  // namespace trlhpc
