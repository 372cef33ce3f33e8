#pragma once
// Bounded cache of BPE results per pre-tokenized piece (a "word"), shared by all threads encoding
// with one tokenizer. Natural text repeats its words, so most pieces skip the merge loop.
//
// Two tiers, both sharded by hash with one mutex per shard:
//   - short pieces (<= kShortKeyBytes bytes, <= kShortTokens tokens) in a 4-way set-associative
//     table of one-cache-line entries (a full set replaces its entries in turn): the common case costs
//     one hash, one uncontended lock and a cache line or two;
//   - other pieces up to kMaxCachedPieceBytes in a hash map per shard, cleared when it reaches its
//     capacity (bounded memory; the cache refills with what the current text uses).
// Pieces longer than kMaxCachedPieceBytes are not cached, as in the library.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "token_table.hpp"

namespace trlhpc::tokenizer::detail {

// A token the model produced: its id and how many bytes of the piece it covers.
struct ModelToken {
  int32_t id;
  uint32_t length;
};

class WordCache {
 public:
  static constexpr size_t kMaxCachedPieceBytes = 256;
  static constexpr size_t kShortKeyBytes = 22;
  static constexpr size_t kShortTokens = 5;
  static constexpr size_t kShards = 16;
  static constexpr size_t kShortWays = 4;
  static constexpr size_t kShortEntriesPerShard = 4096;  // 16 x 4096 x 64 B = 4 MiB, on huge pages
  static constexpr size_t kLongEntriesPerShard = 2048;

  WordCache();

  // Appends the cached tokens of `piece` (non-empty) to `out`; false when it is not cached.
  bool lookup(std::string_view piece, std::vector<ModelToken>& out) const;
  void insert(std::string_view piece, const ModelToken* tokens, size_t count) const;
  // Starts loading the cache line `piece` would be found in (call a few pieces ahead of lookup).
  void prefetch(std::string_view piece) const;

 private:
  struct alignas(64) ShortEntry {
    uint64_t hash = 0;
    uint8_t key_length = 0;  // 0: empty
    uint8_t count = 0;
    char key[kShortKeyBytes];
    int32_t ids[kShortTokens];
    uint8_t lengths[kShortTokens];
  };
  static_assert(sizeof(ShortEntry) == 64, "a short cache entry is one cache line");

  // Lookups hash a string_view once and reuse that hash for the shard and the bucket.
  struct Key {
    std::string_view bytes;
    uint64_t hash;
  };
  struct Hash {
    using is_transparent = void;
    size_t operator()(const std::string& s) const { return hash_bytes(s); }
    size_t operator()(const Key& k) const { return k.hash; }
  };
  struct Equal {
    using is_transparent = void;
    bool operator()(const std::string& a, const std::string& b) const { return a == b; }
    bool operator()(const Key& a, const std::string& b) const { return a.bytes == b; }
    bool operator()(const std::string& a, const Key& b) const { return a == b.bytes; }
  };
  struct Shard {
    std::mutex mutex;
    ShortEntry* short_entries = nullptr;  // sets of kShortWays entries, inside short_storage_
    size_t next_victim = 0;
    std::unordered_map<std::string, std::vector<ModelToken>, Hash, Equal> long_entries;
  };
  // First entry of the set of `hash` within its shard.
  static size_t short_set(uint64_t hash) { return ((hash >> 8) & (kShortEntriesPerShard / kShortWays - 1)) * kShortWays; }

  struct FreeDeleter {
    void operator()(void* p) const;
  };
  std::unique_ptr<ShortEntry, FreeDeleter> short_storage_;
  mutable Shard shards_[kShards];
};

}  // namespace trlhpc::tokenizer::detail
