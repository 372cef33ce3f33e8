#pragma once
// DeadlineTimer: a deadline (`--ddp_timeout`) for blocking collective calls the CollectiveWatchdog cannot
// see into: parallel HDF5's file create / dataset create / collective write / close, whose MPI traffic
// runs inside the HDF5 library, and the start-up exchanges made before the job's communicators exist
// (topology discovery, communicator splits and duplicates).
//
// Why a timer thread: the watchdog polls non-blocking MPI operations that trlhpc issues itself. Inside
// H5Fclose, HDF5 1.10 makes its own blocking MPI_Barrier / MPI_Bcast, and its error paths are not
// collective: when a metadata write fails on one rank (a full disk), that rank skips a broadcast the
// others then wait in forever (issue 30). Nothing on the blocked thread can notice, so a second thread
// waits for the deadline of the call under way and, when it passes, prints one line naming the call,
// runs the expiry hook (the checkpoint writer removes its partial checkpoint-N.tmp there) and aborts
// the whole job with exit 2 (docs/guide/checkpoints-and-preemption.md, exit codes), as the watchdog
// does:
//   trlhpc: failure: [rank 1 @ node07] parallel HDF5 H5Fclose of out/checkpoint-4.tmp/state.h5 did not
//   finish within --ddp_timeout 1800 s (another rank failed inside it, or the file system stopped
//   answering); aborting the job
//
// Cost: one thread per timer, asleep on a condition variable; arming and disarming take a mutex (well
// under a microsecond, against the milliseconds of an HDF5 collective). A timeout <= 0 disables it: no
// thread, arm() does nothing. The calls under one timer are sequential (one armed call at a time).
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace trlhpc {

class DeadlineTimer {
 public:
  explicit DeadlineTimer(double timeout_seconds);
  ~DeadlineTimer();
  DeadlineTimer(const DeadlineTimer&) = delete;
  DeadlineTimer& operator=(const DeadlineTimer&) = delete;

  bool enabled() const { return timeout_seconds_ > 0; }
  double timeout_seconds() const { return timeout_seconds_; }
  // Runs on the timer's thread before the abort (must not block on other ranks).
  void set_expiry_hook(std::function<void()> hook);

  // `what` ("parallel HDF5 H5Fclose of PATH") must finish within the timeout from now; disarm() ends it.
  void arm(std::string what);
  void disarm();

  // arm() for the lifetime of the scope.
  class Scope {
   public:
    Scope(DeadlineTimer& timer, std::string what) : timer_(&timer) { timer_->arm(std::move(what)); }
    ~Scope() { timer_->disarm(); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    DeadlineTimer* timer_;
  };

 private:
  void watch();
  [[noreturn]] void expire(const std::string& what);

  double timeout_seconds_;
  std::mutex mutex_;  // guards what follows
  std::condition_variable changed_;
  bool stopping_ = false;
  uint64_t generation_ = 0;  // counts arm() calls: a deadline belongs to one armed call
  bool armed_ = false;
  std::string what_;
  std::function<void()> hook_;
  std::thread thread_;  // last: started after the members it reads
};

}  // namespace trlhpc
