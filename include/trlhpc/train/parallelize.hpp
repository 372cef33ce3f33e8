#pragma once
// parallelize(): the one place that lays a model out over the ranks of a mesh. Everything that trains,
// evaluates, exports or benchmarks a model on more than one rank starts here, so every caller gets
// the same wiring as `trlhpc sft`.
//
// Steps, in this order (each needs the ones before it; ARCHITECTURE.md "Set-up order"):
//   1. tp layout        this rank's tensor-parallel slice {tp size, tp rank}; the model's heads,
//                        intermediate size and vocabulary must split over it (validated first)
//   2. parameter store  the tp-local tensors in flat per-unit buffers, padded to the fsdp size
//   3. data parallel    the sharding strategy (DDP, ZeRO-1/2/3, hybrid) over the store; it is also
//                        the decoder's UnitHooks (gather / free / reduce around each unit)
//   4. kv-share group   tp > num_key_value_heads: the mesh's kv_share group (ranks holding copies of
//                        one kv head), which sums their k/v gradients; the mesh must have been built
//                        from ParallelDims::for_model (checked)
//   5. attention        ring attention over cp, Ulysses over sp, both, or LocalAttention
//   6. token sharding   which tokens of a micro-batch this rank keeps (zigzag over cp, contiguous
//                        over sp, rows padded to ParallelDims::sequence_multiple)
//   then the Decoder, which receives steps 1-5 as its DecoderParallelism.
// With LoRA (ParallelizeOptions::lora, lora.hpp) step 2 builds two stores: the frozen base (full on
// every rank, or fsdp shards gathered per unit under ZeRO-3: frozen_base.hpp) and the adapters (one
// unit per layer), and step 3's strategy trains the adapters only; its hooks and the base's fire
// together around each decoder unit (layer l's adapter unit is decoder unit l+1).
// Size-1 dimensions take the same path: the single-process model is parallelize() over a 1-rank mesh.
#include <cstdint>
#include <memory>
#include <optional>

#include "trlhpc/data/batch.hpp"
#include "trlhpc/model/decoder.hpp"
#include "trlhpc/model/lora.hpp"
#include "trlhpc/model/model_config.hpp"
#include "trlhpc/model/model_weights.hpp"
#include "trlhpc/model/parameter_store.hpp"
#include "trlhpc/model/sequence_attention.hpp"
#include "trlhpc/model/tp_layout.hpp"
#include "trlhpc/parallel/data_parallel/data_parallel.hpp"
#include "trlhpc/parallel/data_parallel/frozen_base.hpp"
#include "trlhpc/parallel/sequence/sequence_shard.hpp"

namespace trlhpc {

class Ops;
class ProcessGroups;

struct ParallelizeOptions {
  DataParallelOptions data_parallel;
  bool gradient_checkpointing = false;
  int64_t loss_chunk_tokens = 1024;  // tokens per chunk of the fused LM-head loss
  TokenLoss token_loss;              // --label_smoothing_factor, --loss_type dft (kernels/token_loss.hpp)
  // Ulysses' attention-gradient all-to-all dtype under --bf16 (seq_parallel_communication_data_type).
  DType sp_gradient_dtype = DType::F32;
  // --use_peft: train LoRA adapters on a frozen base (the targets are resolved, and validated, here).
  std::optional<LoraConfig> lora;
};

// The model as it is laid out over the ranks: owns the store, the strategy, the sequence attention
// and the decoder; borrows the Ops and the ProcessGroups, which must outlive it. Tp sequence
// parallelism and the kv-share size come from the mesh's ParallelDims.
class ParallelModel {
 public:
  ParallelModel(const ModelConfig& config, Ops& ops, ProcessGroups& groups, const ParallelizeOptions& options);
  ~ParallelModel();
  ParallelModel(const ParallelModel&) = delete;
  ParallelModel& operator=(const ParallelModel&) = delete;

  const ModelConfig& config() const { return config_; }
  Ops& ops() { return ops_; }
  ProcessGroups& groups() { return groups_; }
  TpLayout tp_layout() const { return tp_; }  // pass it to weights_from_hf_dir / weights_from_init
  // The trained parameters: the whole model, or with LoRA the adapters. The strategy, the optimizer and
  // checkpoints see this store.
  ParameterStore& store() { return *store_; }
  // The model's own parameters: store() itself, or with LoRA the frozen base.
  ParameterStore& base_store() { return base_store_ ? *base_store_ : *store_; }
  bool has_adapters() const { return frozen_base_ != nullptr; }
  const LoraConfig& lora() const { return *lora_; }
  const LoraTargets& lora_targets() const { return lora_targets_; }
  // The adapters' parameters, this rank's tp slices (lora_parameter_specs).
  const std::vector<ParameterSpec>& lora_specs() const { return lora_specs_; }
  FrozenBase& frozen_base() { return *frozen_base_; }
  // What this rank keeps, for the start line: the strategy's account plus a frozen base's parameters.
  MemoryAccount memory(const AdamW* optimizer) const;
  DataParallelStrategy& strategy() { return *strategy_; }
  ShardedStateView& sharded_state() { return strategy_->state(); }
  SequenceAttention& sequence_attention() { return *attention_; }
  const SequenceShard& sequence_shard() const { return shard_; }
  Decoder& decoder() { return *decoder_; }

  // Fills whatever this rank stores (every unit, or its shards) from `source`, which must read this
  // rank's tp slices (tp_layout()): the model's weights (the frozen base with LoRA).
  void load_weights(const UnitRangeSource& source);
  // LoRA: fills the adapters from `source` (lora_weights_from_init / _from_file over lora_specs()).
  void load_adapters(const UnitRangeSource& source);
  // This rank's tokens of a collated micro-batch: rows right-padded so that every cp/sp shard (and
  // its tp parts under tp sequence parallel) splits evenly, then cut to this rank's cp/sp shard.
  // Every rank of a cp/sp group passes the same rows (the sampler is keyed by the dp rank).
  Batch shard_tokens(const Batch& batch) const;

 private:
  ModelConfig config_;
  Ops& ops_;
  ProcessGroups& groups_;
  TpLayout tp_;
  int64_t sequence_multiple_ = 1;
  std::unique_ptr<ParameterStore> store_;
  std::unique_ptr<DataParallelStrategy> strategy_;
  // LoRA: the frozen base, its placement, the adapters' targets and the hooks of both.
  std::optional<LoraConfig> lora_;
  LoraTargets lora_targets_;
  std::vector<ParameterSpec> lora_specs_;
  std::unique_ptr<ParameterStore> base_store_;
  std::unique_ptr<FrozenBase> frozen_base_;
  std::unique_ptr<UnitHooks> adapter_hooks_;
  std::unique_ptr<SequenceAttention> attention_;
  SequenceShard shard_;
  std::unique_ptr<Decoder> decoder_;
};

std::unique_ptr<ParallelModel> parallelize(const ModelConfig& config, Ops& ops, ProcessGroups& groups,
                                           const ParallelizeOptions& options);

}  // namespace trlhpc
