#include "trlhpc/train/parallelize.hpp"

#include "trlhpc/core/error.hpp"
#include "trlhpc/model/tensor_parallel.hpp"
#include "trlhpc/parallel/process_groups.hpp"
#include "trlhpc/parallel/sequence_attention_for.hpp"

namespace trlhpc {
namespace {

// Step 4: the kv-share group the decoder sums k/v gradients over, or null when each kv head lives on
// one tp rank. The group is the mesh's; a mesh built without the model's kv heads is a caller error.
Communicator* kv_share_group(const ModelConfig& config, ProcessGroups& groups) {
  const int tp = groups.tp().size();
  const int64_t want = tp > config.num_key_value_heads ? tp / config.num_key_value_heads : 1;
  TRLHPC_ASSERT(groups.kv_share().size() == want,
                "parallelize: tp " + std::to_string(tp) + " over " + std::to_string(config.num_key_value_heads) +
                    " kv heads needs kv_share groups of " + std::to_string(want) + " ranks, the mesh has " +
                    std::to_string(groups.kv_share().size()) +
                    ": build the ParallelDims with for_model(num_attention_heads, num_key_value_heads)");
  return want > 1 ? &groups.kv_share().device() : nullptr;
}

}  // namespace

ParallelModel::ParallelModel(const ModelConfig& config, Ops& ops, ProcessGroups& groups,
                             const ParallelizeOptions& options)
    : config_(config), ops_(ops), groups_(groups) {
  const ParallelDims& dims = groups.mesh().dims();
  // 1. tp layout. A tp group of 1 is the whole model.
  validate_tensor_parallel(config, groups.tp().size());
  tp_ = TpLayout{groups.tp().size(), groups.tp().rank()};
  // 2. parameter store of this tp slice, padded so every unit shards evenly over fsdp; full-size
  // buffers only where the strategy keeps them (a ZeRO-3 rank never holds the whole model).
  store_ = std::make_unique<ParameterStore>(config, ops, groups.fsdp().size(), tp_,
                                            full_unit_buffers(options.data_parallel.sharding));
  // 3. data-parallel strategy (the decoder's hooks).
  strategy_ = make_data_parallel_strategy(options.data_parallel, *store_, groups, ops);
  // 4. kv-share group.
  Communicator* kv_share = kv_share_group(config, groups);
  // 5. sequence attention.
  attention_ = sequence_attention_for(groups, options.sp_gradient_dtype);
  // 6. token sharding.
  shard_ = sequence_shard_for(dims, groups.cp().rank(), groups.sp().rank());
  sequence_multiple_ = dims.sequence_multiple();

  DecoderParallelism parallelism;
  parallelism.tp = &groups.tp().device();
  parallelism.tp_host = &groups.tp().host();
  parallelism.kv_share = kv_share;
  parallelism.attention = attention_.get();
  parallelism.tp_sequence_parallel = dims.tp_sequence_parallel;
  parallelism.hooks = strategy_.get();
  decoder_ = std::make_unique<Decoder>(config, ops, *store_, options.gradient_checkpointing, options.loss_chunk_tokens,
                                       parallelism);
}

ParallelModel::~ParallelModel() = default;

void ParallelModel::load_weights(const UnitRangeSource& source) { strategy_->state().load_parameters(source); }

Batch ParallelModel::shard_tokens(const Batch& batch) const {
  return shard_sequence(pad_sequence(batch, sequence_multiple_), shard_);
}

std::unique_ptr<ParallelModel> parallelize(const ModelConfig& config, Ops& ops, ProcessGroups& groups,
                                           const ParallelizeOptions& options) {
  return std::make_unique<ParallelModel>(config, ops, groups, options);
}

}  // namespace trlhpc
