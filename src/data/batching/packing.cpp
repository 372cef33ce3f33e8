// Packing strategies (bfd, bfd_split, wrapped), truncation and unpacked rows; see packing.hpp.
#include "trlhpc/data/batching/packing.hpp"

#include <algorithm>
#include <numeric>

#include "trlhpc/core/error.hpp"

namespace trlhpc::batching {
namespace {

// Max segment tree over the remaining capacities 1..capacity of open bins (TRL's _SegmentTree): leaf s-1 holds s
// when some bin has exactly s tokens free, else 0. smallest_at_least(v) walks down towards the leftmost leaf
// >= v, i.e. the smallest free space that still fits v: the best fit.
class CapacityTree {
 public:
  explicit CapacityTree(int32_t capacity) : capacity_(capacity) {
    while (leaves_ < capacity) leaves_ <<= 1;
    tree_.assign(2 * static_cast<size_t>(leaves_), 0);
  }
  void set(int32_t space, bool present) {
    size_t i = static_cast<size_t>(leaves_) + space - 1;
    tree_[i] = present ? space : 0;
    for (i >>= 1; i >= 1; i >>= 1) tree_[i] = std::max(tree_[2 * i], tree_[2 * i + 1]);
  }
  // Requires a present space >= v (the capacity leaf always is).
  int32_t smallest_at_least(int32_t v) const {
    size_t i = 1;
    while (i < static_cast<size_t>(leaves_)) i = tree_[2 * i] >= v ? 2 * i : 2 * i + 1;
    return tree_[i];
  }
  int32_t capacity() const { return capacity_; }

 private:
  int32_t capacity_;
  int32_t leaves_ = 1;
  std::vector<int32_t> tree_;  // (2 * leaves) heap layout, node 1 is the root
};

// FIFO of bins per remaining space, as intrusive singly linked lists (TRL: defaultdict(deque)).
struct BinQueues {
  explicit BinQueues(int32_t capacity) : head(capacity + 1, -1), tail(capacity + 1, -1) {}
  std::vector<int64_t> head, tail;  // (capacity + 1) first/last bin with that space, -1 if none
  std::vector<int64_t> next;        // (bins) next bin in the same queue
  void push_back(int32_t space, int64_t bin) {
    if (static_cast<size_t>(bin) >= next.size()) next.resize(bin + 1, -1);
    next[bin] = -1;
    if (tail[space] < 0) head[space] = bin; else next[tail[space]] = bin;
    tail[space] = bin;
  }
  int64_t pop_front(int32_t space) {
    int64_t bin = head[space];
    head[space] = next[bin];
    if (head[space] < 0) tail[space] = -1;
    return bin;
  }
  bool empty(int32_t space) const { return head[space] < 0; }
};

struct Item {
  int32_t length;
  PackedSegment segment;
};

// Best-fit decreasing over one map batch of items, appending its bins to `rows`.
// `tree` and `queues` are empty on entry and left empty.
void bfd_one_batch(std::vector<Item>& items, CapacityTree& tree, BinQueues& queues, std::vector<PackedRow>& rows) {
  const int32_t capacity = tree.capacity();
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.length > b.length; });
  std::vector<int32_t> touched;  // spaces set in the tree or queues, cleared at the end
  const int64_t first_bin = static_cast<int64_t>(rows.size());
  tree.set(capacity, true);
  for (const Item& item : items) {
    int32_t space = tree.smallest_at_least(item.length);
    int64_t bin;
    if (space < capacity) {
      bin = queues.pop_front(space);
      if (queues.empty(space)) tree.set(space, false);
    } else {
      bin = static_cast<int64_t>(rows.size()) - first_bin;
      rows.emplace_back();
    }
    rows[first_bin + bin].segments.push_back(item.segment);
    space -= item.length;
    if (space > 0) {
      queues.push_back(space, bin);
      tree.set(space, true);
      touched.push_back(space);
    }
  }
  for (int32_t space : touched) {
    tree.set(space, false);
    queues.head[space] = queues.tail[space] = -1;
  }
  tree.set(capacity, false);
}

std::vector<int64_t> identity_order(size_t n) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  return order;
}

void check_order(std::span<const int64_t> order, size_t n) {
  for (int64_t i : order) TRLHPC_ASSERT(i >= 0 && static_cast<size_t>(i) < n, "packing order index out of range");
}

}  // namespace

PackingStrategy parse_packing_strategy(const std::string& name) {
  if (name == "bfd") return PackingStrategy::kBfd;
  if (name == "bfd_split") return PackingStrategy::kBfdSplit;
  if (name == "wrapped") return PackingStrategy::kWrapped;
  throw_user_error("--packing_strategy " + name + ": unknown strategy; use bfd (default), bfd_split or wrapped");
}

TruncationMode parse_truncation_mode(const std::string& name) {
  if (name == "keep_start") return TruncationMode::kKeepStart;
  if (name == "keep_end") return TruncationMode::kKeepEnd;
  throw_user_error("--truncation_mode " + name + ": unknown mode; use keep_start (default) or keep_end");
}

int32_t PackedRow::length() const {
  int32_t n = 0;
  for (const auto& s : segments) n += s.length;
  return n;
}

void truncate_example(dataset::TokenizedExample& example, int32_t max_length, TruncationMode mode) {
  TRLHPC_ASSERT(example.loss_mask.size() == example.input_ids.size(), "loss_mask and input_ids differ in length");
  if (max_length < 0 || example.length() <= max_length) return;
  if (mode == TruncationMode::kKeepEnd) {
    size_t drop = example.input_ids.size() - static_cast<size_t>(max_length);
    example.input_ids.erase(example.input_ids.begin(), example.input_ids.begin() + static_cast<std::ptrdiff_t>(drop));
    example.loss_mask.erase(example.loss_mask.begin(), example.loss_mask.begin() + static_cast<std::ptrdiff_t>(drop));
  } else {
    example.input_ids.resize(static_cast<size_t>(max_length));
    example.loss_mask.resize(static_cast<size_t>(max_length));
  }
}

std::vector<int32_t> example_lengths(const std::vector<dataset::TokenizedExample>& examples) {
  std::vector<int32_t> lengths(examples.size());
  for (size_t i = 0; i < examples.size(); ++i) lengths[i] = examples[i].length();
  return lengths;
}

std::vector<PackedRow> pack_bfd(const std::vector<int32_t>& lengths, const PackingOptions& options,
                                std::span<const int64_t> order, bool split_overflow) {
  const int32_t capacity = options.max_length;
  TRLHPC_REQUIRE(capacity >= 1, "--max_length " + std::to_string(capacity) + ": packing needs max_length >= 1");
  std::vector<int64_t> all;
  if (order.empty()) order = all = identity_order(lengths.size());
  check_order(order, lengths.size());
  const size_t batch = options.map_batch_size > 0 ? static_cast<size_t>(options.map_batch_size) : order.size();

  CapacityTree tree(capacity);
  BinQueues queues(capacity);
  std::vector<PackedRow> rows;
  std::vector<Item> items;
  for (size_t begin = 0; begin < order.size(); begin += batch) {
    items.clear();
    for (size_t k = begin; k < std::min(order.size(), begin + batch); ++k) {
      int64_t example = order[k];
      int32_t length = lengths[static_cast<size_t>(example)];
      if (length <= 0) continue;  // TRL drops empty sequences before packing
      if (!split_overflow) {
        int32_t kept = std::min(length, capacity);  // truncation, keep_start
        items.push_back({kept, {example, 0, kept}});
        continue;
      }
      for (int32_t start = 0; start < length; start += capacity) {
        int32_t piece = std::min(capacity, length - start);
        items.push_back({piece, {example, start, piece}});
      }
    }
    bfd_one_batch(items, tree, queues, rows);
  }
  return rows;
}

std::vector<PackedRow> pack_wrapped(const std::vector<int32_t>& lengths, const PackingOptions& options,
                                    std::span<const int64_t> order) {
  const int32_t capacity = options.max_length;
  TRLHPC_REQUIRE(capacity >= 1, "--max_length " + std::to_string(capacity) + ": packing needs max_length >= 1");
  std::vector<int64_t> all;
  if (order.empty()) order = all = identity_order(lengths.size());
  check_order(order, lengths.size());
  const size_t batch = options.map_batch_size > 0 ? static_cast<size_t>(options.map_batch_size) : order.size();

  std::vector<PackedRow> rows;
  for (size_t begin = 0; begin < order.size(); begin += batch) {
    // Concatenate this map batch and cut it every `capacity` tokens; the last row of the batch may be short.
    PackedRow row;
    row.one_document = true;
    int32_t free = capacity;
    for (size_t k = begin; k < std::min(order.size(), begin + batch); ++k) {
      int64_t example = order[k];
      int32_t length = lengths[static_cast<size_t>(example)];
      for (int32_t start = 0; start < length;) {
        int32_t piece = std::min(free, length - start);
        row.segments.push_back({example, start, piece});
        start += piece;
        free -= piece;
        if (free == 0) {
          rows.push_back(std::move(row));
          row = PackedRow{};
          row.one_document = true;
          free = capacity;
        }
      }
    }
    if (!row.segments.empty()) rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<PackedRow> pack(PackingStrategy strategy, const std::vector<int32_t>& lengths,
                            const PackingOptions& options, std::span<const int64_t> order) {
  switch (strategy) {
    case PackingStrategy::kBfd: return pack_bfd(lengths, options, order, false);
    case PackingStrategy::kBfdSplit: return pack_bfd(lengths, options, order, true);
    case PackingStrategy::kWrapped: return pack_wrapped(lengths, options, order);
  }
  TRLHPC_ASSERT(false, "unknown packing strategy");
  return {};
}

std::vector<PackedRow> unpacked_rows(const std::vector<int32_t>& lengths, int32_t max_length, TruncationMode mode,
                                     std::span<const int64_t> order) {
  std::vector<int64_t> all;
  if (order.empty()) order = all = identity_order(lengths.size());
  check_order(order, lengths.size());
  std::vector<PackedRow> rows(order.size());
  for (size_t k = 0; k < order.size(); ++k) {
    int64_t example = order[k];
    int32_t length = lengths[static_cast<size_t>(example)];
    int32_t kept = max_length > 0 ? std::min(length, max_length) : length;
    int32_t start = mode == TruncationMode::kKeepEnd ? length - kept : 0;
    if (kept > 0) rows[k].segments.push_back({example, start, kept});
  }
  return rows;
}

}  // namespace trlhpc::batching
