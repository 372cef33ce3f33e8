#pragma once
// Open-addressing hash tables for the BPE hot path: token bytes -> id, and (left id, right id) ->
// merge. Both are built once at load time and only read afterwards, so lookups need no locking.
// Load factor stays at or below 1/2; probing is linear.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace trlhpc::tokenizer::detail {

inline uint64_t hash_mix(uint64_t a, uint64_t b) {
  const __uint128_t product = static_cast<__uint128_t>(a) * b;
  return static_cast<uint64_t>(product) ^ static_cast<uint64_t>(product >> 64);
}

inline uint64_t hash_bytes(std::string_view bytes) {
  const char* p = bytes.data();
  size_t n = bytes.size();
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    h = hash_mix(h ^ word, 0xBF58476D1CE4E5B9ULL);
    p += 8;
    n -= 8;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p, n);
  return hash_mix(h ^ tail, 0x94D049BB133111EBULL);
}

// Byte string -> id.
class StringIdTable {
 public:
  void reserve(size_t count) { rehash(capacity_for(count)); }

  // Inserts or overwrites the id of `key`.
  void assign(std::string_view key, int32_t id) {
    if ((entries_.size() + 1) * 2 > slots_.size()) rehash(capacity_for(entries_.size() + 1));
    const uint64_t h = hash_bytes(key);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const int32_t e = slots_[i];
      if (e < 0) {
        slots_[i] = static_cast<int32_t>(entries_.size());
        entries_.push_back({static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size()), id});
        arena_.append(key);
        return;
      }
      if (key_of(entries_[static_cast<size_t>(e)]) == key) {
        entries_[static_cast<size_t>(e)].id = id;
        return;
      }
    }
  }

  // The id of `key`, or -1.
  int32_t find(std::string_view key) const {
    if (slots_.empty()) return -1;
    const uint64_t h = hash_bytes(key);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const int32_t e = slots_[i];
      if (e < 0) return -1;
      const Entry& entry = entries_[static_cast<size_t>(e)];
      if (entry.length == key.size() && std::memcmp(arena_.data() + entry.offset, key.data(), key.size()) == 0)
        return entry.id;
    }
  }

  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    uint32_t offset;
    uint32_t length;
    int32_t id;
  };
  static size_t capacity_for(size_t count) {
    size_t capacity = 16;
    while (capacity < count * 2) capacity *= 2;
    return capacity;
  }
  std::string_view key_of(const Entry& e) const { return std::string_view(arena_).substr(e.offset, e.length); }
  void rehash(size_t capacity) {
    if (capacity <= slots_.size()) return;
    slots_.assign(capacity, -1);
    mask_ = capacity - 1;
    for (size_t e = 0; e < entries_.size(); ++e) {
      size_t i = hash_bytes(key_of(entries_[e])) & mask_;
      while (slots_[i] >= 0) i = (i + 1) & mask_;
      slots_[i] = static_cast<int32_t>(e);
    }
  }

  std::string arena_;
  std::vector<Entry> entries_;
  std::vector<int32_t> slots_;  // index into entries_, -1 empty
  size_t mask_ = 0;
};

// One BPE merge: pairs with lower rank merge first; the pair becomes token new_id.
struct Merge {
  int32_t rank = -1;
  int32_t new_id = -1;
};

// (left id, right id) -> Merge.
class MergeTable {
 public:
  void reserve(size_t count) {
    size_t capacity = 16;
    while (capacity < count * 2) capacity *= 2;
    keys_.assign(capacity, kEmpty);
    values_.assign(capacity, Merge{});
    mask_ = capacity - 1;
  }

  // Inserts or overwrites; reserve() must have made room for every pair.
  void assign(int32_t left, int32_t right, Merge merge) {
    const uint64_t key = pack(left, right);
    for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
      if (keys_[i] == kEmpty || keys_[i] == key) {
        keys_[i] = key;
        values_[i] = merge;
        return;
      }
    }
  }

  // The merge of (left, right), or nullptr.
  const Merge* find(int32_t left, int32_t right) const {
    if (keys_.empty()) return nullptr;
    const uint64_t key = pack(left, right);
    for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
      if (keys_[i] == key) return &values_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t pack(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  size_t slot_of(uint64_t key) const { return hash_mix(key, 0x9E3779B97F4A7C15ULL) & mask_; }

  std::vector<uint64_t> keys_;
  std::vector<Merge> values_;
  size_t mask_ = 0;
};

}  // namespace trlhpc::tokenizer::detail
