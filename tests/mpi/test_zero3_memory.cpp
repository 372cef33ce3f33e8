// ZeRO-3 memory per rank, counted at the allocator (heap_usage.hpp), on a 48-layer model whose full copy
// is many times one unit:
//   - set-up + load from a Hugging Face directory allocate the rank's sharded state (parameters,
//     gradients, Adam moments) plus at most one unit and a little bookkeeping: never the full model
//     (the store used to allocate full parameters and gradients before sharding them);
//   - the loaded shards hold the bits of the deterministic init the directory was written from, and a
//     load in small pieces gives the same bits as one in a single piece;
//   - the final Hugging Face export after a step holds at most one gathered unit and one tensor's copies
//     on top of what the rank held before (it used to gather every unit and copy the model to the host),
//     and writes exactly the trained parameters;
//   - plan_step_memory's activations equal Decoder::activation_bytes (with and without checkpointing).
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "heap_usage.hpp"
#include "test_data_parallel_support.hpp"
#include "trlhpc/model/hf_model_dir.hpp"
#include "trlhpc/io/safetensors.hpp"
#include "trlhpc/model/init.hpp"
#include "trlhpc/parallel/memory_plan.hpp"
#include "trlhpc/train/model_export.hpp"

namespace trlhpc {
namespace {

// Bookkeeping a phase may allocate besides tensors: JSON of the safetensors header, parameter specs,
// MPI's requests, gtest (~1 MiB measured). Far below the full model (27 MiB) that the old code
// allocated on top.
constexpr int64_t kSlackBytes = 2 << 20;

ModelConfig deep_config() {
  nlohmann::json j = nlohmann::json::parse(R"({
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 128, "intermediate_size": 256,
    "num_hidden_layers": 48, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
    "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": true,
    "initializer_range": 0.2})");
  return ModelConfig::from_json(j, "deep_config");
}

// Qwen3 (q/k norms: their inputs and statistics are saved too), head_dim 48 != hidden / heads.
ModelConfig qwen3_config() {
  nlohmann::json j = nlohmann::json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 128, "intermediate_size": 256,
    "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 48, "vocab_size": 256,
    "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "tie_word_embeddings": false, "initializer_range": 0.2})");
  return ModelConfig::from_json(j, "qwen3_config");
}

// Gemma 3: two more (Nl, C) F32 branch outputs with their rstd per layer and the dbranch scratch.
ModelConfig gemma3_config() {
  nlohmann::json j = nlohmann::json::parse(R"({
    "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 128,
    "intermediate_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 48, "vocab_size": 256, "max_position_embeddings": 64, "sliding_window": 4,
    "sliding_window_pattern": 2, "initializer_range": 0.2})");
  return ModelConfig::from_json(j, "gemma3_config");
}

constexpr uint64_t kSeed = 11;

// Rank 0 writes the init of kSeed as an F32 directory; every rank gets its path.
std::string write_model_dir(const ModelConfig& config, int rank) {
  char path[256] = {};
  if (rank == 0) {
    const std::string dir = testing::make_temp_dir("zero3_memory") + "/model";
    save_hf_model_dir(dir, config, [&](const ParameterSpec& spec, float* out) { init_parameter(config, spec, kSeed, out); });
    std::snprintf(path, sizeof path, "%s", dir.c_str());
  }
  MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
  return path;
}

TrainerOptions zero3_options(bool checkpointing) {
  TrainerOptions o;
  o.parallel.data_parallel.sharding = ShardingKind::Zero3;
  o.parallel.gradient_checkpointing = checkpointing;
  return o;
}

int64_t state_bytes(const MemoryAccount& m) { return m.parameter_bytes + m.gradient_bytes + m.optimizer_bytes; }

int64_t largest_unit_bytes(ParameterStore& store) {
  int64_t largest = 0;
  for (const ParameterUnit& unit : store.units()) largest = std::max(largest, unit.padded_numel * 4);
  return largest;
}

int64_t largest_tensor_bytes(const ModelConfig& config) {
  int64_t largest = 0;
  for (const ParameterSpec& spec : parameter_specs(config)) largest = std::max(largest, spec.numel() * 4);
  return largest;
}

std::vector<float> to_host(Ops& ops, const Tensor& t) {
  std::vector<float> host(static_cast<size_t>(t.numel()));
  ops.copy_to_host(host.data(), t, host.size() * sizeof(float));
  return host;
}

// The unit's flat buffer as the init defines it (its tensors back to back, zero padding).
std::vector<float> init_unit(const ModelConfig& config, int unit, int64_t padded_numel) {
  std::vector<float> flat(static_cast<size_t>(padded_numel), 0.0f);
  int64_t offset = 0;
  for (const ParameterSpec& spec : unit_parameter_specs(config, unit)) {
    init_parameter(config, spec, kSeed, flat.data() + offset);
    offset += spec.numel();
  }
  return flat;
}

TEST(Zero3Memory, LoadAndFinalSaveHoldTheShardPlusOneUnit) {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const ModelConfig config = deep_config();
  const std::string model_dir = write_model_dir(config, rank);
  ProcessGroups groups(Mesh(ParallelDims{}.resolved(world)), MPI_COMM_WORLD);
  auto ops = make_cpu_ops();

  // Set-up and load.
  MPI_Barrier(MPI_COMM_WORLD);
  testing::reset_heap_peak();
  const int64_t before_setup = testing::heap_bytes_in_use();
  auto trainer = std::make_unique<Trainer>(config, *ops, groups, zero3_options(true));
  {
    const HfModelDir dir(model_dir);
    trainer->model().load_weights(weights_from_hf_dir(dir, trainer->model().tp_layout()));
  }
  const int64_t setup_peak = testing::heap_peak_bytes() - before_setup;
  ParameterStore& store = trainer->model().store();
  const int64_t state = state_bytes(trainer->memory()), unit = largest_unit_bytes(store);
  int64_t full_model = 0;
  for (const ParameterUnit& u : store.units()) full_model += u.padded_numel * 4;
  EXPECT_LE(setup_peak, state + unit + kSlackBytes)
      << "set-up + load allocated " << setup_peak << " bytes at the peak; the sharded state is " << state
      << ", the largest unit " << unit << ", the full model " << full_model;

  // The loaded shards are the init's bits.
  for (int u = 0; u < store.num_units(); ++u) {
    const std::vector<float> want = init_unit(config, u, store.unit(u).padded_numel);
    const Tensor shard = trainer->model().sharded_state().owned_params()[static_cast<size_t>(u)];
    const OptimizerRange range = trainer->model().sharded_state().owned_ranges()[static_cast<size_t>(u)];
    const std::vector<float> got = to_host(*ops, shard);
    ASSERT_EQ(static_cast<int64_t>(got.size()), range.end - range.begin);
    for (int64_t i = 0; i < range.end - range.begin; ++i)
      ASSERT_EQ(std::memcmp(&got[static_cast<size_t>(i)], &want[static_cast<size_t>(range.begin + i)], 4), 0)
          << "unit " << u << " element " << range.begin + i << ": loaded " << got[static_cast<size_t>(i)] << ", init "
          << want[static_cast<size_t>(range.begin + i)];
  }
  // Pieces of 1000 elements (the piece boundaries fall inside tensors) give the same bits as one piece.
  {
    const HfModelDir dir(model_dir);
    const UnitRangeSource source = weights_from_hf_dir(dir);
    const int64_t n = store.unit(0).padded_numel;
    const Tensor one = ops->allocate({n}), pieces = ops->allocate({n});
    load_unit_range(source, *ops, 0, 0, n, one, n);
    load_unit_range(source, *ops, 0, 0, n, pieces, 1000);
    const std::vector<float> a = to_host(*ops, one), b = to_host(*ops, pieces);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "a load in pieces differs from a single piece";
  }

  // One step, so that the strategy's pool holds its cached unit buffers, then the final save.
  const int64_t d = groups.dp().rank();
  trainer->step({testing::synthetic_row(16, config.vocab_size, 5, 0, d)}, 1e-3);
  const std::string out_dir = model_dir + "-trained";
  trainer->model().strategy().release_cached_buffers();  // what the save frees first is not its saving
  MPI_Barrier(MPI_COMM_WORLD);
  testing::reset_heap_peak();
  const int64_t before_save = testing::heap_bytes_in_use();
  export_hf_model(trainer->model(), out_dir, "", rank == 0);
  const int64_t save_peak = testing::heap_peak_bytes() - before_save;
  // One gathered unit; per tensor the host copy, the tp all-gather and (writer) the reassembled tensor.
  const int64_t tensor = largest_tensor_bytes(config);
  EXPECT_LE(save_peak, unit + 3 * tensor + kSlackBytes)
      << "the final save allocated " << save_peak << " bytes at the peak; one unit is " << unit << ", one tensor "
      << tensor << ", the full model " << full_model;

  // The file holds the trained parameters (all units gathered at once: the independent path).
  trainer->model().sharded_state().gather_full_parameters();
  if (rank == 0) {
    const SafetensorsReader saved(out_dir + "/model.safetensors");
    for (const ParameterUnit& u : store.units())
      for (const ParameterSlot& slot : u.slots) {
        const std::vector<float> want = to_host(*ops, store.param(slot.spec.name));
        const std::vector<float> got = saved.read_f32(slot.spec.name);
        ASSERT_EQ(got.size(), want.size()) << slot.spec.name;
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << slot.spec.name << " differs in the file";
      }
  }
  trainer->model().sharded_state().release_full_parameters();
  if (rank == 0)
    std::printf("[ measured ] %d ranks: full model %lld B, sharded state %lld B, largest unit %lld B; set-up + load "
                "peak %lld B, final save peak %lld B (largest tensor %lld B)\n",
                world, (long long)full_model, (long long)state, (long long)unit, (long long)setup_peak,
                (long long)save_peak, (long long)tensor);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) std::filesystem::remove_all(std::filesystem::path(model_dir).parent_path());
}

TEST(Zero3Memory, PlannedActivationsEqualTheDecoders) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const ParallelDims dims = ParallelDims{}.resolved(world);
  ProcessGroups groups(Mesh(dims), MPI_COMM_WORLD);
  for (const ModelConfig& config : {deep_config(), qwen3_config(), gemma3_config()})
  for (const DType compute : {DType::F32, DType::BF16})  // --bf16 stores the GEMM-input activations in bf16
  for (const bool checkpointing : {false, true}) {
    auto ops = make_cpu_ops(compute);
    Trainer trainer(config, *ops, groups, zero3_options(checkpointing));
    trainer.model().load_weights(weights_from_init(config, kSeed));
    const int64_t d = groups.dp().rank();
    std::vector<Batch> rows;
    for (int64_t i = 0; i < 2; ++i) rows.push_back(testing::synthetic_row(16, config.vocab_size, 5, 0, d * 2 + i));
    trainer.step({testing::concat_rows(rows)}, 1e-3);
    const StepMemoryPlan plan =
        plan_step_memory(config, dims, ShardingKind::Zero3, MicroBatchShape{2, 16, checkpointing, 1024, compute});
    EXPECT_EQ(plan.activation_bytes, trainer.model().decoder().activation_bytes())
        << config.model_type() << ", checkpointing " << checkpointing << ", " << dtype_name(compute);
    EXPECT_EQ(plan.persistent_bytes(), state_bytes(trainer.memory()));
  }
}

// LoRA under ZeRO-3: the frozen base stays sharded (this rank's parameters are the base's and the
// adapters' fsdp shards, nothing more), only the adapters have gradients and AdamW state, the step's
// gathered-unit buffers hold base units without gradient buffers, and the plan's gathered-unit term for a
// frozen base is one unit's parameters (not parameters + gradient). With modules_to_save the embedding
// and head copies are adapter units of their own, sharded with gradients and AdamW state, and the plan
// adds the largest adapter unit's parameters + gradient to the base's unit.
void check_lora_zero3_memory(const std::vector<std::string>& modules_to_save) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const ModelConfig config = deep_config();
  const ParallelDims dims = ParallelDims{}.resolved(world);
  ProcessGroups groups(Mesh(dims), MPI_COMM_WORLD);
  auto ops = make_cpu_ops();
  TrainerOptions options = zero3_options(false);
  LoraConfig lora;
  lora.r = 4;
  lora.dropout = 0.1;
  lora.target_modules = {"all-linear"};
  lora.modules_to_save = modules_to_save;
  options.parallel.lora = lora;
  Trainer trainer(config, *ops, groups, options);
  ParallelModel& model = trainer.model();
  model.load_weights(weights_from_init(config, kSeed));
  model.load_adapters(lora_weights_from_init(config, model.lora_specs(), kSeed, base_tensors_from_init(config, kSeed)));
  const int64_t d = groups.dp().rank();
  std::vector<Batch> rows;
  for (int64_t i = 0; i < 2; ++i) rows.push_back(testing::synthetic_row(16, config.vocab_size, 5, 0, d * 2 + i));
  const StepResult r = trainer.step({testing::concat_rows(rows)}, 1e-3);
  EXPECT_TRUE(r.finite);
  EXPECT_GT(r.grad_norm, 0.0);
  int64_t base = 0, adapters = 0, largest_base = 0;
  for (const ParameterUnit& unit : model.base_store().units()) {
    base += unit.padded_numel;
    largest_base = std::max(largest_base, unit.padded_numel * 4);
    EXPECT_EQ(unit.grads.numel(), 0) << "a frozen base unit has a gradient buffer";
  }
  int64_t largest_adapter = 0;
  for (const ParameterUnit& unit : model.store().units()) {
    adapters += unit.padded_numel;
    largest_adapter = std::max(largest_adapter, unit.padded_numel);
  }
  // The copies are whole tensors of the model: the embedding (and the untied head copy) in units of their own.
  EXPECT_EQ(model.store().num_units(), config.num_hidden_layers + (modules_to_save.empty() ? 0 : 2));
  const MemoryAccount m = trainer.memory();
  EXPECT_EQ(m.parameter_bytes, 4 * (base + adapters) / world);
  EXPECT_EQ(m.gradient_bytes, 4 * adapters / world);
  EXPECT_EQ(m.optimizer_bytes, 2 * 4 * adapters / world);
  MicroBatchShape shape{2, 16, false, 1024, DType::F32};
  shape.frozen_base = true;
  shape.adapter_unit_elements = largest_adapter;
  EXPECT_EQ(plan_step_memory(config, dims, ShardingKind::Zero3, shape).gathered_unit_bytes,
            largest_base + 2 * 4 * largest_adapter);
  if (!modules_to_save.empty())
    EXPECT_GE(largest_adapter, config.vocab_size * config.hidden_size) << "the embedding copy is not a unit";
}

TEST(Zero3Memory, LoraKeepsTheFrozenBaseShardedWithoutGradients) { check_lora_zero3_memory({}); }

TEST(Zero3Memory, LoraModulesToSaveCopiesAreShardedAdapterUnits) {
  check_lora_zero3_memory({"embed_tokens", "lm_head"});
}

// --bf16: the training all-gathers of ZeRO-3 move bf16 (before_forward gives the decoder bf16(master),
// widened), while saving and export gather the fp32 masters (gather_unit_parameters).
TEST(Zero3Memory, Bf16TrainingGathersRoundSavingGathersDoNot) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const ModelConfig config = deep_config();
  ProcessGroups groups(Mesh(ParallelDims{}.resolved(world)), MPI_COMM_WORLD);
  auto ops = make_cpu_ops(DType::BF16);
  Trainer trainer(config, *ops, groups, zero3_options(false));
  trainer.model().load_weights(weights_from_init(config, kSeed));
  ParameterStore& store = trainer.model().store();
  DataParallelStrategy& strategy = trainer.model().strategy();
  ShardedStateView& state = strategy.state();
  const int unit = 1;
  const int64_t n = store.unit(unit).padded_numel;
  auto values = [&] {
    std::vector<float> v(static_cast<size_t>(n));
    ops->copy_to_host(v.data(), store.unit(unit).params, v.size() * sizeof(float));
    return v;
  };
  state.gather_unit_parameters(unit);  // fp32, for saving
  const std::vector<float> master = values();
  state.release_unit_parameters(unit);
  strategy.before_forward(unit);  // a training gather
  const std::vector<float> computed = values();
  size_t rounded_differs = 0;
  for (size_t i = 0; i < master.size(); ++i) {
    ASSERT_EQ(computed[i], bf16_to_f32(f32_to_bf16(master[i]))) << "element " << i;
    rounded_differs += computed[i] != master[i];
  }
  EXPECT_GT(rounded_differs, master.size() / 2) << "the training gather did not go through bf16";
  state.gather_unit_parameters(unit);  // saving while gathered for training: gathered again in fp32
  EXPECT_EQ(values(), master);
  state.release_unit_parameters(unit);
}

}  // namespace
}  // namespace trlhpc
