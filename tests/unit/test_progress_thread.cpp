// MpiProgressThread without MPI traffic: fake operations that complete after a set number of tests.
// Checks the contract the MPI backend relies on: the thread completes a watched operation while the
// owner makes no call; forget() ends all testing of an operation; the owner's test() and the thread's
// polls never run at once on one operation (a test counts overlapping calls); an idle thread does
// not poll; it pauses while the owner waits. Built so it also runs clean under ThreadSanitizer (-fsanitize=thread).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "trlhpc/cli/sft_options.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/comm/progress_thread.hpp"

namespace trlhpc {
namespace {

// Completes on its `tests_to_complete`-th test. `inside` detects two callers at once (MPI forbids it).
class FakeOperation final : public ProgressTarget {
 public:
  explicit FakeOperation(int tests_to_complete) : tests_to_complete_(tests_to_complete) {}
  int test_requests(bool* complete) noexcept override {
    if (inside_.fetch_add(1) != 0) overlapped_.store(true);
    ++tests_;  // plain int: a data race here is what ThreadSanitizer would report
    *complete = tests_ >= tests_to_complete_;
    inside_.fetch_sub(1);
    return 0;
  }
  int tests() const { return tests_; }  // read only after forget() or completion (happens-after)
  bool overlapped() const { return overlapped_.load(); }

 private:
  int tests_to_complete_;
  int tests_ = 0;
  std::atomic<int> inside_{0};
  std::atomic<bool> overlapped_{false};
};

bool eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(ProgressThread, CompletesAWatchedOperationWithoutTheOwner) {
  MpiProgressThread thread(std::chrono::microseconds(50));
  FakeOperation op(5);
  thread.watch(op);
  EXPECT_TRUE(eventually([&] { return thread.completed_by_thread() == 1; }));
  thread.forget(op);  // already dropped by the thread: idempotent
  EXPECT_EQ(op.tests(), 5);
  EXPECT_GE(thread.polls(), 5u);
  EXPECT_GT(thread.cpu_seconds(), 0.0);  // its own CPU clock, read after each poll
}

TEST(ProgressThread, ForgetEndsTesting) {
  MpiProgressThread thread(std::chrono::microseconds(50));
  FakeOperation never(1 << 30);
  thread.watch(never);
  EXPECT_TRUE(eventually([&] { return thread.polls() >= 3; }));
  thread.forget(never);
  const int tests = never.tests();
  const uint64_t polls = thread.polls();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(never.tests(), tests);
  EXPECT_EQ(thread.polls(), polls) << "nothing watched: the thread must sleep, not poll";
}

TEST(ProgressThread, PausesWhileTheOwnerWaits) {
  MpiProgressThread thread(std::chrono::microseconds(10));
  FakeOperation never(1 << 30);
  thread.watch(never);
  EXPECT_TRUE(eventually([&] { return thread.polls() >= 2; }));
  {
    MpiProgressThread::OwnerWait waiting(thread);
    // The count is raised under the thread's mutex before it tests: once read here, no poll starts.
    const uint64_t polls = thread.polls();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(thread.polls(), polls) << "the thread polled while the owner was waiting";
  }
  const uint64_t after = thread.polls();
  EXPECT_TRUE(eventually([&] { return thread.polls() > after; })) << "the thread did not resume";
  thread.forget(never);
}

TEST(ProgressThread, IdleThreadDoesNotPoll) {
  MpiProgressThread thread(std::chrono::microseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(thread.polls(), 0u);
}

TEST(ProgressThread, OwnerTestsAndThreadPollsNeverOverlap) {
  MpiProgressThread thread(std::chrono::microseconds(1));
  for (int round = 0; round < 50; ++round) {
    std::vector<std::unique_ptr<FakeOperation>> ops;
    for (int i = 0; i < 8; ++i) {
      ops.push_back(std::make_unique<FakeOperation>(50 + i));
      thread.watch(*ops.back());
    }
    // The owner tests every operation until it completes, as CommRequest::test() does; the thread
    // tests them at the same time.
    for (auto& op : ops) {
      bool complete = false;
      while (!complete) ASSERT_EQ(thread.test(*op, &complete), 0);
      thread.forget(*op);
      EXPECT_FALSE(op->overlapped()) << "two tests ran at once on one operation";
    }
  }
}

TEST(CommProgressOption, ParsesBothModesAndRefusesOthersNamingTheFlag) {
  EXPECT_EQ(parse_comm_progress("thread"), CommProgress::Thread);
  EXPECT_EQ(parse_comm_progress("none"), CommProgress::None);
  EXPECT_STREQ(comm_progress_name(CommProgress::Thread), "thread");
  auto parse = [](std::vector<std::string> args) {
    SftConfig config;
    parse_sft_options(args, config, nullptr, SftOptionContext{});
    return config;
  };
  EXPECT_EQ(parse({}).comm_progress, "thread");
  EXPECT_EQ(parse({"--comm_progress", "none"}).comm_progress, "none");
  try {
    parse({"--comm_progress", "always"});
    ADD_FAILURE() << "--comm_progress always was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--comm_progress always"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trlhpc
