// DeadlineTimer (comm/deadline_timer.hpp): the deadline belongs to one armed call. Calls that each
// finish in time never trigger it, however long they take together; a disabled timer starts no thread.
// (Its expiry, a report and MPI_Abort with exit 2, was exercised by hand with the parallel HDF5 checkpoint
// writer of the time (checkpoints were then written through MPI-IO; mpi.test_parallel_hdf5_failure)
// with discard()'s truncation removed hangs in H5Fclose and was ended by it after the 60 s timeout. An
// expiry here would end this process, failing the test.)
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "trlhpc/comm/deadline_timer.hpp"

namespace trlhpc {
namespace {

TEST(DeadlineTimer, EachCallGetsItsOwnDeadline) {
  DeadlineTimer timer(0.2);
  ASSERT_TRUE(timer.enabled());
  // Ten calls of 60 ms: 600 ms in all, three times the timeout, each one a third of it.
  for (int i = 0; i < 10; ++i) {
    const DeadlineTimer::Scope scope(timer, "call " + std::to_string(i));
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
  }
  // Disarmed, the timer waits without a deadline.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  SUCCEED();
}

TEST(DeadlineTimer, ManyShortCallsAndArmingAgainWhileArmed) {
  DeadlineTimer timer(0.1);
  for (int i = 0; i < 20000; ++i) {
    timer.arm("short call");
    timer.disarm();
  }
  for (int i = 0; i < 5; ++i) {  // arm() while armed starts a new deadline
    timer.arm("re-armed call");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  timer.disarm();
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  SUCCEED();
}

TEST(DeadlineTimer, NonPositiveTimeoutDisables) {
  DeadlineTimer timer(0);
  EXPECT_FALSE(timer.enabled());
  const DeadlineTimer::Scope scope(timer, "anything");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

}  // namespace
}  // namespace trlhpc
