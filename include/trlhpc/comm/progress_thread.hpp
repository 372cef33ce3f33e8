#pragma once
// MpiProgressThread: moves non-blocking MPI operations forward while the training thread computes.
//
// Why: Open MPI 4.1 has no asynchronous progress thread ("OMPI progress: no" in ompi_info). A
// non-blocking collective or a rendezvous-size message advances only inside MPI calls, so an
// all-reduce launched after a unit's backward mostly sits still until the trainer waits for it
// (bench/RESULTS.md, "Communication overlap (issue 17)"). This thread makes those MPI calls itself.
//
// What it does: while at least one watched operation is outstanding it calls MPI_Testall on each of
// them, then sleeps `poll_interval`; with nothing watched it sleeps on a condition variable and costs
// nothing. Sleeping between polls matters: a spinning thread takes a core from the compute threads (on
// a machine with as many ranks as cores it halves a rank's compute). The default interval was chosen by
// measurement (RESULTS.md).
//
// Thread safety (MPI_THREAD_MULTIPLE is required: make_progress_thread checks it). MPI forbids two
// threads operating on one request at the same time, so every MPI_Test* on a watched operation (the
// thread's and the owner's) runs under this object's mutex. The owner takes its operation back with
// forget() before it blocks in MPI_Wait* or frees the requests; after forget() returns the thread never
// touches it again. Only the requests of a watched operation are shared; the operation's buffers are
// the owner's, as without the thread (MPI writes them, nobody else reads them before completion).
//
// While the owner is blocked in a wait (OwnerWait) the thread makes no MPI calls: the owner's own
// polling progresses every operation then, and two threads inside Open MPI's progress engine only
// contend for its internal locks (on an oversubscribed machine a descheduled lock holder stalls the
// other thread).
//
// Numbers are unchanged by construction: the thread only decides when MPI's own algorithm advances,
// never which algorithm or reduction order runs.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace trlhpc {

// Who advances non-blocking communication between the caller's own test()/wait() calls
// (`--comm_progress`): a progress thread, or nobody (only the strategies' test() calls at unit hooks
// and between ring attention blocks, the behaviour before issue 17).
enum class CommProgress { None, Thread };
CommProgress parse_comm_progress(const std::string& name);  // none|thread; UserError otherwise
const char* comm_progress_name(CommProgress mode);

// Measured on the 2-core development VM (RESULTS.md "Communication overlap (issue 17)").
constexpr std::chrono::microseconds kDefaultProgressPollInterval{200};

// An operation the thread may test: the MPI backend's pending operation implements it.
class ProgressTarget {
 public:
  // One MPI_Test* over the operation's requests. Returns the MPI error code; *complete is set true once
  // every request finished. Called with the progress thread's mutex held; must not throw.
  virtual int test_requests(bool* complete) noexcept = 0;

 protected:
  ~ProgressTarget() = default;
};

class MpiProgressThread {
 public:
  explicit MpiProgressThread(std::chrono::microseconds poll_interval = kDefaultProgressPollInterval);
  ~MpiProgressThread();  // stops and joins the thread (no watched operation may remain)
  MpiProgressThread(const MpiProgressThread&) = delete;
  MpiProgressThread& operator=(const MpiProgressThread&) = delete;

  // The owner's calls, from the thread that issued the operation.
  void watch(ProgressTarget& target);
  // After it returns the thread no longer touches `target` (idempotent).
  void forget(ProgressTarget& target);
  // The owner's MPI_Test*, serialised with the thread's. Returns the MPI error code.
  int test(ProgressTarget& target, bool* complete);

  // Held by the owner while it blocks in a wait: the thread skips its polls meanwhile (see above).
  class OwnerWait {
   public:
    explicit OwnerWait(MpiProgressThread& thread) : thread_(thread) { thread_.owner_waiting_.fetch_add(1); }
    ~OwnerWait() { thread_.owner_waiting_.fetch_sub(1); }
    OwnerWait(const OwnerWait&) = delete;
    OwnerWait& operator=(const OwnerWait&) = delete;

   private:
    MpiProgressThread& thread_;
  };

  std::chrono::microseconds poll_interval() const { return poll_interval_; }
  // Operations whose completion the thread observed first (tests, benchmarks).
  uint64_t completed_by_thread() const;
  uint64_t polls() const;
  // CPU seconds the thread has used (its thread CPU clock as of its last poll): its cost to compute.
  double cpu_seconds() const;

 private:
  void run();

  const std::chrono::microseconds poll_interval_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<ProgressTarget*> watched_;  // outstanding operations, guarded by mutex_
  bool stop_ = false;                     // guarded by mutex_
  uint64_t completed_by_thread_ = 0;      // guarded by mutex_
  uint64_t polls_ = 0;                    // guarded by mutex_
  std::atomic<int> owner_waiting_{0};     // OwnerWait guards alive
  double cpu_seconds_ = 0;                // guarded by mutex_
  std::thread thread_;                    // last member: starts after the state above exists
};

// The progress thread for `mode`, or null: for CommProgress::None, and when the MPI library runs below
// MPI_THREAD_MULTIPLE (then *fallback_reason says why, for the job to log once; the behaviour is then
// that of CommProgress::None). Shared by every communicator of one ProcessGroups
// (MpiCommunicatorOptions::progress).
std::shared_ptr<MpiProgressThread> make_progress_thread(CommProgress mode, std::string* fallback_reason = nullptr,
                                                        std::chrono::microseconds poll_interval =
                                                            kDefaultProgressPollInterval);

}  // namespace trlhpc
