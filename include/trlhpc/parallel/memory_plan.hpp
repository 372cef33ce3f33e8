#pragma once
// Per-rank memory of a model under a layout, computed the way the code allocates it, without allocating
// anything. `trlhpc env --model` prints it so a user sees before launching whether a model fits, and
// `trlhpc sft` prints the step's breakdown and floor in its start line.
//
//   persistent   plan_memory: parameters, gradients and the two fp32 Adam moments as ParameterStore and
//                the strategies hold them (TP-local tensors, units padded to the fsdp size; full or
//                sharded by the profile)
//   per step     plan_step_memory adds what a training step needs on top:
//                - the largest gathered unit and its gradient: ZeRO-3 gathers a unit's full parameters
//                  and gives it a full gradient buffer during its backward (ZeRO-2: the gradient only;
//                  DDP / ZeRO-1 keep those buffers persistently, already counted above)
//                - activations: the decoder's buffers for one micro-batch, from the decoder itself
//                  (Decoder::planned_activation_bytes: its allocation routine against a byte counter)
//                - the loss chunk: loss_chunk_tokens rows of logits (this tp rank's vocabulary) and the
//                  chunk's hidden rows and their gradient, alive during the fused loss
//                - attention: the sequence attention's buffers (Ulysses' head-sharded copies, the ring's
//                  K/V and dK/dV buffers) from their own allocation routines, and on the CPU backend the
//                  attention kernel's scratch (repacked K/V, the backward's dS store of up to 64 MiB)
//   offload      CPU offload (DataParallelOptions::offload) moves state to pinned host memory, counted
//                in MemoryAccount::host_bytes: Optimizer takes the moments off the device and keeps fp32
//                masters of the rank's range and a gradient staging copy on the host; Parameters
//                (ZeRO-3) also takes the parameter shard off the device (the host shard is the master),
//                and a step stages one shard at a time back (counted with the gathered unit)
//   floor        the sum: what the peak resident memory of a step should approach (device memory). A rank needs some
//                more (communication buffers, units prefetched or still reducing, the process itself).
//   process      on the CPU backend the caller adds the process's own resident memory before the model
//                and data are loaded (libraries, MPI, the tokenizer: process_resident_bytes), so that
//                predicted_peak_bytes() is what the peak resident memory of a rank is predicted to be.
#include <cstdint>

#include "trlhpc/core/dtype.hpp"
#include "trlhpc/model/model_config.hpp"
#include "trlhpc/parallel/data_parallel/data_parallel.hpp"
#include "trlhpc/parallel/mesh/parallel_dims.hpp"

namespace trlhpc {

// The largest rank's bytes (tp rank 0 holds the replicated tensors too). Under a BF16 compute dtype a
// rank holding full units (DDP, ZeRO-1/2) also keeps their bf16 compute copies (ParameterUnit::compute).
MemoryAccount plan_memory(const ModelConfig& config, const ParallelDims& dims, ShardingKind sharding,
                          Offload offload = Offload::None, DType compute_dtype = DType::F32);

// One micro-batch as a rank sees it.
struct MicroBatchShape {
  int64_t rows = 1, seq_len = 1024;  // before sequence sharding (seq_len padded to dims.sequence_multiple())
  bool gradient_checkpointing = false;
  int64_t loss_chunk_tokens = 1024;
  DType compute_dtype = DType::F32;  // BF16 under --bf16 (the decoder's GEMM-input activations)
  // LoRA: the base takes no gradient, so a gathered unit comes without a full gradient buffer (the
  // adapters' own, r x (in + out) per module, are left out of the plan as small).
  bool frozen_base = false;
  // LoRA: the largest adapter unit's elements (with modules_to_save, a whole embedding or head copy),
  // gathered with its full gradient next to the base's unit under ZeRO-3 (its gradient under ZeRO-2).
  int64_t adapter_unit_elements = 0;
  // The CPU backend (its attention kernel's scratch lives in host memory and is counted); false on
  // CUDA, whose attention workspace the plan does not count (unmeasured: no GPU run yet).
  bool cpu_kernels = true;
};

struct StepMemoryPlan {
  MemoryAccount persistent;          // plan_memory
  int64_t gathered_unit_bytes = 0;   // the largest unit's full parameters + full gradient held in a step
  int64_t activation_bytes = 0;      // Decoder::activation_bytes for this micro-batch
  int64_t loss_bytes = 0;            // the fused loss's chunk buffers
  int64_t attention_bytes = 0;       // sequence attention buffers + the CPU attention kernel's scratch
  int64_t process_bytes = 0;         // set by the caller: process_resident_bytes() before loading
  int64_t persistent_bytes() const {
    return persistent.parameter_bytes + persistent.gradient_bytes + persistent.optimizer_bytes;
  }
  int64_t floor_bytes() const {
    return persistent_bytes() + gathered_unit_bytes + activation_bytes + loss_bytes + attention_bytes;
  }
  int64_t predicted_peak_bytes() const { return floor_bytes() + process_bytes; }
};

StepMemoryPlan plan_step_memory(const ModelConfig& config, const ParallelDims& dims, ShardingKind sharding,
                                const MicroBatchShape& batch, Offload offload = Offload::None);

// This process's resident memory now (VmRSS of /proc/self/status; 0 where it cannot be read).
int64_t process_resident_bytes();

}  // namespace trlhpc
