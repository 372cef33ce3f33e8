#pragma once
// The CUDA matmul's plan bookkeeping (kernels/cuda/matmul.cu), host C++ unit-tested without a GPU
// (tests/unit/test_kernel_matmul_plan_cache.cpp). docs/CUDA-REVIEW-FIXES.md defect 7: plans were cached per exact
// row count M, so packing rows of variable length grew the cache without bound and ran cuBLASLt's
// heuristic for every new M. Now:
//   * matmul_rows_bucket(M) groups row counts (exact up to 64, then four buckets per power of two); the
//     heuristic's algorithm is kept per bucket and reused for every M in it after cublasLtMatmulAlgoCheck
//     accepts it for the exact problem (else the heuristic runs for that M);
//   * the plans themselves (descriptors for the exact M) live in a BoundedLru of fixed capacity.
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <utility>

namespace trlhpc::kernels {

// The bucket of a GEMM row count: M itself up to 64; above, M rounded up to a multiple of a quarter of
// the largest power of two not above it (100 -> 112, 1000 -> 1024, 5000 -> 5120), so at most
// 4 buckets per octave and a bucket spans at most 25% of its rows.
inline int64_t matmul_rows_bucket(int64_t M) {
  if (M <= 64) return M;
  int64_t power = 64;
  while (power * 2 <= M) power *= 2;
  const int64_t step = power / 4;
  return (M + step - 1) / step * step;
}

// A map of at most `capacity` entries that drops the least recently used one when full.
template <class Key, class Value>
class BoundedLru {
 public:
  explicit BoundedLru(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  // The value of `key` (now the most recently used), or nullptr.
  Value* find(const Key& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return &it->second->second;
  }

  // Inserts (or replaces) key's value as the most recently used, evicting the least recently used entry
  // when full. The reference stays valid until that entry is evicted or replaced.
  Value& insert(const Key& key, Value value) {
    if (auto it = index_.find(key); it != index_.end()) {
      order_.erase(it->second);
      index_.erase(it);
    }
    if (order_.size() >= capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
      ++evictions_;
    }
    order_.emplace_front(key, std::move(value));
    index_.emplace(key, order_.begin());
    return order_.front().second;
  }

  size_t size() const { return order_.size(); }
  size_t capacity() const { return capacity_; }
  int64_t evictions() const { return evictions_; }
  void clear() {
    index_.clear();
    order_.clear();
  }

 private:
  size_t capacity_;
  std::list<std::pair<Key, Value>> order_;  // most recently used first
  std::map<Key, typename std::list<std::pair<Key, Value>>::iterator> index_;
  int64_t evictions_ = 0;
};

}  // namespace trlhpc::kernels
