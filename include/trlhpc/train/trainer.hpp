#pragma once
// Trainer: one optimizer step over a rank's micro-batches, identical in meaning on every layout.
//
// The step loss is the token mean over the whole global batch (CONTRACT.md): before any backward the
// target tokens of all micro-batches on all ranks of the `loss` group are summed (N_global), and each
// micro-batch's loss gradient is scaled by 1/N_global. Gradients then need only a SUM across ranks,
// and any split of the same global batch (dp x accumulation x per-device) gives the same update.
#include <cstdint>
#include <memory>
#include <vector>

#include "trlhpc/data/batch.hpp"
#include "trlhpc/model/decoder.hpp"
#include "trlhpc/model/model_weights.hpp"
#include "trlhpc/model/parameter_store.hpp"
#include "trlhpc/optim/adamw.hpp"
#include "trlhpc/parallel/data_parallel.hpp"
#include "trlhpc/parallel/mpi_communicator.hpp"
#include "trlhpc/runtime/mpi_comm.hpp"

namespace trlhpc {

class ProcessGroups;

struct TrainerOptions {
  DataParallelOptions data_parallel;
  AdamWConfig adamw;
  double max_grad_norm = 1.0;  // 0 disables clipping
  bool gradient_checkpointing = false;
  int64_t loss_chunk_tokens = 1024;
  // Megatron sequence parallelism inside the tp group (decoder.hpp); every micro-batch's tokens must
  // then divide by tp (pad rows to ParallelDims::sequence_multiple).
  bool tp_sequence_parallel = false;
};

struct StepResult {
  double loss = 0;             // mean CE over the global batch's target tokens
  double grad_norm = 0;        // global L2 norm before clipping
  int64_t target_tokens = 0;   // N_global
  int64_t tokens = 0;          // non-padding input tokens of the global batch
};

class Trainer {
 public:
  Trainer(const ModelConfig& config, Ops& ops, ProcessGroups& groups, const TrainerOptions& options);
  ~Trainer();

  // Loads initial weights into whatever this rank stores (every unit, or its shards).
  void load_weights(const UnitRangeSource& source);
  // One optimizer step on this rank's micro-batches (the same count on every rank) at learning rate lr.
  StepResult step(const std::vector<Batch>& micro_batches, double lr);
  // Mean loss over the global evaluation batch (no gradients).
  double evaluate(const std::vector<Batch>& batches);

  ParameterStore& store() { return *store_; }
  // This rank's tensor-parallel slice: pass it to weights_from_hf_dir / weights_from_init.
  TpLayout tp_layout() const { return store_->tp_layout(); }
  Ops& ops() { return ops_; }
  Decoder& decoder() { return *decoder_; }
  AdamW& optimizer() { return *optimizer_; }
  DataParallelStrategy& strategy() { return *strategy_; }
  MemoryAccount memory() const { return strategy_->memory(optimizer_.get()); }

 private:
  // Batches whose token count tp sequence parallel cannot split evenly (0 without it), and the
  // UserError for a non-zero count summed over the loss group.
  int64_t unsplittable_batches(const std::vector<Batch>& batches) const;
  void require_splittable(int64_t unsplittable) const;

  Ops& ops_;
  ProcessGroups& groups_;
  TrainerOptions options_;
  std::unique_ptr<ParameterStore> store_;
  std::unique_ptr<DataParallelStrategy> strategy_;
  std::unique_ptr<Decoder> decoder_;
  MpiComm kv_share_mpi_;                             // tp > KVH: tp ranks sharing this rank's kv head
  std::unique_ptr<MpiCommunicator> kv_share_comm_;   // over kv_share_mpi_
  std::unique_ptr<AdamW> optimizer_;
};

}  // namespace trlhpc
