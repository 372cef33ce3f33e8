// What each profile keeps per rank (MemoryAccount after one training step), against DDP on the same
// world of N ranks (ARCHITECTURE.md "Parameters and sharding" table):
//   zero1  parameters full, gradients full + a 1/N shard, optimizer state 1/N
//   zero2  parameters full, gradients 1/N, optimizer state 1/N
//   zero3  parameters, gradients and optimizer state 1/N: in total <= DDP's / N plus one element of
//          padding per unit and buffer
// and the transient full-size unit buffers of ZeRO-2/3 stay a small multiple of one unit (a model of
// 24 layers, so that bound is far below one full copy of the model).
#include <mpi.h>

#include <cstdio>

#include "test_data_parallel_support.hpp"

namespace trlhpc {
namespace {

ModelConfig deep_tiny_config() {
  nlohmann::json j = nlohmann::json::parse(R"({
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 32, "intermediate_size": 40,
    "num_hidden_layers": 24, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 96,
    "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": true,
    "initializer_range": 0.2})");
  return ModelConfig::from_json(j, "deep_tiny_config");
}

MemoryAccount memory_after_one_step(const ModelConfig& config, ProcessGroups& groups, ShardingKind kind) {
  testing::Layout layout;
  layout.sharding = kind;
  auto ops = make_cpu_ops();
  Trainer trainer(config, *ops, groups, testing::trainer_options(layout));
  trainer.model().load_weights(weights_from_init(config, 3));
  const int64_t d = groups.dp().rank();
  std::vector<Batch> rows;
  for (int64_t i = 0; i < 2; ++i) rows.push_back(testing::synthetic_row(12, config.vocab_size, 5, 0, d * 2 + i));
  trainer.step({testing::concat_rows(rows)}, 1e-3);
  return trainer.memory();
}

TEST(DataParallelMemory, EachProfileShardsWhatItPromises) {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const ModelConfig config = deep_tiny_config();
  ProcessGroups groups(Mesh(ParallelDims{}.resolved(world)), MPI_COMM_WORLD);
  const int64_t N = world;

  const MemoryAccount ddp = memory_after_one_step(config, groups, ShardingKind::None);
  const MemoryAccount z1 = memory_after_one_step(config, groups, ShardingKind::Zero1);
  const MemoryAccount z2 = memory_after_one_step(config, groups, ShardingKind::Zero2);
  const MemoryAccount z3 = memory_after_one_step(config, groups, ShardingKind::Zero3);

  // DDP's buffers are padded to a multiple of N too, so its bytes divide exactly.
  EXPECT_EQ(ddp.transient_bytes, 0);
  EXPECT_EQ(z1.parameter_bytes, ddp.parameter_bytes);
  EXPECT_EQ(z1.gradient_bytes, ddp.gradient_bytes + ddp.gradient_bytes / N);
  EXPECT_EQ(z1.optimizer_bytes, ddp.optimizer_bytes / N);
  EXPECT_EQ(z2.parameter_bytes, ddp.parameter_bytes);
  EXPECT_EQ(z2.gradient_bytes, ddp.gradient_bytes / N);
  EXPECT_EQ(z2.optimizer_bytes, ddp.optimizer_bytes / N);
  EXPECT_EQ(z3.parameter_bytes, ddp.parameter_bytes / N);
  EXPECT_EQ(z3.gradient_bytes, ddp.gradient_bytes / N);
  EXPECT_EQ(z3.optimizer_bytes, ddp.optimizer_bytes / N);

  // Against the unpadded model: params + grads + Adam's two moments = 4 copies of every element.
  const int64_t units = parameter_unit_count(config), real = ParameterStore(config, *make_cpu_ops(), 1).total_numel();
  const int64_t z3_total = z3.parameter_bytes + z3.gradient_bytes + z3.optimizer_bytes;
  EXPECT_LE(z3_total, 4 * (real * 4 / N + units * 4)) << "zero3 per-rank bytes vs DDP's / " << N << " + padding";

  // Transient: a few gathered units plus the gradient buffers in flight (ShardedGradients bounds them).
  int64_t largest_unit = 0;
  ParameterStore probe(config, *make_cpu_ops(), N);
  for (const ParameterUnit& unit : probe.units()) largest_unit = std::max(largest_unit, unit.padded_numel * 4);
  EXPECT_LE(z2.transient_bytes, 8 * largest_unit);
  EXPECT_LE(z3.transient_bytes, 12 * largest_unit);
  EXPECT_LT(z3.transient_bytes, ddp.parameter_bytes / 2) << "zero3 must never hold a full copy of the model";

  if (rank == 0)
    std::printf("[ measured ] %d ranks, per rank bytes (params / grads / optimizer / transient): ddp %lld/%lld/%lld/%lld, "
                "zero1 %lld/%lld/%lld/%lld, zero2 %lld/%lld/%lld/%lld, zero3 %lld/%lld/%lld/%lld; largest unit %lld\n",
                world, (long long)ddp.parameter_bytes, (long long)ddp.gradient_bytes, (long long)ddp.optimizer_bytes,
                (long long)ddp.transient_bytes, (long long)z1.parameter_bytes, (long long)z1.gradient_bytes,
                (long long)z1.optimizer_bytes, (long long)z1.transient_bytes, (long long)z2.parameter_bytes,
                (long long)z2.gradient_bytes, (long long)z2.optimizer_bytes, (long long)z2.transient_bytes,
                (long long)z3.parameter_bytes, (long long)z3.gradient_bytes, (long long)z3.optimizer_bytes,
                (long long)z3.transient_bytes, (long long)largest_unit);
}

}  // namespace
}  // namespace trlhpc
