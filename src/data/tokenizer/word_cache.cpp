#include "word_cache.hpp"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>

namespace trlhpc::tokenizer::detail {

void WordCache::FreeDeleter::operator()(void* p) const { std::free(p); }

WordCache::WordCache() {
  // One block on transparent huge pages where the kernel allows it: lookups land on random cache
  // lines of the block, and with 4 KiB pages most of them would also miss the TLB.
  constexpr size_t kHugePage = size_t{1} << 21;
  constexpr size_t bytes = kShards * kShortEntriesPerShard * sizeof(ShortEntry);
  static_assert(bytes % kHugePage == 0, "the short-entry block is a whole number of huge pages");
  void* block = std::aligned_alloc(kHugePage, bytes);
  if (block == nullptr) throw std::bad_alloc();
  madvise(block, bytes, MADV_HUGEPAGE);  // advisory; failure only costs speed
  std::memset(block, 0, bytes);           // all entries empty
  short_storage_.reset(static_cast<ShortEntry*>(block));
  for (size_t s = 0; s < kShards; ++s) shards_[s].short_entries = short_storage_.get() + s * kShortEntriesPerShard;
}

void WordCache::prefetch(std::string_view piece) const {
  if (piece.size() > kShortKeyBytes) return;
  const uint64_t h = hash_bytes(piece);
  __builtin_prefetch(&shards_[h % kShards].short_entries[short_set(h)]);
}

bool WordCache::lookup(std::string_view piece, std::vector<ModelToken>& out) const {
  if (piece.size() > kMaxCachedPieceBytes) return false;
  const uint64_t h = hash_bytes(piece);
  Shard& shard = shards_[h % kShards];
  std::lock_guard<std::mutex> lock(shard.mutex);
  if (piece.size() <= kShortKeyBytes) {
    const ShortEntry* set = &shard.short_entries[short_set(h)];
    for (size_t way = 0; way < kShortWays; ++way) {
      const ShortEntry& e = set[way];
      if (e.hash == h && e.key_length == piece.size() && std::memcmp(e.key, piece.data(), piece.size()) == 0) {
        for (size_t i = 0; i < e.count; ++i) out.push_back({e.ids[i], e.lengths[i]});
        return true;
      }
    }
  }
  const auto it = shard.long_entries.find(Key{piece, h});
  if (it == shard.long_entries.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void WordCache::insert(std::string_view piece, const ModelToken* tokens, size_t count) const {
  if (piece.size() > kMaxCachedPieceBytes) return;
  const uint64_t h = hash_bytes(piece);
  Shard& shard = shards_[h % kShards];
  std::lock_guard<std::mutex> lock(shard.mutex);
  if (piece.size() <= kShortKeyBytes && count <= kShortTokens) {
    ShortEntry* set = &shard.short_entries[short_set(h)];
    size_t way = 0;
    while (way < kShortWays && set[way].key_length != 0) ++way;
    if (way == kShortWays) way = shard.next_victim++ % kShortWays;
    ShortEntry& e = set[way];
    e.hash = h;
    e.key_length = static_cast<uint8_t>(piece.size());
    e.count = static_cast<uint8_t>(count);
    std::memcpy(e.key, piece.data(), piece.size());
    for (size_t i = 0; i < count; ++i) {
      e.ids[i] = tokens[i].id;
      e.lengths[i] = static_cast<uint8_t>(tokens[i].length);  // <= piece size <= 22
    }
    return;
  }
  if (shard.long_entries.size() >= kLongEntriesPerShard) shard.long_entries.clear();
  shard.long_entries.emplace(std::string(piece), std::vector<ModelToken>(tokens, tokens + count));
}

}  // namespace trlhpc::tokenizer::detail
