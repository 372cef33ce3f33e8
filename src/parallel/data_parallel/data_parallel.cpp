#include "trlhpc/parallel/data_parallel/data_parallel.hpp"

#include "src/parallel/data_parallel/ddp_strategy.hpp"
#include "src/parallel/data_parallel/zero1_strategy.hpp"
#include "src/parallel/data_parallel/zero2_strategy.hpp"
#include "src/parallel/data_parallel/zero3_strategy.hpp"
#include "trlhpc/core/error.hpp"

namespace trlhpc {

ShardingKind parse_sharding(const std::string& name) {
  if (name == "none" || name == "ddp" || name == "no") return ShardingKind::None;
  if (name == "zero1") return ShardingKind::Zero1;
  if (name == "zero2") return ShardingKind::Zero2;
  if (name == "zero3" || name == "fsdp") return ShardingKind::Zero3;
  throw UserError("--sharding " + name + " is not known: use none, zero1, zero2 or zero3");
}

const char* sharding_name(ShardingKind kind) {
  switch (kind) {
    case ShardingKind::None: return "none (DDP)";
    case ShardingKind::Zero1: return "zero1";
    case ShardingKind::Zero2: return "zero2";
    case ShardingKind::Zero3: return "zero3";
  }
  return "?";
}

FullUnitBuffers full_unit_buffers(ShardingKind kind) {
  return FullUnitBuffers{.params = kind != ShardingKind::Zero3,
                         .grads = kind != ShardingKind::Zero2 && kind != ShardingKind::Zero3};
}

const char* offload_name(Offload offload) {
  switch (offload) {
    case Offload::None: return "none";
    case Offload::Optimizer: return "optimizer";
    case Offload::Parameters: return "optimizer + parameters";
  }
  return "?";
}

std::unique_ptr<DataParallelStrategy> make_data_parallel_strategy(const DataParallelOptions& options,
                                                                  ParameterStore& store, ProcessGroups& groups,
                                                                  Ops& ops) {
  // The sft job refuses these with the config key's name (sft_validation); this is the library's check.
  if (options.offload != Offload::None && options.sharding == ShardingKind::None)
    throw UserError("CPU offload needs a sharded optimizer: use sharding zero1, zero2 or zero3 (DeepSpeed offloads "
                    "ZeRO stages 1-3 only)");
  if (options.offload == Offload::Parameters && options.sharding != ShardingKind::Zero3)
    throw UserError(std::string("parameter offload needs sharding zero3 (FULL_SHARD): under ") +
                    sharding_name(options.sharding) + " every rank keeps the full parameters on the device");
  switch (options.sharding) {
    case ShardingKind::None: return std::make_unique<DdpStrategy>(options, store, groups, ops);
    case ShardingKind::Zero1: return std::make_unique<Zero1Strategy>(options, store, groups, ops);
    case ShardingKind::Zero2: return std::make_unique<Zero2Strategy>(options, store, groups, ops);
    case ShardingKind::Zero3: return std::make_unique<Zero3Strategy>(options, store, groups, ops);
  }
  throw UserError(std::string("unknown sharding kind ") + sharding_name(options.sharding));
}

}  // namespace trlhpc
