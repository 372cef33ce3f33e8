#include "src/parallel/data_parallel/ddp_strategy.hpp"

#include <algorithm>
#include <chrono>

#include "trlhpc/ops/ops.hpp"
#include "src/parallel/tensor/tensor_parallel_norm.hpp"

namespace trlhpc {
namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

DdpStrategy::DdpStrategy(const DataParallelOptions& options, ParameterStore& store, ProcessGroups& groups, Ops& ops)
    : store_(store), comm_(groups.loss().device()), tp_(groups.tp().host()), ops_(ops) {
  const int64_t bucket = std::max<int64_t>(1, options.bucket_elements);
  unit_buckets_.resize(static_cast<size_t>(store.num_units()));
  for (int u = 0; u < store.num_units(); ++u) {
    const int64_t n = store.unit(u).numel;
    for (int64_t b = 0; b < n; b += bucket) {
      unit_buckets_[static_cast<size_t>(u)].push_back(buckets_.size());
      buckets_.push_back({u, b, std::min(n, b + bucket)});
    }
  }
}

void DdpStrategy::begin_micro_step(bool last_micro_step) {
  communicate_ = last_micro_step;
  if (last_micro_step) timeline_ = CommTimeline{};
}

void DdpStrategy::after_backward(int unit) {
  if (!communicate_) return;
  for (size_t index : unit_buckets_[static_cast<size_t>(unit)]) {
    const Bucket& b = buckets_[index];
    float* grads = store_.unit(b.unit).grads.f32();
    std::span<float> span(grads + b.begin, static_cast<size_t>(b.end - b.begin));
    timeline_.bucket_launch.push_back(now_seconds());
    timeline_.bucket_done.push_back(0.0);
    pending_.push_back(comm_.all_reduce_async(span));
    pending_index_.push_back(static_cast<int>(timeline_.bucket_done.size() - 1));
  }
  poll();
}

void DdpStrategy::poll() {
  for (size_t i = 0; i < pending_.size(); ++i) {
    const int slot = pending_index_[i];
    if (timeline_.bucket_done[static_cast<size_t>(slot)] == 0.0 && pending_[i].test())
      timeline_.bucket_done[static_cast<size_t>(slot)] = now_seconds();
  }
}

void DdpStrategy::finish_gradients() {
  if (!communicate_) return;
  timeline_.backward_end = now_seconds();
  poll();
  for (size_t i = 0; i < pending_.size(); ++i) {
    const int slot = pending_index_[i];
    pending_[i].wait();
    if (timeline_.bucket_done[static_cast<size_t>(slot)] == 0.0) timeline_.bucket_done[static_cast<size_t>(slot)] = now_seconds();
  }
  pending_.clear();
  pending_index_.clear();
}

double DdpStrategy::grad_norm_squared() {
  // Every rank of the loss group holds the same reduced gradients of its tp slice: sum the tp slices,
  // counting tp-replicated parameters once (tensor_parallel_norm.hpp).
  double total = 0;
  for (ParameterUnit& unit : store_.units())
    total += tp_counted_sum_of_squares(ops_, unit, 0, unit.grads.view({unit.numel}), tp_.rank());
  tp_.all_reduce(std::span<double>(&total, 1));
  return total;
}

void DdpStrategy::scale_owned_grads(float factor) {
  for (ParameterUnit& unit : store_.units()) ops_.scale_inplace(unit.grads.view({unit.numel}), factor);
}

std::vector<OptimizerRange> DdpStrategy::owned_ranges() const {
  std::vector<OptimizerRange> ranges;
  for (const ParameterUnit& unit : store_.units()) ranges.push_back({0, unit.numel});
  return ranges;
}

std::vector<Tensor> DdpStrategy::owned_params() {
  std::vector<Tensor> out;
  for (ParameterUnit& unit : store_.units()) out.push_back(unit.params.view({unit.numel}));
  return out;
}

std::vector<Tensor> DdpStrategy::owned_grads() {
  std::vector<Tensor> out;
  for (ParameterUnit& unit : store_.units()) out.push_back(unit.grads.view({unit.numel}));
  return out;
}

std::vector<Tensor> DdpStrategy::owned_compute() {
  std::vector<Tensor> out;
  bool any = false;
  for (ParameterUnit& unit : store_.units()) {
    any = any || unit.compute.data();
    out.push_back(unit.compute.data() ? unit.compute.view({unit.numel}) : Tensor());
  }
  if (!any) out.clear();  // fp32: no copies, nothing for the optimizer to write
  return out;
}

void DdpStrategy::finish_step() {
  // The optimizer has just updated every unit's params in place and written their bf16 compute copies
  // (owned_compute) in the same pass: nothing to refresh.
  store_.zero_grads(ops_);
}

MemoryAccount DdpStrategy::memory(const AdamW* optimizer) const {
  MemoryAccount m;
  for (const ParameterUnit& unit : store_.units()) {
    m.parameter_bytes += static_cast<int64_t>(unit.params.nbytes());
    m.gradient_bytes += static_cast<int64_t>(unit.grads.nbytes());
  }
  m.parameter_bytes += store_.compute_bytes();  // bf16 compute copies (--bf16)
  if (optimizer) m.optimizer_bytes = optimizer->state_bytes();
  return m;
}

}  // namespace trlhpc
