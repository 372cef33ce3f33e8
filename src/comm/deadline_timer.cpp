#include "trlhpc/comm/deadline_timer.hpp"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "trlhpc/core/error.hpp"

namespace trlhpc {

DeadlineTimer::DeadlineTimer(double timeout_seconds) : timeout_seconds_(timeout_seconds > 0 ? timeout_seconds : 0) {
  if (enabled()) thread_ = std::thread([this] { watch(); });
}

DeadlineTimer::~DeadlineTimer() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void DeadlineTimer::set_expiry_hook(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(mutex_);
  hook_ = std::move(hook);
}

void DeadlineTimer::arm(std::string what) {
  if (!enabled()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++generation_;
    armed_ = true;
    what_ = std::move(what);
  }
  changed_.notify_all();
}

void DeadlineTimer::disarm() {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  armed_ = false;  // the thread notices at its next wake-up; no need to wake it now
}

void DeadlineTimer::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto timeout = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(timeout_seconds_));
  while (!stopping_) {
    if (!armed_) {
      changed_.wait(lock, [&] { return stopping_ || armed_; });
      continue;
    }
    const uint64_t generation = generation_;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    // Wakes when re-armed (a new call, a new deadline), stopped, or at the deadline of this call.
    changed_.wait_until(lock, deadline, [&] { return stopping_ || generation_ != generation; });
    if (stopping_ || generation_ != generation) continue;
    if (armed_ && std::chrono::steady_clock::now() >= deadline) expire(what_);
    if (!armed_) changed_.wait(lock, [&] { return stopping_ || generation_ != generation; });
  }
}

void DeadlineTimer::expire(const std::string& what) {
  std::fprintf(stderr,
               "trlhpc: failure: %s%s did not finish within --ddp_timeout %g s (another rank failed inside it, or "
               "the file system or network stopped answering); aborting the job\n",
               rank_prefix().c_str(), what.c_str(), timeout_seconds_);
  std::fflush(stderr);
  if (hook_) {
    try {
      hook_();
    } catch (...) {
      // Aborting anyway.
    }
  }
  MPI_Abort(MPI_COMM_WORLD, 2);
  std::_Exit(2);  // MPI_Abort does not return; this is for an MPI that does
}

}  // namespace trlhpc
