#include "trlhpc/train/parallelize.hpp"

#include "trlhpc/core/error.hpp"
#include "trlhpc/model/tensor_parallel.hpp"
#include "trlhpc/parallel/mesh/process_groups.hpp"
#include "trlhpc/parallel/sequence/sequence_attention_for.hpp"

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

// LoRA: the frozen base's hooks around every decoder unit, the adapter strategy's around the decoder
// units that have an adapter unit (lora_unit_layout: the layers, and the embedding / final unit when
// modules_to_save trains them). The base gathers first: the adapters' gathers are small.
class AdapterUnitHooks final : public UnitHooks {
 public:
  AdapterUnitHooks(UnitHooks& base, UnitHooks& adapters, LoraUnitLayout layout)
      : base_(base), adapters_(adapters), layout_(layout) {}
  void before_forward(int unit) override {
    base_.before_forward(unit);
    if (const int a = layout_.of_decoder_unit(unit); a >= 0) adapters_.before_forward(a);
  }
  void after_forward(int unit) override {
    base_.after_forward(unit);
    if (const int a = layout_.of_decoder_unit(unit); a >= 0) adapters_.after_forward(a);
  }
  void before_backward(int unit) override {
    base_.before_backward(unit);
    if (const int a = layout_.of_decoder_unit(unit); a >= 0) adapters_.before_backward(a);
  }
  void after_backward(int unit) override {
    if (const int a = layout_.of_decoder_unit(unit); a >= 0) adapters_.after_backward(a);
    base_.after_backward(unit);
  }

 private:
  UnitHooks& base_;
  UnitHooks& adapters_;
  LoraUnitLayout layout_;
};

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
  const ShardingKind sharding = options.data_parallel.sharding;
  if (options.lora) {  // the frozen base and the trained adapters
    lora_ = options.lora;
    lora_targets_ = resolve_lora_targets(config, *lora_);
    lora_specs_ = lora_parameter_specs(config, *lora_, lora_targets_, tp_);
    base_store_ = std::make_unique<ParameterStore>(config, ops, groups.fsdp().size(), tp_, frozen_base_buffers(sharding));
    frozen_base_ = make_frozen_base(sharding, *base_store_, groups, ops);
    store_ = std::make_unique<ParameterStore>(lora_specs_, lora_unit_layout(config, *lora_).count, ops, groups.fsdp().size(), tp_,
                                              full_unit_buffers(sharding));
  } else {
    store_ = std::make_unique<ParameterStore>(config, ops, groups.fsdp().size(), tp_, full_unit_buffers(sharding));
  }
  // 3. data-parallel strategy (the decoder's hooks).
  strategy_ = make_data_parallel_strategy(options.data_parallel, *store_, groups, ops);
  if (frozen_base_)
    adapter_hooks_ = std::make_unique<AdapterUnitHooks>(*frozen_base_, *strategy_, lora_unit_layout(config, *lora_));
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
  parallelism.hooks = adapter_hooks_ ? adapter_hooks_.get() : strategy_.get();
  DecoderAdapters adapters;
  if (lora_) adapters = DecoderAdapters{&*lora_, &lora_targets_, store_.get()};
  decoder_ = std::make_unique<Decoder>(config, ops, base_store(), options.gradient_checkpointing,
                                       options.loss_chunk_tokens, parallelism, adapters, options.token_loss);
}

ParallelModel::~ParallelModel() = default;

void ParallelModel::load_weights(const UnitRangeSource& source) {
  if (frozen_base_) frozen_base_->load(source);
  else strategy_->state().load_parameters(source);
}

void ParallelModel::load_adapters(const UnitRangeSource& source) {
  TRLHPC_ASSERT(frozen_base_ != nullptr, "load_adapters: this model has no LoRA adapters");
  strategy_->state().load_parameters(source);
}

MemoryAccount ParallelModel::memory(const AdamW* optimizer) const {
  MemoryAccount m = strategy_->memory(optimizer);
  if (frozen_base_) {
    m.parameter_bytes += frozen_base_->parameter_bytes();
    m.transient_bytes += frozen_base_->transient_bytes();
  }
  return m;
}

Batch ParallelModel::shard_tokens(const Batch& batch) const {
  return shard_sequence(pad_sequence(batch, sequence_multiple_), shard_);
}

std::unique_ptr<ParallelModel> parallelize(const ModelConfig& config, Ops& ops, ProcessGroups& groups,
                                           const ParallelizeOptions& options) {
  return std::make_unique<ParallelModel>(config, ops, groups, options);
}

}  // namespace trlhpc
