#include "src/parallel/data_parallel/host_offload.hpp"

#include "trlhpc/core/error.hpp"
#include "trlhpc/ops/ops.hpp"

namespace trlhpc {

HostOffload::HostOffload(Ops& ops, const std::vector<int64_t>& shard_numel, bool masters) : ops_(ops) {
  for (const int64_t n : shard_numel) {
    grads_.push_back(ops.allocate_host({n}));
    if (masters) masters_.push_back(ops.allocate_host({n}));
  }
}

std::vector<Tensor> HostOffload::stage_grads(const std::vector<Tensor>& device_grads) {
  TRLHPC_ASSERT(device_grads.size() == grads_.size(), "stage_grads: one gradient shard per unit");
  for (size_t u = 0; u < grads_.size(); ++u) ops_.copy_to_host_async(grads_[u], device_grads[u]);
  ops_.wait_host_copies();
  return grads_;
}

void HostOffload::push_masters(const std::vector<Tensor>& device_params) {
  TRLHPC_ASSERT(device_params.size() == masters_.size(), "push_masters: one parameter range per unit");
  for (size_t u = 0; u < masters_.size(); ++u) ops_.copy_from_host_async(device_params[u], masters_[u]);
}

void HostOffload::pull_masters(const std::vector<Tensor>& device_params) {
  TRLHPC_ASSERT(device_params.size() == masters_.size(), "pull_masters: one parameter range per unit");
  for (size_t u = 0; u < masters_.size(); ++u) ops_.copy_to_host_async(masters_[u], device_params[u]);
  ops_.wait_host_copies();
}

void HostOffload::account(MemoryAccount& m, const AdamW* optimizer) const {
  for (const Tensor& t : masters_) m.host_bytes += static_cast<int64_t>(t.nbytes());
  for (const Tensor& t : grads_) m.host_bytes += static_cast<int64_t>(t.nbytes());
  if (optimizer && optimizer->home() == OptimizerHome::Host) {
    m.host_bytes += optimizer->state_bytes();
    m.optimizer_bytes -= optimizer->state_bytes();
    m.device_bytes_saved += optimizer->state_bytes();
  }
}

}  // namespace trlhpc
