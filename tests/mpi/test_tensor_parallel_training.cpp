// Layout equivalence of tensor parallelism (Megatron-LM column/row/vocab-parallel, ARCHITECTURE.md
// "Parameters and sharding"): 10 AdamW steps (clipping and weight decay active) of the synthetic
// global batch on tp layouts that fill the world, composed with DDP / ZeRO-1/3 / hybrid and cp, with
// and without gradient checkpointing, must reproduce the single-process (MPI_COMM_SELF, tp 1) loss and
// grad-norm curves and eval loss; the tp slices gathered after training must match the reference's
// parameters. Models: tests/golden/qwen2_tiny (NH 4, KVH 2, V 96, qkv biases, untied: tp <= 2),
// tests/golden/qwen3_tiny (NH 4, KVH 2, HS 16, q/k norms, tied), and a
// random-init llama with every bias and tied embeddings (NH 8, KVH 4, F 48, V 128: tp <= 4), and
// tests/golden/llama_tiny (NH 4, KVH 1, every bias, tied). tp > KVH replicates each kv head on tp/KVH
// ranks (issue 6: qwen2_tiny at tp 4, llama_tiny at tp 2 and 4), whose k/v gradients are summed over
// the sharing sub-group.
//   np 1: tp 1;  np 2: tp 2 (DDP; ZeRO-3 + checkpointing);  np 4: tp 4 (DDP; ZeRO-3 + checkpointing),
//   tp 2 x dp_shard 2 (ZeRO-3), tp 2 x dp_shard 2 (ZeRO-1, checkpointing, 2 micro-batches), tp 2 x cp 2
//   (DDP);  np 8: tp 2 x dp_shard 2 x
//   cp 2 (ZeRO-2), tp 4 x dp 2 (DDP; ZeRO-3), tp 2 x dp_replicate 2 x dp_shard 2 (ZeRO-3).
// --tp_sequence_parallel (norms and residual stream split over tp, reduce-scatter/all-gather instead
// of all-reduce): np 2: tp 2 (DDP; ZeRO-3 + checkpointing; both with 2 micro-batches); np 4: tp 4 (DDP
// + checkpointing, 2 micro-batches), tp 2 x dp_shard 2 (ZeRO-2, 2 micro-batches), tp 2 x sp 2 (Ulysses); np 8: tp 2 x
// dp_shard 2 x cp 2 (ZeRO-3 + checkpointing), tp 4 x dp_shard 2 (ZeRO-1), tp 2 x dp_replicate 2 x
// dp_shard 2 (ZeRO-3, 2 micro-batches). Accumulation under DDP (where the store's gradients carry
// earlier micro-batches; ZeRO-2/3 hand each micro-batch a fresh unit buffer) checks that the row-partial
// norm gradients and the kv-shared k/v gradients are summed over tp for the current micro-batch only.
// qwen3_tiny also runs every case under --bf16 against the 1-rank --bf16 curve (bounds at kBf16Bound).
// Bound (fp32): relative 1e-5 on loss, grad norm and eval loss; parameters 1e-3 normalised error per unit
// (as the data-parallel test: Adam turns fp32 summation-order differences of near-zero gradients into
// lr-sized steps). Rank 0 prints the worst deviations measured.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "same_message.hpp"
#include "test_data_parallel_support.hpp"
#include "trlhpc/core/error.hpp"
#include "trlhpc/model/tensor_parallel.hpp"
#include "trlhpc/parallel/sequence/sequence_shard.hpp"

namespace trlhpc {
namespace {

using testing::CurveOptions;

struct TpCase {
  ParallelDims dims;
  ShardingKind sharding;
  bool checkpointing;
  int accumulation = 1;  // micro-batches per step (the dp rank's rows split evenly)
  std::string name() const {
    return dims.to_string() + ", " + sharding_name(sharding) + (checkpointing ? ", checkpointing" : "") +
           (accumulation > 1 ? ", accumulation " + std::to_string(accumulation) : "");
  }
};

std::vector<TpCase> cases_for(int world, const ModelConfig& config) {
  std::vector<TpCase> all;
  auto valid = [&](const ParallelDims& d) {
    try {
      validate_tensor_parallel(config, d.tp);  // kv heads split (tp | KVH) or replicated (KVH | tp)
      d.validate_model(static_cast<int>(config.num_attention_heads), static_cast<int>(config.num_key_value_heads));
      return true;
    } catch (const UserError&) {
      return false;
    }
  };
  auto add = [&](ParallelDims d, ShardingKind k, bool ckpt, int accumulation = 1) {
    // for_model: the mesh's kv_share groups follow the model's kv heads.
    if (valid(d) && d.world_size() == world)
      all.push_back({d.for_model(static_cast<int>(config.num_attention_heads), static_cast<int>(config.num_key_value_heads)),
                     k, ckpt, accumulation});
  };
  add({1, 1, 1, 1, 1}, ShardingKind::None, false);
  add({1, 1, 1, 1, 2}, ShardingKind::None, false);
  add({1, 1, 1, 1, 2}, ShardingKind::Zero3, true);
  add({1, 1, 1, 1, 4}, ShardingKind::None, false);
  add({1, 1, 1, 1, 4}, ShardingKind::Zero3, true);
  add({1, 2, 1, 1, 2}, ShardingKind::Zero3, false);
  add({1, 2, 1, 1, 2}, ShardingKind::Zero1, true, 2);
  add({1, 1, 2, 1, 2}, ShardingKind::None, false);
  add({1, 2, 2, 1, 2}, ShardingKind::Zero2, false);
  add({1, 2, 1, 1, 4}, ShardingKind::None, false);
  add({1, 2, 1, 1, 4}, ShardingKind::Zero3, false);
  add({2, 2, 1, 1, 2}, ShardingKind::Zero3, true);
  // Tp sequence parallel.
  add({1, 1, 1, 1, 2, true}, ShardingKind::None, false, 2);
  add({1, 1, 1, 1, 2, true}, ShardingKind::Zero3, true, 2);
  add({1, 1, 1, 1, 4, true}, ShardingKind::None, true, 2);
  add({1, 2, 1, 1, 2, true}, ShardingKind::Zero2, false, 2);
  add({1, 1, 1, 2, 2, true}, ShardingKind::None, false);
  add({1, 2, 2, 1, 2, true}, ShardingKind::Zero3, true);
  add({1, 2, 1, 1, 4, true}, ShardingKind::Zero1, false);
  add({2, 2, 1, 1, 2, true}, ShardingKind::Zero3, false, 2);
  return all;
}

ModelConfig biased_llama() {
  ModelConfig c;
  c.architecture = ModelArchitecture::Llama;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 4;
  c.head_dim = 4;
  c.vocab_size = 128;
  c.max_position_embeddings = 64;
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  c.tie_word_embeddings = true;
  c.initializer_range = 0.02;
  return c;
}

// Full parameters of every unit (tp slices all-gathered and reassembled), in full-spec order.
std::vector<std::vector<float>> full_parameters(Trainer& trainer, ProcessGroups& groups, const ModelConfig& config) {
  trainer.model().sharded_state().gather_full_parameters();
  Communicator& tp = groups.tp().host();  // host vectors
  std::vector<std::vector<float>> units;
  for (ParameterUnit& unit : trainer.model().store().units()) {
    std::vector<float> out;
    for (const ParameterSlot& slot : unit.slots) {
      std::vector<float> local(static_cast<size_t>(slot.numel)), gathered(local.size() * static_cast<size_t>(tp.size()));
      trainer.model().ops().copy_to_host(local.data(), trainer.model().store().param(slot.spec.name), local.size() * sizeof(float));
      tp.all_gather(local, std::span<float>(gathered));
      std::vector<float> full(static_cast<size_t>(shape_numel(tp_full_shape(slot.spec, tp.size()))));
      tp_assemble_full(slot.spec, tp.size(), gathered, full);
      out.insert(out.end(), full.begin(), full.end());
    }
    units.push_back(std::move(out));
  }
  trainer.model().sharded_state().release_full_parameters();
  (void)config;
  return units;
}

testing::Curve train_tp_curve(const ModelConfig& config, const std::function<UnitRangeSource(TpLayout)>& weights,
                              ProcessGroups& groups, const TpCase& tc, const CurveOptions& options) {
  auto ops = make_cpu_ops(options.compute);
  testing::Layout layout;
  layout.sharding = tc.sharding;
  layout.checkpointing = tc.checkpointing;
  TrainerOptions trainer_opts = testing::trainer_options(layout);
  trainer_opts.parallel.token_loss = options.token_loss;
  Trainer trainer(config, *ops, groups, trainer_opts);
  ParallelModel& model = trainer.model();
  EXPECT_EQ(model.decoder().tp_sequence_parallel(), tc.dims.tp_sequence_parallel && tc.dims.tp > 1);
  // Rows padded to the sequence multiple (a no-op for 16 tokens), then sharded over cp/sp.
  auto rank_tokens = [&](const Batch& b) { return model.shard_tokens(b); };
  model.load_weights(weights(model.tp_layout()));
  const int64_t D = groups.dp().size(), d = groups.dp().rank(), R = options.global_rows / D;
  testing::Curve curve;
  for (int64_t s = 0; s < options.steps; ++s) {
    // The dp rank's R rows as `accumulation` micro-batches of R / accumulation rows each.
    std::vector<Batch> micro;
    const int64_t per_micro = R / tc.accumulation;
    for (int64_t a = 0; a < tc.accumulation; ++a) {
      std::vector<Batch> rows;
      for (int64_t i = a * per_micro; i < (a + 1) * per_micro; ++i)
        rows.push_back(testing::synthetic_row(options.seq_len, config.vocab_size, options.data_seed, s, d * R + i));
      micro.push_back(rank_tokens(testing::concat_rows(rows)));
    }
    curve.steps.push_back(trainer.step(micro, options.lr));
  }
  std::vector<Batch> eval;
  for (int64_t row = d; row < options.global_rows; row += D)
    eval.push_back(rank_tokens(testing::synthetic_row(options.seq_len, config.vocab_size, options.data_seed + 1, 0, row)));
  curve.eval_loss = trainer.evaluate(eval);
  curve.final_params = full_parameters(trainer, groups, config);
  return curve;
}

// Bounds under --bf16 (the reference is the single-process --bf16 curve). Step 0 starts from the same
// weights, so only fp32 summation-order differences flipping the bf16 rounding of a few activations
// separate the layouts: loss and grad norm within 5e-4 (measured on qwen3_tiny 3.2e-6 and 2.1e-4; a
// missing tp sum of the q/k norm gradients moves step 0's grad norm by 8.0e-4). Later steps: Adam
// turns those flips into lr-sized parameter differences on this tiny, fast-moving model: 2e-2 on loss,
// grad norm and eval loss, 5e-2 on the parameters (measured 8.1e-4, 6.0e-3, 4.1e-4, 5.5e-3).
constexpr double kBf16FirstStepBound = 5e-4, kBf16Bound = 2e-2, kBf16ParamBound = 5e-2;

// later_bound (fp32 only): the bound on the steps after the first and on the eval loss, 1e-5 unless a
// model's curve amplifies rounding (see its test); step 0 is always held to 1e-5.
void expect_tp_layouts_match(const std::string& model, const ModelConfig& config,
                             const std::function<UnitRangeSource(TpLayout)>& weights, DType compute = DType::F32,
                             double later_bound = 1e-5, const TokenLoss& token_loss = {}) {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  CurveOptions options;
  options.seq_len = 16;  // divisible by 2*cp = 4
  options.compute = compute;
  options.token_loss = token_loss;  // the reference runs the same loss, through the fused kernel (tp 1)
  const bool bf16 = compute == DType::BF16;
  const double bound = bf16 ? kBf16Bound : later_bound, param_bound = bf16 ? kBf16ParamBound : 1e-3;
  const testing::Curve reference = testing::reference_curve(config, weights(TpLayout{}), options);
  double worst_loss = 0, worst_norm = 0, worst_eval = 0, worst_param = 0, worst_first = 0;
  for (const TpCase& tc : cases_for(world, config)) {
    ProcessGroups groups(Mesh(tc.dims), MPI_COMM_WORLD);
    const testing::Curve curve = train_tp_curve(config, weights, groups, tc, options);
    for (size_t s = 0; s < curve.steps.size(); ++s) {
      const double dl = testing::relative_difference(curve.steps[s].loss, reference.steps[s].loss);
      const double dn = testing::relative_difference(curve.steps[s].grad_norm, reference.steps[s].grad_norm);
      worst_loss = std::max(worst_loss, dl);
      worst_norm = std::max(worst_norm, dn);
      if (s == 0) worst_first = std::max({worst_first, dl, dn});
      if (rank == 0 && std::getenv("TP_TEST_VERBOSE")) std::printf("  step %zu loss %.3g norm %.3g\n", s, dl, dn);
      const double step_bound = s > 0 ? bound : bf16 ? kBf16FirstStepBound : 1e-5;
      EXPECT_LE(dl, step_bound) << model << " " << tc.name() << " step " << s << ": loss " << curve.steps[s].loss
                                << " vs " << reference.steps[s].loss;
      EXPECT_LE(dn, step_bound) << model << " " << tc.name() << " step " << s << ": grad norm "
                                << curve.steps[s].grad_norm << " vs " << reference.steps[s].grad_norm;
    }
    const double de = testing::relative_difference(curve.eval_loss, reference.eval_loss);
    worst_eval = std::max(worst_eval, de);
    EXPECT_LE(de, bound) << model << " " << tc.name() << ": eval loss";
    for (size_t u = 0; u < curve.final_params.size(); ++u) {
      ASSERT_EQ(curve.final_params[u].size(), reference.final_params[u].size());
      const double dp = testing::normalized_error(curve.final_params[u], reference.final_params[u]);
      worst_param = std::max(worst_param, dp);
      EXPECT_LE(dp, param_bound) << model << " " << tc.name() << " unit " << u;
    }
    if (rank == 0) std::printf("[tp] %s %s ok\n", model.c_str(), tc.name().c_str());
  }
  if (rank == 0)
    std::printf("[tp] %s%s np %d worst relative: loss %.3g, grad norm %.3g (step 0: %.3g), eval %.3g; params "
                "normalised %.3g\n", model.c_str(), bf16 ? " --bf16" : "", world, worst_loss, worst_norm, worst_first,
                worst_eval, worst_param);
}

TEST(TensorParallelTraining, Qwen2TinyMatchesTheSingleProcessCurve) {
  HfModelDir dir(testing::tests_dir() + "/golden/qwen2_tiny/model");
  expect_tp_layouts_match("qwen2_tiny", dir.config(), [&](TpLayout tp) { return weights_from_hf_dir(dir, tp); });
}

TEST(TensorParallelTraining, LlamaTinyWithOneKvHeadMatchesTheSingleProcessCurve) {
  HfModelDir dir(testing::tests_dir() + "/golden/llama_tiny/model");  // KVH 1: replicated on every tp rank
  ASSERT_EQ(dir.config().num_key_value_heads, 1);
  expect_tp_layouts_match("llama_tiny", dir.config(), [&](TpLayout tp) { return weights_from_hf_dir(dir, tp); });
}

// Qwen3: q/k norm weights replicated on every tp rank, their gradients summed over tp (and over the
// row shards under tp sequence parallel); head_dim 16 while hidden / heads is 8; tp 4 > KVH 2.
TEST(TensorParallelTraining, Qwen3TinyMatchesTheSingleProcessCurve) {
  HfModelDir dir(testing::tests_dir() + "/golden/qwen3_tiny/model");
  ASSERT_TRUE(dir.config().qk_norm);
  expect_tp_layouts_match("qwen3_tiny", dir.config(), [&](TpLayout tp) { return weights_from_hf_dir(dir, tp); });
}

// Sliding windows and RoPE-less layers are per-layer attention properties: every tp rank applies them
// to its own heads. mistral_tiny (window 3 on every layer, head_dim 16 != hidden / heads) and
// smollm3_tiny (layers 1, 3 without RoPE and with window 3; q/k/v/o and MLP biases, tied head).
TEST(TensorParallelTraining, SlidingWindowModelsMatchTheSingleProcessCurve) {
  for (const std::string name : {"mistral_tiny", "smollm3_tiny"}) {
    HfModelDir dir(testing::tests_dir() + "/golden/" + name + "/model");
    ASSERT_GT(dir.config().attention_window(1), 0) << name;
    expect_tp_layouts_match(name, dir.config(), [&](TpLayout tp) { return weights_from_hf_dir(dir, tp); });
  }
}

// Gemma 3: four (1 + w) norms per layer and the q/k norms replicated on every tp rank with their
// gradients summed over tp (and over the row shards under tp sequence parallel, four slots per layer),
// the post-attention / post-MLP norms applied after the row-parallel o/down reductions, GeGLU on each
// rank's F-slice, scaled embeddings of a vocab-parallel lookup, sliding and full layers with their own
// RoPE bases.
TEST(TensorParallelTraining, Gemma3TinyMatchesTheSingleProcessCurve) {
  HfModelDir dir(testing::tests_dir() + "/golden/gemma3_tiny/model");
  ASSERT_TRUE(dir.config().sandwich_norms && dir.config().qk_norm);
  expect_tp_layouts_match("gemma3_tiny", dir.config(), [&](TpLayout tp) { return weights_from_hf_dir(dir, tp); });
}

// Gemma 2: the attention softcap is a property of each rank's heads (the kernel caps its own scores),
// and the final-logit softcap meets the vocab-parallel loss: each rank caps its slice of the logits before
// the all-reduced max / sums (and TRL's metrics), and takes its dlogits back through the cap; sandwich
// norms without q/k norms; alternating sliding (window 3) and full layers.
// Step 0 (before any update) is held to 1e-5: measured <= 1.3e-7 at np 2 and 4, where
// leaving out either cap moves the loss by 1e-2 or more (unit.test_golden_transformers). Later steps:
// this 4-layer fixture amplifies fp32 rounding through AdamW (1.1e-6 after one step, up to 1.0e-4 on the
// grad norm by step 9 at np 4). The amplification is the model's, not the caps': the same weights with
// both caps removed (only code every other family runs) drift further, 2.7e-4 at np 4, while removing
// only one cap gives 1.9e-6 and 2.5e-6 at np 2. Held to 1e-3 after step 0, as the sliding-window
// models of tests/mpi/test_sequence_parallel_training.cpp are.
TEST(TensorParallelTraining, Gemma2TinyMatchesTheSingleProcessCurve) {
  HfModelDir dir(testing::tests_dir() + "/golden/gemma2_tiny/model");
  ASSERT_TRUE(dir.config().attn_logit_softcapping > 0 && dir.config().final_logit_softcapping > 0);
  expect_tp_layouts_match("gemma2_tiny", dir.config(), [&](TpLayout tp) { return weights_from_hf_dir(dir, tp); },
                          DType::F32, 1e-3);
}

// Label smoothing (eps 0.1) and DFT (issue 42) in the vocab-parallel loss: each rank's slice adds its
// sum of logits to one more all-reduce (smoothing), takes eps / V over the whole vocabulary and weights
// its dlogits by p_y from the all-reduced statistics (DFT); the curves must follow the 1-process ones,
// whose fused kernel computes the same losses on full rows (unit.test_cpu_token_loss). Step 0 (before
// any update: the loss and every gradient of the split kernels) is held to 1e-5 everywhere (measured
// <= 6e-8). Label smoothing keeps the plain bounds after it too (1e-5; measured 2e-8 loss, 3e-7 grad
// norm on qwen2_tiny at np 2). DFT is held to 1e-3 after step 0: its curve amplifies fp32 rounding by
// itself, not through tp. Measured on qwen2_tiny at tp 1 alone, 2 micro-batches against 1 (only the
// gradient summation order differs, same kernel) drift 2e-6 loss / 2e-5 grad norm by step 2 where the
// plain and smoothed losses stay below 2e-7; the tp 2 layouts, whose rounding differs more, reach
// 1.6e-5 / 9.4e-5 (the weight p_y feeds each step's parameter change back into the next loss' weights).
// qwen2_tiny (untied head), and gemma2_tiny, where the final-logit softcap meets the shaped gradient
// (after step 0 at 1e-3, as its plain test: see Gemma2TinyMatchesTheSingleProcessCurve).
TEST(TensorParallelTraining, SmoothedAndDftLossesMatchTheSingleProcessCurve) {
  HfModelDir qwen2(testing::tests_dir() + "/golden/qwen2_tiny/model");
  const auto qwen2_weights = [&](TpLayout tp) { return weights_from_hf_dir(qwen2, tp); };
  expect_tp_layouts_match("qwen2_tiny eps 0.1", qwen2.config(), qwen2_weights, DType::F32, 1e-5, TokenLoss{0.1f, false});
  expect_tp_layouts_match("qwen2_tiny dft", qwen2.config(), qwen2_weights, DType::F32, 1e-3, TokenLoss{0.0f, true});
  HfModelDir gemma2(testing::tests_dir() + "/golden/gemma2_tiny/model");
  ASSERT_GT(gemma2.config().final_logit_softcapping, 0);
  const auto gemma2_weights = [&](TpLayout tp) { return weights_from_hf_dir(gemma2, tp); };
  expect_tp_layouts_match("gemma2_tiny eps 0.1", gemma2.config(), gemma2_weights, DType::F32, 1e-3,
                          TokenLoss{0.1f, false});
  expect_tp_layouts_match("gemma2_tiny dft", gemma2.config(), gemma2_weights, DType::F32, 1e-3, TokenLoss{0.0f, true});
}

// --bf16 on the tp layouts (q/k norm inputs/outputs stored in bf16, their gradients fp32 and summed over
// tp): follows the single-process --bf16 curve within the bounds of kBf16Bound's comment.
TEST(TensorParallelTraining, Qwen3TinyBf16FollowsTheSingleProcessBf16Curve) {
  HfModelDir dir(testing::tests_dir() + "/golden/qwen3_tiny/model");
  expect_tp_layouts_match("qwen3_tiny", dir.config(), [&](TpLayout tp) { return weights_from_hf_dir(dir, tp); },
                          DType::BF16);
}

TEST(TensorParallelTraining, BiasedTiedLlamaMatchesTheSingleProcessCurve) {
  const ModelConfig config = biased_llama();
  expect_tp_layouts_match("llama_biased_tied", config, [&](TpLayout tp) { return weights_from_init(config, 5, tp); });
}

// A micro-batch whose token count tp sequence parallel cannot split, on one dp rank only: every rank
// raises the same UserError (the check is summed over the loss group before any collective of the
// forward), in training and in evaluation, instead of the other ranks waiting in a collective.
TEST(TensorParallelTraining, UnsplittableMicroBatchIsTheSameErrorOnEveryRank) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world % 2 != 0) GTEST_SKIP() << "needs tp 2";
  const ModelConfig config = biased_llama();
  const ParallelDims dims = ParallelDims{1, world / 2, 1, 1, 2, true}.resolved(world).for_model(
      static_cast<int>(config.num_attention_heads), static_cast<int>(config.num_key_value_heads));
  ProcessGroups groups(Mesh(dims), MPI_COMM_WORLD);
  auto ops = make_cpu_ops();
  Trainer trainer(config, *ops, groups, TrainerOptions{});
  trainer.model().load_weights(weights_from_init(config, 5, trainer.model().tp_layout()));
  // dp rank 0 gets 7 tokens (odd), the others 8.
  const Batch batch = testing::synthetic_row(groups.dp().rank() == 0 ? 7 : 8, config.vocab_size, 3, 0, groups.dp().rank());
  for (int evaluation = 0; evaluation < 2; ++evaluation) {
    std::string message;
    try {
      if (evaluation) trainer.evaluate({batch});
      else trainer.step({batch}, 1e-3);
    } catch (const UserError& e) {
      message = e.what();
    }
    EXPECT_NE(message.find("1 micro-batch(es)"), std::string::npos) << message;
    EXPECT_NE(message.find("tp_size 2"), std::string::npos) << message;
    testing::expect_identical_on_every_rank(message);
  }
}

}  // namespace
}  // namespace trlhpc
