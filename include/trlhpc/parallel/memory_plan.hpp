#pragma once
// Per-rank bytes of parameters, gradients and optimizer state for a model under a layout, computed the
// way ParameterStore and the strategies allocate them (TP-local tensors, units padded to the fsdp size,
// fp32 parameters and gradients, two fp32 Adam moments), without allocating anything. `trlhpc env`
// prints it so a user sees before launching whether a model fits.
#include <cstdint>

#include "trlhpc/model/model_config.hpp"
#include "trlhpc/parallel/data_parallel.hpp"
#include "trlhpc/parallel/parallel_dims.hpp"

namespace trlhpc {

// The largest rank's bytes (tp rank 0 holds the replicated tensors too).
MemoryAccount plan_memory(const ModelConfig& config, const ParallelDims& dims, ShardingKind sharding);

}  // namespace trlhpc
