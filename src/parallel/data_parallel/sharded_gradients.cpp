#include "src/parallel/data_parallel/sharded_gradients.hpp"

#include <algorithm>
#include <chrono>
#include <span>

#include "trlhpc/core/error.hpp"
#include "trlhpc/core/tensor_span.hpp"
#include "trlhpc/ops/ops.hpp"
#include "src/parallel/tensor/tensor_parallel_norm.hpp"

namespace trlhpc {
namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

ShardedGradients::ShardedGradients(ParameterStore& store, ProcessGroups& groups, Ops& ops, UnitBufferPool& pool)
    : store_(store),
      fsdp_(groups.fsdp().device()),
      replicate_(groups.dp_replicate().device()),
      fsdp_host_(groups.fsdp().host()),
      tp_(groups.tp().host()),
      ops_(ops),
      pool_(pool) {
  const int P = fsdp_.size();
  for (int u = 0; u < store.num_units(); ++u) {
    const int64_t padded = store.unit(u).padded_numel;
    TRLHPC_ASSERT(padded % P == 0, "unit " + std::to_string(u) + " has " + std::to_string(padded) +
                                       " elements, not a multiple of the fsdp size " + std::to_string(P) +
                                       " (build the ParameterStore with pad_multiple = fsdp size)");
    shard_numel_.push_back(padded / P);
    shards_.push_back(ops.zeros({padded / P}));
  }
}

void ShardedGradients::reduce(int unit, Tensor full, bool recycle, bool final_contribution) {
  TRLHPC_ASSERT(full.numel() == store_.unit(unit).padded_numel, "reduce() needs the unit's full gradient buffer");
  if (step_finished_) {
    timeline_ = CommTimeline{};
    step_finished_ = false;
  }
  if (final_contribution) {
    // Lag of one unit: the previous unit's reduce-scatter has had this unit's backward to complete.
    for (int waiting : awaiting_replicate_) {
      complete_unit(waiting);
      start_replicate(waiting);
    }
    awaiting_replicate_.clear();
  }
  Pending p{unit, std::move(full), recycle, pool_.acquire(shard_numel(unit)), CommRequest{},
            timeline_.bucket_launch.size()};
  timeline_.bucket_launch.push_back(now_seconds());
  timeline_.bucket_done.push_back(0.0);
  p.request = fsdp_.reduce_scatter_async(span_of<const float>(p.full),
                                         span_of<float>(p.received));
  pending_.push_back(std::move(p));
  if (final_contribution) awaiting_replicate_.push_back(unit);
  poll();
  // Bounded memory: each reduction in flight holds a full-size unit buffer (ZeRO-2/3). When peers lag
  // (or MPI progresses only inside MPI calls) they would pile up; wait for the oldest instead. It is
  // the oldest of its unit too, so accumulation order is kept. Waiting launches nothing: no ordering risk.
  while (pending_.size() > kMaxReductionsInFlight) {
    accumulate(pending_.front());
    pending_.erase(pending_.begin());
  }
}

void ShardedGradients::accumulate(Pending& p) {
  p.request.wait();  // no-op once test() saw it complete
  if (timeline_.bucket_done[p.slot] == 0.0) timeline_.bucket_done[p.slot] = now_seconds();
  ops_.add_inplace(shards_[static_cast<size_t>(p.unit)], p.received);
  pool_.release(std::move(p.received));
  if (p.recycle) pool_.release(std::move(p.full));
}

void ShardedGradients::poll() {
  // An entry is accumulated only when no earlier entry of its unit is still pending, so the additions
  // into a shard happen in launch order on every run (fp32 addition is not associative).
  std::vector<int> blocked;
  std::vector<Pending> still;
  for (Pending& p : pending_) {
    const bool earlier_pending = std::find(blocked.begin(), blocked.end(), p.unit) != blocked.end();
    if (!earlier_pending && p.request.test()) {
      accumulate(p);
    } else {
      blocked.push_back(p.unit);
      still.push_back(std::move(p));
    }
  }
  pending_ = std::move(still);
}

void ShardedGradients::complete_unit(int unit) {
  std::vector<Pending> still;
  for (Pending& p : pending_) {
    if (p.unit == unit)
      accumulate(p);
    else
      still.push_back(std::move(p));
  }
  pending_ = std::move(still);
}

void ShardedGradients::start_replicate(int unit) {
  replicate_requests_.push_back(replicate_.all_reduce_async(span_of<float>(shards_[static_cast<size_t>(unit)])));
}

void ShardedGradients::finish() {
  timeline_.backward_end = now_seconds();
  poll();
  // Final units first, in the order their last reductions were launched (the same on every rank).
  for (int waiting : awaiting_replicate_) {
    complete_unit(waiting);
    start_replicate(waiting);
  }
  awaiting_replicate_.clear();
  while (!pending_.empty()) complete_unit(pending_.front().unit);
  for (CommRequest& r : replicate_requests_) r.wait();
  replicate_requests_.clear();
  step_finished_ = true;
}

double ShardedGradients::norm_squared() {
  // Padding elements are zero (buffers are zero-filled and only real slots receive gradients).
  double local = 0;
  for (int u = 0; u < store_.num_units(); ++u)
    local += tp_counted_sum_of_squares(ops_, store_.unit(u), shard_begin(u), shards_[static_cast<size_t>(u)], tp_.rank());
  fsdp_host_.all_reduce(std::span<double>(&local, 1));
  tp_.all_reduce(std::span<double>(&local, 1));  // tp slices; replicated slots counted on tp rank 0 only
  return local;
}

void ShardedGradients::scale(float factor) {
  for (const Tensor& s : shards_) ops_.scale_inplace(s, factor);
}

void ShardedGradients::zero() {
  for (const Tensor& s : shards_) ops_.fill_zero(s);
}

int64_t ShardedGradients::bytes() const {
  int64_t total = 0;
  for (const Tensor& s : shards_) total += static_cast<int64_t>(s.nbytes());
  return total;
}

}  // namespace trlhpc
