#include "trlhpc/parallel/memory_plan.hpp"

#include <algorithm>
#include <fstream>
#include <string>

#include "trlhpc/model/decoder.hpp"
#include "trlhpc/model/parameter_names.hpp"
#include "trlhpc/model/tensor_parallel.hpp"
#include "trlhpc/kernels/cpu.hpp"
#include "trlhpc/parallel/sequence/ring_attention.hpp"
#include "trlhpc/parallel/sequence/ulysses_attention.hpp"

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

MemoryAccount plan_memory(const ModelConfig& config, const ParallelDims& dims, ShardingKind sharding, Offload offload,
                          DType compute_dtype) {
  int64_t full = 0, shard = 0;  // fp32 elements of all units on this rank: full and 1/fsdp shard
  for (const int64_t padded : padded_unit_sizes(config, dims)) {
    full += padded;
    shard += padded / dims.fsdp();
  }
  MemoryAccount m;
  m.parameter_bytes = kF32 * (sharding == ShardingKind::Zero3 ? shard : full);
  if (sharding != ShardingKind::Zero3 && compute_dtype != DType::F32)
    m.parameter_bytes += static_cast<int64_t>(dtype_size(compute_dtype)) * full;
  // ZeRO-1 keeps the full gradients it accumulates into plus the shard its reduce-scatter fills.
  m.gradient_bytes = kF32 * (sharding == ShardingKind::None    ? full
                             : sharding == ShardingKind::Zero1 ? full + shard
                                                               : shard);
  m.optimizer_bytes = 2 * kF32 * (sharding == ShardingKind::None ? full : shard);
  if (offload == Offload::None) return m;
  // host_offload.hpp: the moments and a gradient staging copy of the owned range on the host, plus
  // its fp32 masters (Optimizer) or the parameter shard itself (Parameters, ZeRO-3).
  const int64_t owned = sharding == ShardingKind::None ? full : shard;
  m.host_bytes = m.optimizer_bytes + kF32 * owned + kF32 * owned;
  m.device_bytes_saved = m.optimizer_bytes + (offload == Offload::Parameters ? m.parameter_bytes : 0);
  m.optimizer_bytes = 0;
  if (offload == Offload::Parameters) m.parameter_bytes = 0;
  return m;
}

namespace {

// The sequence attention's buffers as SequenceAttention builds them for this layout (Ulysses over sp
// wrapping the ring over cp, or the plain kernel), each counted by its own allocation routine, plus
// the CPU kernel's scratch for its largest call: the ring calls it per row on one zigzag chunk of
// queries against up to both chunks of a block; Ulysses hands it every token and its share of heads.
int64_t planned_attention_bytes(const ModelConfig& local, const ParallelDims& dims, const MicroBatchShape& batch,
                                int64_t T) {
  const DType act = batch.compute_dtype;
  AttentionShape s{.B = batch.rows, .Tq = T / (int64_t{dims.cp} * dims.sp), .Tk = 0, .NH = local.num_attention_heads,
                   .KVH = local.num_key_value_heads, .HS = local.head_dim};
  s.Tk = s.Tq;
  int64_t bytes = 0;
  if (dims.sp > 1) {
    bytes += UlyssesAttention::planned_workspace_bytes(s, dims.sp, act);
    s = UlyssesAttention::head_sharded_shape(s, dims.sp);
  }
  int64_t kernel_B = s.B, kernel_Tq = s.Tq;
  if (dims.cp > 1) {
    bytes += RingAttention::planned_workspace_bytes(s, act, act);
    kernel_B = 1, kernel_Tq = s.Tq / 2;
  }
  if (batch.cpu_kernels) bytes += cpu::attention_scratch_bytes(kernel_B, kernel_Tq, s.Tk, s.NH, s.KVH, s.HS, true);
  return bytes;
}

}  // namespace

StepMemoryPlan plan_step_memory(const ModelConfig& config, const ParallelDims& dims, ShardingKind sharding,
                                const MicroBatchShape& batch, Offload offload) {
  StepMemoryPlan plan;
  plan.persistent = plan_memory(config, dims, sharding, offload, batch.compute_dtype);
  const std::vector<int64_t> sizes = padded_unit_sizes(config, dims);
  const int64_t largest = *std::max_element(sizes.begin(), sizes.end());
  const int64_t gradient = batch.frozen_base ? 0 : 1;  // a unit's full gradient buffer during its backward
  plan.gathered_unit_bytes = kF32 * largest * (sharding == ShardingKind::Zero3   ? 1 + gradient
                                               : sharding == ShardingKind::Zero2 ? gradient
                                                                                 : 0);
  plan.gathered_unit_bytes += kF32 * batch.adapter_unit_elements * (sharding == ShardingKind::Zero3   ? 2
                                                                     : sharding == ShardingKind::Zero2 ? 1
                                                                                                       : 0);
  // ZeRO-3 under --bf16 all-gathers a unit in bf16 and keeps that buffer as the unit's compute copy
  // while it is gathered (widened into the fp32 pool buffer beside it).
  if (sharding == ShardingKind::Zero3 && batch.compute_dtype != DType::F32)
    plan.gathered_unit_bytes += static_cast<int64_t>(dtype_size(batch.compute_dtype)) * largest;
  // Parameter offload copies the host shard to a device buffer before each all-gather.
  if (offload == Offload::Parameters) plan.gathered_unit_bytes += kF32 * largest / dims.fsdp();
  const ModelConfig local = tp_local_config(config, dims.tp);
  const int64_t multiple = dims.sequence_multiple();
  const int64_t T = (batch.seq_len + multiple - 1) / multiple * multiple;
  const int64_t N = batch.rows * T / (int64_t{dims.cp} * dims.sp);  // this rank's tokens
  const int64_t Nl = dims.tp_sequence_parallel ? N / dims.tp : N;
  plan.activation_bytes =
      Decoder::planned_activation_bytes(local, N, Nl, batch.gradient_checkpointing, batch.compute_dtype);
  plan.attention_bytes = planned_attention_bytes(local, dims, batch, T);
  // The head sees every token of the rank (gathered over tp under tp sequence parallel).
  const int64_t chunk = std::max<int64_t>(1, std::min(batch.loss_chunk_tokens, N));
  plan.loss_bytes = kF32 * chunk * (local.vocab_size + 2 * local.hidden_size);
  return plan;
}

int64_t process_resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "VmRSS:  123 kB"
  return 0;
}

}  // namespace trlhpc
