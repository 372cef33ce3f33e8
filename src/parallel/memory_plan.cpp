#include "trlhpc/parallel/memory_plan.hpp"

#include <algorithm>

#include "trlhpc/model/parameter_names.hpp"
#include "trlhpc/model/tensor_parallel.hpp"

namespace trlhpc {
namespace {

constexpr int64_t kF32 = 4;

// Padded elements of every unit of tp rank 0 (it also holds the replicated tensors).
std::vector<int64_t> padded_unit_sizes(const ModelConfig& config, const ParallelDims& dims) {
  const int64_t fsdp = dims.fsdp();
  std::vector<int64_t> sizes;
  for (int u = 0; u < parameter_unit_count(config); ++u) {
    int64_t n = 0;
    for (const ParameterSpec& spec : unit_parameter_specs(config, u, TpLayout{dims.tp, 0})) n += spec.numel();
    sizes.push_back((n + fsdp - 1) / fsdp * fsdp);
  }
  return sizes;
}

}  // namespace

MemoryAccount plan_memory(const ModelConfig& config, const ParallelDims& dims, ShardingKind sharding) {
  int64_t full = 0, shard = 0;  // fp32 elements of all units on this rank: full and 1/fsdp shard
  for (const int64_t padded : padded_unit_sizes(config, dims)) {
    full += padded;
    shard += padded / dims.fsdp();
  }
  MemoryAccount m;
  m.parameter_bytes = kF32 * (sharding == ShardingKind::Zero3 ? shard : full);
  // ZeRO-1 keeps the full gradients it accumulates into plus the shard its reduce-scatter fills.
  m.gradient_bytes = kF32 * (sharding == ShardingKind::None    ? full
                             : sharding == ShardingKind::Zero1 ? full + shard
                                                               : shard);
  m.optimizer_bytes = 2 * kF32 * (sharding == ShardingKind::None ? full : shard);
  return m;
}

// Mirrors Decoder::ensure_buffers (allocate_layer_activations, Scratch::allocate): the same buffers,
// counted once each (tests/mpi/test_zero3_memory.cpp compares the two).
int64_t plan_activation_bytes(const ModelConfig& c, int64_t N, int64_t Nl, bool gradient_checkpointing) {
  const int64_t C = c.hidden_size, F = c.intermediate_size, QD = c.num_attention_heads * c.head_dim,
                KD = c.num_key_value_heads * c.head_dim, L = c.num_hidden_layers;
  const bool sharded = Nl < N;
  // One layer's saved forward (LayerActivations without x_in).
  const int64_t layer = 3 * Nl * C + 2 * Nl + 2 * N * QD + 2 * N * KD + N * c.num_attention_heads + 3 * N * F;
  int64_t n = L * Nl * C;                                    // x_in of every layer
  n += gradient_checkpointing ? layer + Nl * C : L * layer;  // the recomputed layer and its output, or all
  n += Nl * C + N * C + (sharded ? Nl * C : 0) + Nl;        // x_final, h_final, h_final_local, rstd_final
  n += Nl * C + N * C + (sharded ? Nl * C : 0) + Nl * C;    // dx, dh, dh_local, dtmp
  n += sharded ? N * C : 0;                                  // h_full = dx_full = row_out
  n += 2 * N * QD + 2 * N * KD + 3 * N * F;                  // dq, dattn, dk, dv, dact, dgate, dup
  return kF32 * n;
}

StepMemoryPlan plan_step_memory(const ModelConfig& config, const ParallelDims& dims, ShardingKind sharding,
                                const MicroBatchShape& batch) {
  StepMemoryPlan plan;
  plan.persistent = plan_memory(config, dims, sharding);
  const std::vector<int64_t> sizes = padded_unit_sizes(config, dims);
  const int64_t largest = *std::max_element(sizes.begin(), sizes.end());
  plan.gathered_unit_bytes = kF32 * largest * (sharding == ShardingKind::Zero3   ? 2
                                               : sharding == ShardingKind::Zero2 ? 1
                                                                                 : 0);
  const ModelConfig local = tp_local_config(config, dims.tp);
  const int64_t multiple = dims.sequence_multiple();
  const int64_t T = (batch.seq_len + multiple - 1) / multiple * multiple;
  const int64_t N = batch.rows * T / (int64_t{dims.cp} * dims.sp);  // this rank's tokens
  const int64_t Nl = dims.tp_sequence_parallel ? N / dims.tp : N;
  plan.activation_bytes = plan_activation_bytes(local, N, Nl, batch.gradient_checkpointing);
  // The head sees every token of the rank (gathered over tp under tp sequence parallel).
  const int64_t chunk = std::max<int64_t>(1, std::min(batch.loss_chunk_tokens, N));
  plan.loss_bytes = kF32 * chunk * (local.vocab_size + 2 * local.hidden_size);
  return plan;
}

}  // namespace trlhpc
