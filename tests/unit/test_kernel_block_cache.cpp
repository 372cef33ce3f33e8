// The CUDA caching allocator's bookkeeping (StreamOrderedBlockCache, the code DeviceAllocator runs) on
// the CPU: the policy's streams are counters whose progress the test sets, so "the comm stream has not
// finished the collective yet" is a state the test holds while it allocates. A block released while
// another stream may still use it must not be handed out again until that stream's event completes
// (docs/CUDA-REVIEW-FIXES.md defect 5).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "trlhpc/kernels/stream_ordered_block_cache.hpp"

namespace trlhpc {
namespace {

// A stream is a number; its work items complete in order. An event is (stream, number of items queued
// when it was recorded); it is done when that many items have completed.
struct FakeStreams {
  struct Shared {
    std::map<int, int64_t> queued, completed;
    int recorded = 0, recycled = 0, synchronized = 0;
  };
  using Stream = int;
  struct Event {
    int stream;
    int64_t position;
  };
  Shared* s;

  Event record(Stream stream) {
    ++s->recorded;
    return Event{stream, s->queued[stream]};
  }
  bool done(const Event& e) { return s->completed[e.stream] >= e.position; }
  void synchronize(const Event& e) {  // the host waits: the stream has run up to the event
    ++s->synchronized;
    s->completed[e.stream] = std::max(s->completed[e.stream], e.position);
  }
  void recycle(Event) { ++s->recycled; }
};

using Cache = kernels::StreamOrderedBlockCache<FakeStreams>;

// Distinct fake device addresses of `size` bytes each (never dereferenced).
struct Arena {
  std::vector<char> bytes = std::vector<char>(1 << 16);
  char* at(size_t offset) { return bytes.data() + offset; }
};

constexpr int kComm = 7, kOther = 9;

TEST(KernelBlockCache, BlockWithoutOtherStreamsIsReusedAtOnce) {
  FakeStreams::Shared s;
  Cache cache(FakeStreams{&s});
  Arena arena;
  void* a = arena.at(0);
  cache.add_live(a, 1024);
  EXPECT_EQ(cache.release(a), 1024u);
  EXPECT_EQ(cache.take(1024), a);
  EXPECT_EQ(s.recorded, 0) << "the backend's own stream needs no event";
}

TEST(KernelBlockCache, BlockUsedOnCommStreamWaitsForItsEvent) {
  FakeStreams::Shared s;
  Cache cache(FakeStreams{&s});
  Arena arena;
  void* a = arena.at(0);
  cache.add_live(a, 1024);
  s.queued[kComm] = 3;  // an async all-reduce on the comm stream reads/writes `a` (item 3)
  ASSERT_TRUE(cache.record_stream(a, kComm));
  EXPECT_EQ(cache.release(a), 1024u);  // the host drops the tensor before wait()
  EXPECT_EQ(cache.pending_blocks(), 1u);

  s.completed[kComm] = 2;  // the collective is still running
  EXPECT_EQ(cache.take(1024), nullptr) << "handed out while the comm stream may still use it";
  EXPECT_EQ(cache.take(1024), nullptr);

  s.queued[kComm] = 5;     // later work on the comm stream does not hold the block back
  s.completed[kComm] = 3;  // the collective has finished
  EXPECT_EQ(cache.take(1024), a);
  EXPECT_EQ(cache.pending_blocks(), 0u);
  EXPECT_EQ(s.recycled, 1) << "the event goes back to the pool";
}

TEST(KernelBlockCache, InteriorPointerAndEveryRecordedStreamCount) {
  FakeStreams::Shared s;
  Cache cache(FakeStreams{&s});
  Arena arena;
  void* a = arena.at(0);
  void* b = arena.at(4096);
  cache.add_live(a, 4096);
  cache.add_live(b, 4096);
  s.queued[kComm] = 1;
  s.queued[kOther] = 1;
  // A collective on a slice of `b` (e.g. one rank's block of an all-gather), recorded twice, and a
  // second stream using it too.
  EXPECT_TRUE(cache.record_stream(arena.at(4096 + 1000), kComm));
  EXPECT_TRUE(cache.record_stream(arena.at(4096 + 4095), kComm));
  EXPECT_TRUE(cache.record_stream(b, kOther));
  EXPECT_FALSE(cache.record_stream(arena.at(8192), kComm)) << "past the last live block";
  cache.release(a);
  cache.release(b);
  EXPECT_EQ(s.recorded, 2) << "one event per distinct stream, none for the untouched block";
  EXPECT_EQ(cache.take(4096), a);
  s.completed[kComm] = 1;
  EXPECT_EQ(cache.take(4096), nullptr) << "the second stream has not finished";
  s.completed[kOther] = 1;
  EXPECT_EQ(cache.take(4096), b);
}

TEST(KernelBlockCache, RecordedStreamsEndWithTheRelease) {
  FakeStreams::Shared s;
  Cache cache(FakeStreams{&s});
  Arena arena;
  void* a = arena.at(0);
  cache.add_live(a, 512);
  s.queued[kComm] = 1;
  cache.record_stream(a, kComm);
  cache.release(a);
  s.completed[kComm] = 1;
  ASSERT_EQ(cache.take(512), a);
  cache.release(a);  // its new owner never used it on the comm stream
  EXPECT_EQ(cache.pending_blocks(), 0u);
  EXPECT_EQ(cache.take(512), a);
}

TEST(KernelBlockCache, SynchronizePendingFreesEverythingWhenMemoryIsShort) {
  FakeStreams::Shared s;
  Cache cache(FakeStreams{&s});
  Arena arena;
  void* a = arena.at(0);
  void* b = arena.at(2048);
  cache.add_live(a, 2048);
  cache.add_live(b, 1024);
  s.queued[kComm] = 4;
  cache.record_stream(a, kComm);
  cache.release(a);
  cache.release(b);
  // drain_free (cudaFree of the cache) must leave the pending block alone.
  std::vector<std::pair<void*, size_t>> freed = cache.drain_free();
  ASSERT_EQ(freed.size(), 1u);
  EXPECT_EQ(freed[0].first, b);
  EXPECT_EQ(cache.pending_blocks(), 1u);
  EXPECT_EQ(cache.synchronize_pending(), 1u);
  EXPECT_EQ(s.synchronized, 1);
  freed = cache.drain_free();
  ASSERT_EQ(freed.size(), 1u);
  EXPECT_EQ(freed[0].first, a);
  EXPECT_EQ(freed[0].second, 2048u);
}

TEST(KernelBlockCache, ReleaseOfUnknownBlockIsIgnored) {
  FakeStreams::Shared s;
  Cache cache(FakeStreams{&s});
  Arena arena;
  EXPECT_EQ(cache.release(arena.at(0)), 0u);
  EXPECT_EQ(cache.free_blocks(), 0u);
  EXPECT_EQ(cache.take(512), nullptr);
}

}  // namespace
}  // namespace trlhpc
