#pragma once
// StreamOrderedBlockCache: the bookkeeping of the CUDA caching allocator (kernels/cuda/device_allocator.cuh),
// with the device calls left to a policy so that the same code runs, and is unit-tested, without a GPU
// (tests/unit/test_stream_ordered_block_cache.cpp drives it with streams whose completion the test sets).
//
// Blocks are live (handed out), free (cached, reusable at once) or pending (released by the host while
// work on another stream may still use them). The allocator's own stream needs no bookkeeping: work
// queued on it after a reuse runs after the work queued before the release. Any other stream that used
// a block must be declared with record_stream(ptr, stream) before the release (the NCCL communicator
// does it for the buffers of its async collectives on its comm stream); release() then records one
// event per such stream and parks the block as pending, and poll() moves it to the free list once every
// event has completed. When memory runs short the allocator calls synchronize_pending() and retries
// (the PyTorch caching allocator's record_stream contract, docs/CUDA-REVIEW-FIXES.md defect 5).
//
// Policy (the CUDA one is in device_allocator.cu):
//   typename Policy::Stream, typename Policy::Event   (copyable handles)
//   Event record(Stream)            an event completing after the work queued on the stream so far
//   bool done(const Event&)         has it completed? (cudaEventQuery; never blocks)
//   void synchronize(const Event&)  wait for it (cudaEventSynchronize)
//   void recycle(Event)             the cache is finished with it (back to the policy's event pool)
// Not thread-safe: the allocator holds its mutex around every call.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

namespace trlhpc::kernels {

template <class Policy>
class StreamOrderedBlockCache {
 public:
  using Stream = typename Policy::Stream;
  using Event = typename Policy::Event;

  explicit StreamOrderedBlockCache(Policy policy = Policy()) : policy_(std::move(policy)) {}
  StreamOrderedBlockCache(const StreamOrderedBlockCache&) = delete;
  StreamOrderedBlockCache& operator=(const StreamOrderedBlockCache&) = delete;

  Policy& policy() { return policy_; }

  // A free block of class size `size` whose last users are done, or nullptr: polls the pending blocks
  // first, so a block whose events completed since its release is found. The block becomes live.
  void* take(size_t size) {
    poll();
    auto it = free_.find(size);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* block = it->second.back();
    it->second.pop_back();
    live_.emplace(address(block), Live{size, {}});
    return block;
  }

  // A block fresh from the driver, of class size `size`, becomes live.
  void add_live(void* block, size_t size) { live_.emplace(address(block), Live{size, {}}); }

  // Work on `stream` uses the live block that contains `ptr` (its start or any byte inside it): its
  // release will wait for that work. False when no live block contains ptr (memory not from this cache).
  bool record_stream(const void* ptr, Stream stream) {
    auto it = live_containing(ptr);
    if (it == live_.end()) return false;
    std::vector<Stream>& streams = it->second.streams;
    for (const Stream& s : streams)
      if (s == stream) return true;
    streams.push_back(stream);
    return true;
  }

  // The host is done with a live block (it must be a block's start). Without recorded streams it is free
  // at once; otherwise pending behind one event per recorded stream. Returns its class size, 0 when the
  // block is not live here (a destructor path must not throw).
  size_t release(void* block) {
    auto it = live_.find(address(block));
    if (it == live_.end()) return 0;
    Live live = std::move(it->second);
    live_.erase(it);
    if (live.streams.empty()) {
      free_[live.size].push_back(block);
    } else {
      Pending pending{block, live.size, {}};
      for (const Stream& s : live.streams) pending.events.push_back(policy_.record(s));
      pending_.push_back(std::move(pending));
    }
    return live.size;
  }

  // Moves every pending block whose events have all completed to the free list; returns how many moved.
  size_t poll() {
    return settle([this](const Event& e) { return policy_.done(e); });
  }

  // Waits for every pending block's events and frees them all (the allocator's path when memory is short).
  size_t synchronize_pending() {
    return settle([this](const Event& e) {
      policy_.synchronize(e);
      return true;
    });
  }

  // Removes every free block from the cache and returns them with their class sizes (for cudaFree).
  // Pending blocks stay: the work using them may still be running.
  std::vector<std::pair<void*, size_t>> drain_free() {
    std::vector<std::pair<void*, size_t>> out;
    for (auto& [size, blocks] : free_)
      for (void* block : blocks) out.emplace_back(block, size);
    free_.clear();
    return out;
  }

  size_t live_blocks() const { return live_.size(); }
  size_t pending_blocks() const { return pending_.size(); }
  size_t free_blocks() const {
    size_t n = 0;
    for (const auto& [size, blocks] : free_) n += blocks.size();
    return n;
  }

 private:
  struct Live {
    size_t size;                  // class size
    std::vector<Stream> streams;  // other streams that used it (record_stream), distinct
  };
  struct Pending {
    void* block;
    size_t size;
    std::vector<Event> events;  // one per recorded stream; done ones are recycled as they are seen
  };

  static uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

  typename std::map<uintptr_t, Live>::iterator live_containing(const void* ptr) {
    const uintptr_t a = address(ptr);
    auto it = live_.upper_bound(a);  // first block starting after ptr; the one before may contain it
    if (it == live_.begin()) return live_.end();
    --it;
    return a < it->first + it->second.size ? it : live_.end();
  }

  // Drops each pending block's events for which `completed` says true; a block left with none is free.
  size_t settle(const std::function<bool(const Event&)>& completed) {
    size_t moved = 0;
    for (size_t i = 0; i < pending_.size();) {
      std::vector<Event>& events = pending_[i].events;
      for (size_t e = 0; e < events.size();) {
        if (completed(events[e])) {
          policy_.recycle(std::move(events[e]));
          if (e + 1 != events.size()) events[e] = std::move(events.back());
          events.pop_back();
        } else {
          ++e;
        }
      }
      if (events.empty()) {
        free_[pending_[i].size].push_back(pending_[i].block);
        if (i + 1 != pending_.size()) pending_[i] = std::move(pending_.back());
        pending_.pop_back();
        ++moved;
      } else {
        ++i;
      }
    }
    return moved;
  }

  Policy policy_;
  std::map<uintptr_t, Live> live_;             // block start -> its class size and recorded streams
  std::map<size_t, std::vector<void*>> free_;  // class size -> cached blocks, reusable at once
  std::vector<Pending> pending_;               // released, waiting for other streams' work
};

}  // namespace trlhpc::kernels
