#include "trlhpc/parallel/memory_plan.hpp"

#include "trlhpc/model/parameter_names.hpp"

namespace trlhpc {

MemoryAccount plan_memory(const ModelConfig& config, const ParallelDims& dims, ShardingKind sharding) {
  const int64_t fsdp = dims.fsdp();
  int64_t full = 0, shard = 0;  // fp32 elements of all units on this rank: full and 1/fsdp shard
  for (int u = 0; u < parameter_unit_count(config); ++u) {
    int64_t n = 0;
    for (const ParameterSpec& spec : unit_parameter_specs(config, u, TpLayout{dims.tp, 0})) n += spec.numel();
    const int64_t padded = (n + fsdp - 1) / fsdp * fsdp;
    full += padded;
    shard += padded / fsdp;
  }
  MemoryAccount m;
  const int64_t f = 4;
  m.parameter_bytes = f * (sharding == ShardingKind::Zero3 ? shard : full);
  // ZeRO-1 keeps the full gradients it accumulates into plus the shard its reduce-scatter fills.
  m.gradient_bytes = f * (sharding == ShardingKind::None    ? full
                          : sharding == ShardingKind::Zero1 ? full + shard
                                                            : shard);
  m.optimizer_bytes = 2 * f * (sharding == ShardingKind::None ? full : shard);
  return m;
}

}  // namespace trlhpc
