// Deterministic distributed sampler; the index arithmetic is documented in sampler.hpp.
//
// Worked example: N = 20 rows, per_device 2, dp 2, accumulation 2 -> G = 8, S = 4 slots, 2 full steps per
// epoch plus a partial step 2 of order[16..19]. Step 1 is order[8..15]; slot s = micro*2 + rank:
//   micro 0, rank 0 -> order[8,9]   micro 0, rank 1 -> order[10,11]
//   micro 1, rank 0 -> order[12,13] micro 1, rank 1 -> order[14,15]
// With per_device 8, dp 1, accumulation 1 the same step is order[8..15] in one micro-batch.
// Step 2 has R = 4 rows: slot s gets [floor(4s/4), floor(4(s+1)/4)) = 1 row. With drop_last, B' = 4
// divides 20, so nothing is dropped; with 22 rows drop_last keeps 20 (HF drops the incomplete micro-batch).
#include "trlhpc/data/batching/sampler.hpp"

#include <algorithm>
#include <numeric>
#include <string>

#include "trlhpc/core/error.hpp"

namespace trlhpc::batching {
namespace {

// Uniform integer in [0, range) without modulo bias (D. Lemire, "Fast Random Integer Generation in an
// Interval", ACM TOMACS 2019).
uint64_t bounded(uint64_t& state, uint64_t range) {
  unsigned __int128 m = static_cast<unsigned __int128>(splitmix64_next(state)) * range;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < range) {
    const uint64_t threshold = (0 - range) % range;
    while (low < threshold) {
      m = static_cast<unsigned __int128>(splitmix64_next(state)) * range;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

std::string number(int64_t v) { return std::to_string(v); }

}  // namespace

uint64_t splitmix64_next(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  // Stream key: the seed's own draw xor a second draw keyed by the epoch, so (seed, epoch) pairs do not collide
  // in the obvious ways (seed+1, epoch) vs (seed, epoch+1).
  uint64_t seed_state = seed;
  uint64_t epoch_state = static_cast<uint64_t>(epoch) ^ 0xD1B54A32D192ED03ull;
  uint64_t state = splitmix64_next(seed_state) ^ splitmix64_next(epoch_state);
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(bounded(state, static_cast<uint64_t>(i) + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

DistributedSampler::DistributedSampler(SamplerConfig config) : config_(config) {
  TRLHPC_REQUIRE(config_.per_device_batch_size >= 1,
                 "--per_device_train_batch_size " + number(config_.per_device_batch_size) + " must be >= 1");
  TRLHPC_REQUIRE(config_.gradient_accumulation_steps >= 1,
                 "--gradient_accumulation_steps " + number(config_.gradient_accumulation_steps) + " must be >= 1");
  TRLHPC_REQUIRE(config_.dp >= 1, "data-parallel size " + number(config_.dp) + " must be >= 1");
  TRLHPC_REQUIRE(config_.num_rows >= 1, "the training dataset has no rows to sample");
  global_batch_ = config_.per_device_batch_size * config_.dp * config_.gradient_accumulation_steps;
  const int64_t micro_rows = config_.per_device_batch_size * config_.dp;  // B'
  kept_rows_ = config_.drop_last ? config_.num_rows / micro_rows * micro_rows : config_.num_rows;
  TRLHPC_REQUIRE(kept_rows_ >= 1,
                 "the training dataset has " + number(config_.num_rows) + " rows, fewer than one batch of " +
                     number(micro_rows) + " (per_device_train_batch_size " + number(config_.per_device_batch_size) +
                     " x dp " + number(config_.dp) +
                     "), and --dataloader_drop_last drops an incomplete batch. Drop --dataloader_drop_last, lower "
                     "the batch size or use a larger dataset");
  micro_batches_per_epoch_ = (kept_rows_ + micro_rows - 1) / micro_rows;
  steps_per_epoch_ = (kept_rows_ + global_batch_ - 1) / global_batch_;
}

SamplerPosition DistributedSampler::position(int64_t global_step) const {
  TRLHPC_ASSERT(global_step >= 0, "negative global step");
  return {global_step / steps_per_epoch_, global_step % steps_per_epoch_};
}

int64_t DistributedSampler::global_step(SamplerPosition p) const { return p.epoch * steps_per_epoch_ + p.step; }

double DistributedSampler::epoch_after(int64_t global_step) const {
  const SamplerPosition p = position(global_step);
  const int64_t consumed = std::min((p.step + 1) * config_.gradient_accumulation_steps, micro_batches_per_epoch_);
  return static_cast<double>(p.epoch) + static_cast<double>(consumed) / static_cast<double>(micro_batches_per_epoch_);
}

void DistributedSampler::check_step(int64_t epoch, int64_t step) const {
  TRLHPC_ASSERT(epoch >= 0, "negative epoch");
  TRLHPC_ASSERT(step >= 0 && step < steps_per_epoch_, "step outside the epoch");
}

int64_t DistributedSampler::rows_in_step(int64_t step) const {
  return std::min(global_batch_, kept_rows_ - step * global_batch_);
}

const std::vector<int64_t>& DistributedSampler::epoch_order(int64_t epoch) {
  if (epoch != cached_epoch_) {
    if (config_.shuffle) {
      cached_order_ = epoch_permutation(config_.num_rows, config_.seed, epoch);
    } else {
      cached_order_.resize(static_cast<size_t>(config_.num_rows));
      std::iota(cached_order_.begin(), cached_order_.end(), 0);
    }
    cached_epoch_ = epoch;
  }
  return cached_order_;
}

std::vector<int64_t> DistributedSampler::global_batch(int64_t epoch, int64_t step) {
  check_step(epoch, step);
  const auto& order = epoch_order(epoch);
  auto first = order.begin() + step * global_batch_;
  return std::vector<int64_t>(first, first + rows_in_step(step));
}

std::vector<int64_t> DistributedSampler::micro_batch(int64_t epoch, int64_t step, int64_t micro_step,
                                                     int64_t dp_rank) {
  check_step(epoch, step);
  TRLHPC_ASSERT(micro_step >= 0 && micro_step < config_.gradient_accumulation_steps, "micro-step out of range");
  TRLHPC_ASSERT(dp_rank >= 0 && dp_rank < config_.dp, "dp rank out of range");
  const int64_t slots = config_.dp * config_.gradient_accumulation_steps;
  const int64_t slot = micro_step * config_.dp + dp_rank;
  const int64_t rows = rows_in_step(step);
  const int64_t begin = slot * rows / slots, end = (slot + 1) * rows / slots;
  const auto& order = epoch_order(epoch);
  auto first = order.begin() + step * global_batch_;
  return std::vector<int64_t>(first + begin, first + end);
}

EvalPlan eval_micro_batches(int64_t rows, int64_t dp_size, int64_t dp_rank, int64_t batch_size) {
  TRLHPC_REQUIRE(rows >= 0, "eval rows " + number(rows) + " must be >= 0");
  TRLHPC_REQUIRE(dp_size >= 1, "data-parallel size " + number(dp_size) + " must be >= 1");
  TRLHPC_REQUIRE(dp_rank >= 0 && dp_rank < dp_size,
                 "data-parallel rank " + number(dp_rank) + " must be in [0, " + number(dp_size) + ")");
  TRLHPC_REQUIRE(batch_size >= 1, "eval micro-batch size " + number(batch_size) + " must be >= 1");
  std::vector<int64_t> mine;
  for (int64_t row = dp_rank; row < rows; row += dp_size) mine.push_back(row);
  EvalPlan plan;
  for (size_t begin = 0; begin < mine.size(); begin += static_cast<size_t>(batch_size)) {
    const size_t end = std::min(mine.size(), begin + static_cast<size_t>(batch_size));
    plan.micro_batches.emplace_back(mine.begin() + static_cast<std::ptrdiff_t>(begin),
                                    mine.begin() + static_cast<std::ptrdiff_t>(end));
  }
  const int64_t most_rows = rows / dp_size + (rows % dp_size != 0);  // rank 0's share
  plan.micro_batch_count = most_rows / batch_size + (most_rows % batch_size != 0);
  return plan;
}

}  // namespace trlhpc::batching
