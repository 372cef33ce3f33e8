#include "trlhpc/comm/progress_thread.hpp"

#include <mpi.h>

#include <time.h>

#include <algorithm>

#include "trlhpc/runtime/mpi_check.hpp"
#include "trlhpc/core/error.hpp"

namespace trlhpc {

CommProgress parse_comm_progress(const std::string& name) {
  if (name == "none") return CommProgress::None;
  if (name == "thread") return CommProgress::Thread;
  throw UserError("--comm_progress " + name + " is not known: use thread (a progress thread tests outstanding "
                  "communication while compute runs) or none");
}

const char* comm_progress_name(CommProgress mode) {
  switch (mode) {
    case CommProgress::None: return "none";
    case CommProgress::Thread: return "thread";
  }
  return "?";
}

MpiProgressThread::MpiProgressThread(std::chrono::microseconds poll_interval)
    : poll_interval_(std::max(poll_interval, std::chrono::microseconds(1))), thread_([this] { run(); }) {}

MpiProgressThread::~MpiProgressThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void MpiProgressThread::watch(ProgressTarget& target) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    watched_.push_back(&target);
  }
  wake_.notify_all();
}

void MpiProgressThread::forget(ProgressTarget& target) {
  std::lock_guard<std::mutex> lock(mutex_);
  watched_.erase(std::remove(watched_.begin(), watched_.end(), &target), watched_.end());
}

int MpiProgressThread::test(ProgressTarget& target, bool* complete) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int rc = target.test_requests(complete);
  if (rc != MPI_SUCCESS || *complete)
    watched_.erase(std::remove(watched_.begin(), watched_.end(), &target), watched_.end());
  return rc;
}

uint64_t MpiProgressThread::completed_by_thread() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_by_thread_;
}

uint64_t MpiProgressThread::polls() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return polls_;
}

double MpiProgressThread::cpu_seconds() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cpu_seconds_;
}

namespace {
double this_thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}
}  // namespace

void MpiProgressThread::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [this] { return stop_ || !watched_.empty(); });
    if (stop_) return;
    if (owner_waiting_.load() > 0) {  // the owner is polling MPI itself
      wake_.wait_for(lock, poll_interval_, [this] { return stop_; });
      continue;
    }
    ++polls_;
    // A completed or failed operation leaves the list: the owner's own test()/wait() then sees the
    // result (MPI keeps a completed request as MPI_REQUEST_NULL; an error recurs in the owner's call).
    auto still = std::remove_if(watched_.begin(), watched_.end(), [this](ProgressTarget* target) {
      bool complete = false;
      const int rc = target->test_requests(&complete);
      if (complete) ++completed_by_thread_;
      return rc != MPI_SUCCESS || complete;
    });
    watched_.erase(still, watched_.end());
    cpu_seconds_ = this_thread_cpu_seconds();
    // Sleep between polls with the mutex released (the owner may test, watch or forget meanwhile); a stop
    // request ends the sleep early.
    wake_.wait_for(lock, poll_interval_, [this] { return stop_; });
  }
}

std::shared_ptr<MpiProgressThread> make_progress_thread(CommProgress mode, std::string* fallback_reason,
                                                        std::chrono::microseconds poll_interval) {
  if (mode == CommProgress::None) return nullptr;
  int level = MPI_THREAD_SINGLE;
  TRLHPC_CHECK_MPI(MPI_Query_thread(&level));
  if (level < MPI_THREAD_MULTIPLE) {
    if (fallback_reason)
      *fallback_reason = "--comm_progress thread needs MPI_THREAD_MULTIPLE, the MPI library provides level " +
                         std::to_string(level) +
                         ": communication progresses only inside the training thread's MPI calls (as "
                         "--comm_progress none)";
    return nullptr;
  }
  return std::make_shared<MpiProgressThread>(poll_interval);
}

}  // namespace trlhpc
