#pragma once
// HostOffload: the host side of CPU offload for the sharded strategies (ZeRO-Offload, Ren et al. 2021;
// DeepSpeed offload_optimizer / offload_param; FSDP CPUOffload(offload_params=True)).
//
// The optimizer of an offloading rank runs on the host (AdamW with OptimizerHome::Host: the CPU AdamW
// kernel, moments in pinned host memory). Per step:
//
//   stage_grads     the rank's reduced (and clipped) gradient shards go device -> host by queued
//                   copies into pinned buffers; one wait, then AdamW reads them on the host
//   AdamW           updates the fp32 masters and the moments on the host
//   push_masters    (offload_optimizer) the updated masters go host -> device by queued copies into the
//                   parameters the device computes with; the collectives that follow on the backend's
//                   stream (ZeRO-1/2's all-gather of updated shards) are ordered after them
//
// Two kinds (DataParallelOptions::offload):
//   Optimizer   the device keeps its parameters (ZeRO-1/2: the full buffers, ZeRO-3: the fp32 shard)
//               as the copy it computes with; the fp32 master of the rank's range lives here, and
//               is the one the optimizer updates and a checkpoint saves. Device saving: the moments.
//   Parameters  (ZeRO-3) the fp32 parameter shard itself lives in pinned host memory and is the master
//               (ShardedParameters with host shards stages it to the device per all-gather): no master
//               copy here, only the gradient staging. Device saving: the shard and the moments.
// On the CPU backend "device" memory is host memory and the copies are memcpy: the same code runs and
// is tested there, bit for bit against training without offload.
#include <cstdint>
#include <vector>

#include "trlhpc/core/tensor.hpp"
#include "trlhpc/optim/adamw.hpp"
#include "trlhpc/parallel/data_parallel/data_parallel.hpp"

namespace trlhpc {

class Ops;

class HostOffload {
 public:
  // shard_numel[u]: the elements of unit u this rank's optimizer updates. masters: keep host fp32
  // masters (Offload::Optimizer) rather than parameters that already live on the host.
  HostOffload(Ops& ops, const std::vector<int64_t>& shard_numel, bool masters);

  // Queued device -> host copies of the gradient shards, then one wait: the host gradients AdamW reads.
  std::vector<Tensor> stage_grads(const std::vector<Tensor>& device_grads);
  bool has_masters() const { return !masters_.empty(); }
  const std::vector<Tensor>& masters() const { return masters_; }
  // Queued host -> device copies of the masters into the parameters the device computes with.
  void push_masters(const std::vector<Tensor>& device_params);
  // Device -> host copies of those parameters into the masters, then a wait (after loading).
  void pull_masters(const std::vector<Tensor>& device_params);
  // Adds the pinned host bytes (masters, gradient staging, and the optimizer's moments when they live on
  // the host) to m.host_bytes, taking the moments out of m.optimizer_bytes (into
  // m.device_bytes_saved).
  void account(MemoryAccount& m, const AdamW* optimizer) const;

 private:
  Ops& ops_;
  std::vector<Tensor> masters_, grads_;  // per unit, (shard_numel)
};

}  // namespace trlhpc
